package server

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/subscription"
)

// createSubscription serves POST /subscriptions (admin): 201 with the subscription; the secret is never echoed,
// has_secret says whether one is set.
func (s *Server) createSubscription(c *gin.Context) {
	var req subscription.CreateRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	var sub *model.Subscription
	// The target is the new subscription's id, which the store knows when it writes the entry.
	err := s.record(c, model.AuditSubscriptionCreate, "", func(ctx context.Context, _ *model.AuditEntry) (err error) {
		sub, err = s.subs.Create(ctx, principal(c), req)
		return err
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, sub)
}

func (s *Server) listSubscriptions(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
		return
	}
	items, next, err := s.subs.List(c.Request.Context(), principal(c).TenantID, pg)
	if err != nil {
		fail(c, err)
		return
	}
	if items == nil {
		items = []*model.Subscription{}
	}
	c.JSON(http.StatusOK, List[*model.Subscription]{Items: items, NextCursor: next})
}

func (s *Server) getSubscription(c *gin.Context) {
	sub, err := s.subs.Get(c.Request.Context(), principal(c).TenantID, c.Param("id"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, sub)
}

// deleteSubscription serves DELETE /subscriptions/{id} (admin): 204; its pending deliveries are dropped with it.
func (s *Server) deleteSubscription(c *gin.Context) {
	err := s.record(c, model.AuditSubscriptionDelete, c.Param("id"), func(ctx context.Context, _ *model.AuditEntry) error {
		return s.subs.Delete(ctx, principal(c), c.Param("id"))
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// listDeliveries serves GET /subscriptions/{id}/deliveries (admin): the delivery log, newest first.
func (s *Server) listDeliveries(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
		return
	}
	items, next, err := s.subs.Deliveries(c.Request.Context(), principal(c).TenantID, c.Param("id"), pg)
	if err != nil {
		fail(c, err)
		return
	}
	if items == nil {
		items = []*model.Delivery{}
	}
	c.JSON(http.StatusOK, List[*model.Delivery]{Items: items, NextCursor: next})
}
