package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/trigger"
)

func (s *Server) triggerSync(c *gin.Context)  { s.invokeTrigger(c, true) }
func (s *Server) triggerAsync(c *gin.Context) { s.invokeTrigger(c, false) }

// invokeTrigger serves ANY /trigger/sync|async/{module}/{function}. Authentication is the trigger's own
// (none, X-Halley-Token, or X-Halley-User + X-Halley-Password), checked by the trigger service.
func (s *Server) invokeTrigger(c *gin.Context, sync bool) {
	wait := 10 * time.Second
	if v := c.Query("wait"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 300 {
			fail(c, model.CodedError(model.EINVALID, "invalid_wait", "wait must be a whole number of seconds from 0 to 300"))
			return
		}
		wait = time.Duration(n) * time.Second
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		fail(c, decodeError(err))
		return
	}
	res, err := s.triggers.Invoke(c.Request.Context(), trigger.Call{Sync: sync, Module: c.Param("module"), Function: c.Param("function"),
		Method: c.Request.Method, RemoteIP: c.ClientIP(), Header: c.GetHeader, Body: body, Query: c.Request.URL.Query(), Wait: wait})
	if err != nil {
		if de, ok := err.(*model.Error); ok && de.Kind == "method_not_allowed" {
			c.Header("Allow", de.Details["allow"].(string))
		}
		fail(c, err)
		return
	}
	if !sync || !res.Done {
		c.JSON(http.StatusAccepted, res)
		return
	}
	c.JSON(http.StatusOK, res)
}

func (s *Server) getForm(c *gin.Context) {
	f, err := s.triggers.Form(c.Request.Context(), c.Param("key"), principal(c))
	if err != nil {
		fail(c, err)
		return
	}
	if s.attachments != nil {
		// The form's file fields say the limit before a file is chosen (an anonymous submitter has no GET /attachments).
		c.JSON(http.StatusOK, struct {
			*trigger.FormView
			AttachmentMaxSize int64 `json:"attachment_max_size"`
		}{f, s.attachments.MaxSize()})
		return
	}
	c.JSON(http.StatusOK, f)
}

func (s *Server) submitForm(c *gin.Context) {
	var values map[string]json.RawMessage
	if err := bindJSON(c, &values); err != nil {
		fail(c, err)
		return
	}
	raw, _ := json.Marshal(values)
	ids, err := s.checkAttachments(c.Request.Context(), principal(c), c.Param("key"), "", raw)
	if err != nil {
		fail(c, err)
		return
	}
	v, err := s.triggers.Submit(c.Request.Context(), c.Param("key"), principal(c), c.ClientIP(), raw)
	if err != nil {
		fail(c, err)
		return
	}
	s.linkAttachments(c.Request.Context(), tenantOf(principal(c)), v.ID, ids)
	c.JSON(http.StatusCreated, v)
}

func (s *Server) triggerLog(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
		return
	}
	items, err := s.triggers.Log(c.Request.Context(), principal(c).TenantID, c.Param("key"), pg.Limit)
	if err != nil {
		fail(c, err)
		return
	}
	if items == nil {
		items = []*model.TriggerLogEntry{}
	}
	c.JSON(http.StatusOK, gin.H{"items": items})
}
