package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/attachments"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/template"
)

// startRequest is the body of POST /instances (engine.StartParams).
type startRequest struct {
	Template        string          `json:"template"`
	Version         int             `json:"version"`
	Context         json.RawMessage `json:"context"`
	CorrelationID   string          `json:"correlation_id"`
	Title           string          `json:"title"`
	OverrideTrigger bool            `json:"override_trigger"`
	Initiator       string          `json:"initiator"`
}

// linearRequest is the body of POST /instances/linear (engine.LinearParams).
type linearRequest struct {
	Title         string                `json:"title"`
	Steps         []template.LinearStep `json:"steps"`
	Context       json.RawMessage       `json:"context"`
	CorrelationID string                `json:"correlation_id"`
}

// reasonRequest is the body of terminate and withdraw.
type reasonRequest struct {
	Reason string `json:"reason"`
}

// decideRequest is the body of approve, reject and reclaim.
type decideRequest struct {
	Comment string          `json:"comment"`
	Data    json.RawMessage `json:"data"`
	// Attachments are the ids of files uploaded to go with the comment.
	Attachments []string `json:"attachments"`
}

// transferRequest is the body of POST /tasks/{id}/transfer.
type transferRequest struct {
	To      string `json:"to"`
	Comment string `json:"comment"`
}

// addSignRequest is the body of POST /tasks/{id}/add-sign.
type addSignRequest struct {
	Users    []string `json:"users"`
	Position string   `json:"position"`
	Comment  string   `json:"comment"`
}

// moveRequest is the body of return and jump.
type moveRequest struct {
	To      string `json:"to"`
	Comment string `json:"comment"`
	Reason  string `json:"reason"`
}

// messageRequest is the body of POST /messages (engine.MessageParams).
type messageRequest struct {
	Name          string          `json:"name"`
	CorrelationID string          `json:"correlation_id"`
	Data          json.RawMessage `json:"data"`
	TTL           string          `json:"ttl"`
	MessageID     string          `json:"message_id"`
}

func (s *Server) startInstance(c *gin.Context) {
	var req startRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	ids, err := s.checkAttachments(c.Request.Context(), principal(c), "", "", req.Context)
	if err != nil {
		fail(c, err)
		return
	}
	var v *engine.InstanceView
	start := func(ctx context.Context, _ *model.AuditEntry) (err error) {
		v, err = s.engine.Start(ctx, principal(c), engine.StartParams(req))
		return err
	}
	if req.OverrideTrigger {
		// An admin skipping a template's own trigger (its form's members, an API trigger's credentials) is a
		// change to audit; the engine writes the entry with the start, the new instance as its target.
		err = s.record(c, model.AuditInstanceOverride, "", start)
	} else {
		err = start(c.Request.Context(), nil)
	}
	if err != nil {
		fail(c, err)
		return
	}
	s.linkAttachments(c.Request.Context(), tenantOf(principal(c)), v.ID, ids)
	c.JSON(http.StatusCreated, v)
}

func (s *Server) startLinear(c *gin.Context) {
	var req linearRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	ids, err := s.checkAttachments(c.Request.Context(), principal(c), "", "", req.Context)
	if err != nil {
		fail(c, err)
		return
	}
	v, err := s.engine.StartLinear(c.Request.Context(), principal(c), engine.LinearParams(req))
	if err != nil {
		fail(c, err)
		return
	}
	s.linkAttachments(c.Request.Context(), tenantOf(principal(c)), v.ID, ids)
	c.JSON(http.StatusCreated, v)
}

func (s *Server) listInstances(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
		return
	}
	switch c.Query("needs_attention") {
	case "", "false":
	case "true":
		items, next, err := s.engine.NeedsAttention(c.Request.Context(), principal(c), pg)
		if err != nil {
			fail(c, err)
			return
		}
		c.JSON(http.StatusOK, List[*model.AttentionItem]{Items: items, NextCursor: next})
		return
	default:
		fail(c, model.CodedError(model.EINVALID, "invalid_needs_attention", "needs_attention must be true or false"))
		return
	}
	items, next, err := s.engine.List(c.Request.Context(), principal(c), model.InstanceFilter{Status: model.InstanceStatus(c.Query("status")), Template: c.Query("template"),
		Initiator: c.Query("initiator"), CorrelationID: c.Query("correlation_id"), Page: pg})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, List[*model.Instance]{Items: items, NextCursor: next})
}

