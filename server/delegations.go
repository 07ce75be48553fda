package server

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/rules"
)

// Delegations (委托, out of office: API.md "Delegation") are the rules service's; urge is the engine's.

// createDelegation is POST /delegations: the caller's (or, for an admin, from's) new tasks go to `to` within the
// window. 422 naming the field when the delegation is refused; audited.
func (s *Server) createDelegation(c *gin.Context) {
	var req rules.DelegationRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	var d *model.Delegation
	err := s.record(c, model.AuditDelegationCreate, req.From, func(ctx context.Context, e *model.AuditEntry) error {
		var err error
		d, err = s.rules.CreateDelegation(ctx, principal(c), req)
		if err == nil {
			e.Target = d.ID
		}
		return err
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, d)
}

// listDelegations is GET /delegations: the caller's, both directions, that have not ended; ?user= for admins.
func (s *Server) listDelegations(c *gin.Context) {
	ds, err := s.rules.ListDelegations(c.Request.Context(), principal(c), c.Query("user"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, List[*model.Delegation]{Items: ds})
}

// deleteDelegation is DELETE /delegations/{id}: its delegator or an admin; audited.
func (s *Server) deleteDelegation(c *gin.Context) {
	err := s.record(c, model.AuditDelegationDelete, c.Param("id"), func(ctx context.Context, _ *model.AuditEntry) error {
		return s.rules.DeleteDelegation(ctx, principal(c), c.Param("id"))
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

type urgeRequest struct {
	Comment string `json:"comment"`
}

// urge is POST /instances/{id}/urge (催办): the initiator or an admin, while the instance runs; 429 with
// Retry-After within 10 minutes of the last urge.
func (s *Server) urge(c *gin.Context) {
	var req urgeRequest
	if err := bindOptionalJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	n, err := s.engine.Urge(c.Request.Context(), principal(c), c.Param("id"), req.Comment)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"tasks": n})
}
