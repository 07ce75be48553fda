package server

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/audit"
)

// record runs change as the caller's audited change of target (audit.Recorder.Record): the store transaction
// of the change writes the entry, or it is written right after.
func (s *Server) record(c *gin.Context, action, target string, change func(ctx context.Context, e *model.AuditEntry) error) error {
	return s.audit.Record(c.Request.Context(), principal(c), action, target, audit.Meta{IP: c.ClientIP(), RequestID: c.GetString(ctxRequestID)}, change)
}

// listAudit is GET /audit (admins): ?actor=&action=&from=&to= (RFC 3339; from inclusive, to exclusive),
// paginated, newest first. action may end in '*' to match a prefix ("template.*").
func (s *Server) listAudit(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
		return
	}
	f := audit.Filter{Actor: c.Query("actor"), Action: c.Query("action")}
	for _, q := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := c.Query(q.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				fail(c, model.CodedError(model.EINVALID, "invalid_"+q.name, "%s must be an RFC 3339 time like 2026-11-25T08:00:00Z (got %q)", q.name, v))
				return
			}
			*q.dst = t
		}
	}
	items, next, err := s.audit.List(c.Request.Context(), principal(c).TenantID, f, pg)
	if err != nil {
		fail(c, err)
		return
	}
	if items == nil {
		items = []*model.AuditEntry{}
	}
	c.JSON(http.StatusOK, List[*model.AuditEntry]{Items: items, NextCursor: next})
}