func (s *Server) getInstance(c *gin.Context) {
	v, err := s.engine.Get(c.Request.Context(), principal(c), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) instanceHistory(c *gin.Context) {
	h, err := s.engine.History(c.Request.Context(), principal(c), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	if h == nil {
		h = []model.HistoryEvent{}
	}
	c.JSON(http.StatusOK, gin.H{"items": h})
}

func (s *Server) instanceDiagram(c *gin.Context) {
	lang, err := diagramLang(c)
	if err != nil {
		fail(c, err)
		return
	}
	d, err := s.engine.Diagram(c.Request.Context(), principal(c), c.Param("id"), lang)
	if err != nil {
		fail(c, err)
		return
	}
	c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte(d))
}

func (s *Server) terminate(c *gin.Context) {
	var req reasonRequest
	if err := bindOptionalJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	var v *engine.InstanceView
	err := s.record(c, model.AuditInstanceTerminate, c.Param("id"), func(ctx context.Context, e *model.AuditEntry) (err error) {
		e.Reason = req.Reason
		v, err = s.engine.Terminate(ctx, principal(c), c.Param("id"), req.Reason)
		return err
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) withdraw(c *gin.Context) {
	var req reasonRequest
	if err := bindOptionalJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	v, err := s.engine.Withdraw(c.Request.Context(), principal(c), c.Param("id"), req.Reason)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) listTasks(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
		return
	}
	items, next, err := s.engine.ListTasks(c.Request.Context(), principal(c), model.TaskFilter{Assignee: c.Query("assignee"), Status: model.TaskStatus(c.Query("status")),
		InstanceID: c.Query("instance_id"), Page: pg})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, List[*model.Task]{Items: items, NextCursor: next})
}

func (s *Server) getTask(c *gin.Context) {
	t, err := s.engine.GetTask(c.Request.Context(), principal(c), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, t)
}

func (s *Server) approve(c *gin.Context) { s.decide(c, true) }
func (s *Server) reject(c *gin.Context)  { s.decide(c, false) }

func (s *Server) decide(c *gin.Context, approve bool) {
	var req decideRequest
	if err := bindOptionalJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	ctx, p := c.Request.Context(), principal(c)
	var ids []string
	if s.attachments != nil {
		if err := model.CheckAttachmentIDs("attachments", req.Attachments); err != nil {
			fail(c, err)
			return
		}
		// The task is read (as its reader: 404/403/410 as GET /tasks/{id}) only when the decision names attachments,
		// which are checked against its instance; a decision without any is checked by the step itself.
		if list, _ := json.Marshal(req.Attachments); len(attachments.Refs(req.Data, list)) > 0 {
			task, err := s.engine.GetTask(ctx, p, c.Param("id"))
			if err != nil {
				fail(c, err)
				return
			}
			if ids, err = s.checkAttachments(ctx, p, "", task.InstanceID, req.Data, list); err != nil {
				fail(c, err)
				return
			}
		}
	}
	refs := make([]model.FileRef, len(req.Attachments))
	for i, id := range req.Attachments {
		refs[i] = model.FileRef{ID: id}
	}
	if s.attachments != nil && len(req.Attachments) > 0 {
		var err error
		if refs, err = s.attachments.Describe(ctx, p.TenantID, req.Attachments); err != nil {
			fail(c, err)
			return
		}
	}
	var (
		t   *engine.Decided
		err error
	)
	if approve {
		t, err = s.engine.Approve(ctx, p, c.Param("id"), req.Comment, req.Data, refs...)
	} else {
		t, err = s.engine.Reject(ctx, p, c.Param("id"), req.Comment, req.Data, refs...)
	}
	if err != nil {
		fail(c, err)
		return
	}
	s.linkAttachments(ctx, p.TenantID, t.InstanceID, ids)
	c.JSON(http.StatusOK, t)
}

func (s *Server) transfer(c *gin.Context) {
	var req transferRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	t, err := s.engine.Transfer(c.Request.Context(), principal(c), c.Param("id"), req.To, req.Comment)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, t)
}

