package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/engine"
)

func (s *Server) startInstance(c *gin.Context) {
	var req engine.StartRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	var v *engine.InstanceView
	start := func(ctx context.Context, _ *model.AuditEntry) (err error) {
		v, err = s.engine.Start(ctx, principal(c), req)
		return err
	}
	var err error
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
	c.JSON(http.StatusCreated, v)
}

func (s *Server) startLinear(c *gin.Context) {
	var req engine.LinearRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	v, err := s.engine.StartLinear(c.Request.Context(), principal(c), req)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, v)
}

func (s *Server) listInstances(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
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
	d, err := s.engine.Diagram(c.Request.Context(), principal(c), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte(d))
}

func (s *Server) terminate(c *gin.Context) {
	var req engine.ReasonRequest
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
	var req engine.ReasonRequest
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
	var req engine.DecideRequest
	if err := bindOptionalJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	var (
		t   *engine.Decided
		err error
	)
	if approve {
		t, err = s.engine.Approve(c.Request.Context(), principal(c), c.Param("id"), req)
	} else {
		t, err = s.engine.Reject(c.Request.Context(), principal(c), c.Param("id"), req)
	}
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, t)
}

func (s *Server) transfer(c *gin.Context) {
	var req engine.TransferRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	t, err := s.engine.Transfer(c.Request.Context(), principal(c), c.Param("id"), req)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, t)
}

func (s *Server) addSign(c *gin.Context) {
	var req engine.AddSignRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	r, err := s.engine.AddSign(c.Request.Context(), principal(c), c.Param("id"), req)
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
	var req engine.MessageRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	r, err := s.engine.SendMessage(c.Request.Context(), principal(c), req)
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
	var req engine.MoveRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	v, err := s.engine.Return(c.Request.Context(), principal(c), c.Param("id"), req)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}

func (s *Server) returnTargets(c *gin.Context) {
	ts, noInitiator, err := s.engine.ReturnTargetsWhy(c.Request.Context(), principal(c), c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	// no_initiator: the start is left out because nobody could resubmit (the initiator is not a person).
	c.JSON(http.StatusOK, gin.H{"items": ts, "no_initiator": noInitiator})
}

func (s *Server) reclaim(c *gin.Context) {
	var req engine.DecideRequest
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
	var req engine.MoveRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	var v *engine.InstanceView
	err := s.record(c, model.AuditInstanceJump, c.Param("id"), func(ctx context.Context, e *model.AuditEntry) (err error) {
		e.Reason = strings.TrimSpace(req.Reason + " " + req.Comment)
		v, err = s.engine.Jump(ctx, principal(c), c.Param("id"), req)
		return err
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, v)
}
