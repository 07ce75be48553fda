package server

import (
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/notify"
)

// openapiNotifications documents in-app notifications, channels and their settings (notifications.go).
var openapiNotifications = []apiOp{
	{Method: "GET", Path: apiBase + "/notifications", Tag: "notifications", Sum: "My notifications, newest first, and the unread count",
		Auth: authUser, Query: []string{"status", "cursor", "limit"}, Resp: NotificationList{}},
	{Method: "POST", Path: apiBase + "/notifications/read-all", Tag: "notifications", Sum: "Mark all my notifications read", Auth: authUser,
		Resp: readAllDoc{}},
	{Method: "POST", Path: apiBase + "/notifications/:id/read", Tag: "notifications", Sum: "Mark one notification read", Auth: authUser,
		Status: 204},
	{Method: "POST", Path: apiBase + "/channels", Tag: "notifications", Sum: "Create a channel (smtp, dingtalk, feishu, wecom, webhook)",
		Auth: authAdmin, Body: notify.ChannelRequest{}, Status: 201, Resp: model.Channel{}},
	{Method: "GET", Path: apiBase + "/channels", Tag: "notifications", Sum: "List channels", Auth: authAdmin, Resp: List[*model.Channel]{}},
	{Method: "DELETE", Path: apiBase + "/channels/:name", Tag: "notifications", Sum: "Delete a channel", Auth: authAdmin, Status: 204},
	{Method: "POST", Path: apiBase + "/channels/:name/test", Tag: "notifications", Sum: "Send a test message through a channel",
		Desc: "502 bad_gateway when the channel's system refuses it.", Auth: authAdmin, Body: ChannelTest{}, Resp: channelTestDoc{}},
	{Method: "GET", Path: apiBase + "/notification-settings", Tag: "notifications", Sum: "The tenant's notification settings", Auth: authAdmin,
		Resp: model.NotificationSettings{}},
	{Method: "PUT", Path: apiBase + "/notification-settings", Tag: "notifications", Sum: "Change the tenant's notification settings",
		Auth: authAdmin, Body: model.NotificationSettings{}, Resp: model.NotificationSettings{}},
	{Method: "GET", Path: apiBase + "/notification-deliveries", Tag: "notifications", Sum: "The delivery log of channels", Auth: authAdmin,
		Query: []string{"status", "cursor", "limit"}, Resp: List[*model.NotificationDelivery]{}},
}

type readAllDoc struct {
	Read int `json:"read"`
}

type channelTestDoc struct {
	Channel   string `json:"channel"`
	Delivered bool   `json:"delivered"`
}