func (s *Server) addSign(c *gin.Context) {
	var req addSignRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	r, err := s.engine.AddSign(c.Request.Context(), principal(c), c.Param("id"), req.Users, req.Position, req.Comment)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, r)
}

func (s *Server) instanceBookmarks(c *gin.Context) {
	bs, err := s.engine.Bookmarks(c.Request.Context(), principal(c), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	if bs == nil {
		bs = []*model.Bookmark{}
	}
	c.JSON(http.StatusOK, gin.H{"items": bs})
}

type resumeRequest struct {
	Data json.RawMessage `json:"data"`
}

func (s *Server) resumeBookmark(c *gin.Context) {
	var req resumeRequest
	if err := bindOptionalJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	v, err := s.engine.ResumeBookmark(c.Request.Context(), principal(c), c.Param("id"), req.Data)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

// callback resumes a callback node; the body (any JSON) becomes context.<node_id>.
func (s *Server) callback(c *gin.Context) {
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		fail(c, decodeError(err))
		return
	}
	if len(body) > 0 && !json.Valid(body) {
		fail(c, model.CodedError(model.EINVALID, "malformed_json", "the callback body must be JSON"))
		return
	}
	v, err := s.engine.Callback(c.Request.Context(), principal(c), model.DefaultTenant, c.Param("execution_id"), c.Param("appinst_id"), c.Query("token"), body)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) sendMessage(c *gin.Context) {
	var req messageRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	r, err := s.engine.SendMessage(c.Request.Context(), principal(c), engine.MessageParams(req))
	if err != nil {
		fail(c, err)
		return
	}
	if r.Duplicate {
		c.JSON(http.StatusOK, r) // a message_id seen before: the first answer, nothing done
		return
	}
	c.JSON(http.StatusAccepted, r)
}

func (s *Server) listCC(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
		return
	}
	items, next, err := s.engine.ListCC(c.Request.Context(), principal(c), pg)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, List[*model.CCRecord]{Items: items, NextCursor: next})
}

func (s *Server) readCC(c *gin.Context) {
	if err := s.engine.MarkCCRead(c.Request.Context(), principal(c), c.Param("id")); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"id": c.Param("id"), "read": true})
}

func (s *Server) returnTask(c *gin.Context) {
	var req moveRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	v, err := s.engine.Return(c.Request.Context(), principal(c), c.Param("id"), req.To, req.Comment)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) returnTargets(c *gin.Context) {
	ts, noInitiator, err := s.engine.ReturnTargets(c.Request.Context(), principal(c), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	// no_initiator: the start is left out because nobody could resubmit (the initiator is not a person).
	c.JSON(http.StatusOK, gin.H{"items": ts, "no_initiator": noInitiator})
}

func (s *Server) reclaim(c *gin.Context) {
	var req decideRequest
	if err := bindOptionalJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	t, err := s.engine.Reclaim(c.Request.Context(), principal(c), c.Param("id"), req.Comment)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, t)
}

func (s *Server) jump(c *gin.Context) {
	var req moveRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	reason := req.Reason // the history's; a comment stands in for it
	if reason == "" {
		reason = req.Comment
	}
	var v *engine.InstanceView
	err := s.record(c, model.AuditInstanceJump, c.Param("id"), func(ctx context.Context, e *model.AuditEntry) (err error) {
		e.Reason = strings.TrimSpace(req.Reason + " " + req.Comment)
		v, err = s.engine.Jump(ctx, principal(c), c.Param("id"), req.To, reason)
		return err
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}
