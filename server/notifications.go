package server

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/notify"
)

// NotificationList is the answer of GET /notifications: a page of the caller's notifications and how many of
// all of them are unread (the badge).
type NotificationList struct {
	Items      []*model.Notification `json:"items"`
	NextCursor string                `json:"next_cursor"`
	Unread     int                   `json:"unread"`
}

// listNotifications serves GET /notifications?status=unread: the caller's notifications, newest first.
func (s *Server) listNotifications(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
		return
	}
	status := c.Query("status")
	if status != "" && status != "unread" && status != "all" {
		fail(c, model.CodedError(model.EINVALID, "invalid_status", "status must be unread or all (got %q)", status))
		return
	}
	items, next, unread, err := s.notify.Notifications(c.Request.Context(), principal(c), status == "unread", pg)
	if err != nil {
		fail(c, err)
		return
	}
	if items == nil {
		items = []*model.Notification{}
	}
	c.JSON(http.StatusOK, NotificationList{Items: items, NextCursor: next, Unread: unread})
}

// readNotification serves POST /notifications/{id}/read: 204; 404 when it is not the caller's.
func (s *Server) readNotification(c *gin.Context) {
	if err := s.notify.MarkRead(c.Request.Context(), principal(c), c.Param("id")); err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// readAllNotifications serves POST /notifications/read-all: 200 {"read": N}.
func (s *Server) readAllNotifications(c *gin.Context) {
	n, err := s.notify.MarkAllRead(c.Request.Context(), principal(c))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"read": n})
}

// createChannel serves POST /channels (admin): 201 with the channel; secrets are never echoed.
func (s *Server) createChannel(c *gin.Context) {
	var req notify.ChannelRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	var ch *model.Channel
	err := s.record(c, model.AuditChannelCreate, req.Name, func(ctx context.Context, _ *model.AuditEntry) (err error) {
		ch, err = s.notify.CreateChannel(ctx, principal(c), req)
		return err
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, ch)
}

func (s *Server) listChannels(c *gin.Context) {
	items, err := s.notify.Channels(c.Request.Context(), principal(c))
	if err != nil {
		fail(c, err)
		return
	}
	if items == nil {
		items = []*model.Channel{}
	}
	c.JSON(http.StatusOK, List[*model.Channel]{Items: items})
}

// deleteChannel serves DELETE /channels/{name} (admin): 204; its pending deliveries fail.
func (s *Server) deleteChannel(c *gin.Context) {
	err := s.record(c, model.AuditChannelDelete, c.Param("name"), func(ctx context.Context, _ *model.AuditEntry) error {
		return s.notify.DeleteChannel(ctx, principal(c), c.Param("name"))
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// ChannelTest is the body of POST /channels/{name}/test (optional).
type ChannelTest struct {
	// To is a username or an email address; default the caller.
	To string `json:"to"`
}

// testChannel serves POST /channels/{name}/test (admin): 200 once the channel accepted a test message, 502 with
// its answer (or the outbound guard's refusal) otherwise.
func (s *Server) testChannel(c *gin.Context) {
	var req ChannelTest
	if c.Request.ContentLength != 0 {
		if err := bindJSON(c, &req); err != nil {
			fail(c, err)
			return
		}
	}
	if err := s.notify.TestChannel(c.Request.Context(), principal(c), c.Param("name"), req.To); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"channel": c.Param("name"), "delivered": true})
}

func (s *Server) getNotificationSettings(c *gin.Context) {
	st, err := s.notify.Settings(c.Request.Context(), principal(c))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, st)
}

// putNotificationSettings serves PUT /notification-settings (admin): the whole settings document.
func (s *Server) putNotificationSettings(c *gin.Context) {
	var req model.NotificationSettings
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	var st *model.NotificationSettings
	err := s.record(c, model.AuditNotificationSettings, "notification-settings", func(ctx context.Context, _ *model.AuditEntry) (err error) {
		st, err = s.notify.PutSettings(ctx, principal(c), &req)
		return err
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, st)
}

// listNotificationDeliveries serves GET /notification-deliveries?status= (admin): the delivery log, newest first.
func (s *Server) listNotificationDeliveries(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
		return
	}
	items, next, err := s.notify.Deliveries(c.Request.Context(), principal(c), c.Query("status"), pg)
	if err != nil {
		fail(c, err)
		return
	}
	if items == nil {
		items = []*model.NotificationDelivery{}
	}
	c.JSON(http.StatusOK, List[*model.NotificationDelivery]{Items: items, NextCursor: next})
}
