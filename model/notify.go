package model

import (
	"context"
	"slices"
	"time"
)

// Notified events: what people hear about (in the app, and through the channels the tenant's notification
// settings name). Most are engine events of the same name; NotifyTaskReturned is a task.created of a resubmit
// task (the instance came back to its initiator) and NotifyDigest is the daily digest.
const (
	NotifyTaskCreated       = "task.created"
	NotifyTaskReturned      = "task.returned"
	NotifyTaskReminded      = "task.reminded"
	NotifyTaskUrged         = "task.urged"
	NotifyInstanceCompleted = "instance.completed"
	NotifyInstanceRejected  = "instance.rejected"
	NotifyCCCreated         = "cc.created"
	NotifyDigest            = "digest"
)

// NotifyEvents are the keys PUT /notification-settings accepts in events and templates.
var NotifyEvents = []string{NotifyTaskCreated, NotifyTaskReturned, NotifyTaskReminded, NotifyTaskUrged, NotifyInstanceCompleted,
	NotifyInstanceRejected, NotifyCCCreated, NotifyDigest}

// ValidNotifyEvent reports whether name is one of NotifyEvents.
func ValidNotifyEvent(name string) bool { return slices.Contains(NotifyEvents, name) }

// Channel kinds.
const (
	ChannelSMTP     = "smtp"
	ChannelDingTalk = "dingtalk"
	ChannelFeishu   = "feishu"
	ChannelWeCom    = "wecom"
	ChannelWebhook  = "webhook"
)

// ChannelKinds lists the kinds POST /channels accepts.
var ChannelKinds = []string{ChannelSMTP, ChannelDingTalk, ChannelFeishu, ChannelWeCom, ChannelWebhook}

// Channel is an admin-managed way of reaching people outside Halley. Config holds the public fields; Secrets the
// secret ones, sealed (service/notify), and they never leave the server.
type Channel struct {
	TenantID  string         `json:"-"`
	Name      string         `json:"name"`
	Kind      string         `json:"kind"`
	Config    map[string]any `json:"config"`
	Secrets   string         `json:"-"`
	CreatedBy string         `json:"created_by"`
	CreatedAt time.Time      `json:"created_at"`
}

// AuditState is what the audit log shows of a channel: its public config, each secret field as "***".
func (c *Channel) AuditState() map[string]any {
	if c == nil {
		return nil
	}
	return map[string]any{"name": c.Name, "kind": c.Kind, "config": c.Config}
}

// Notification is one line of a user's in-app notification list.
type Notification struct {
	ID         string `json:"id"`
	TenantID   string `json:"-"`
	Username   string `json:"-"`
	Event      string `json:"event"`
	InstanceID string `json:"instance_id"`
	TaskID     string `json:"task_id"`
	// Title is the instance's title; NodeName the step; Message the whole short text in the user's language.
	Title    string `json:"title"`
	NodeName string `json:"node_name"`
	Message  string `json:"message"`
	// Link is the path of the page to open (/tasks/{id} or /instances/{id}), relative to the web app.
	Link   string     `json:"link"`
	At     time.Time  `json:"at"`
	Read   bool       `json:"read"`
	ReadAt *time.Time `json:"read_at"`
	// Key names what it came from (an outbox event, a digest day); (TenantID, Username, Key) is unique.
	Key string `json:"-"`
}

// NotificationDelivery is one message to one person through one channel, and the log of its attempts.
type NotificationDelivery struct {
	ID         string `json:"id"`
	TenantID   string `json:"-"`
	Channel    string `json:"channel"`
	Kind       string `json:"kind"`
	Recipient  string `json:"recipient"`
	Event      string `json:"event"`
	InstanceID string `json:"instance_id"`
	TaskID     string `json:"task_id"`
	// Key names what it came from; (TenantID, Channel, Recipient, Key) is unique.
	Key string `json:"-"`
	// Message is the rendered message (service/notify's JSON), the same on every attempt.
	Message       []byte     `json:"-"`
	Status        string     `json:"status"` // DeliveryPending, DeliveryDelivered, DeliveryFailed, DeliverySkipped
	Attempts      int        `json:"attempts"`
	LastError     string     `json:"last_error"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	CreatedAt     time.Time  `json:"created_at"`
	LastAttemptAt *time.Time `json:"last_attempt_at"`
	FinishedAt    *time.Time `json:"finished_at"`
}

// MessageTemplate is an admin's Go text/template of one event in one language.
type MessageTemplate struct {
	Subject string `json:"subject"`
	Body    string `json:"body"`
}

// NotificationSettings are a tenant's notification settings (PUT /notification-settings).
type NotificationSettings struct {
	// Language is the language of users who chose none ("zh-CN" or "en"; "" = zh-CN).
	Language string `json:"language"`
	// DigestHour is the hour (0-23, in TimeZone) of the daily digest of pending approvals; nil = no digest.
	DigestHour *int `json:"digest_hour"`
	// TimeZone is an IANA zone name for DigestHour ("" = UTC).
	TimeZone string `json:"timezone"`
	// Events maps a notified event to the names of the channels it goes to besides the app.
	Events map[string][]string `json:"events"`
	// Templates override the built-in messages: event → language → template.
	Templates map[string]map[string]MessageTemplate `json:"templates"`
	UpdatedBy string                                `json:"updated_by,omitempty"`
	UpdatedAt *time.Time                            `json:"updated_at,omitempty"`
}

// ChannelSend is what a claim of a channel's deliveries returns: the channel (with its sealed secrets), the
// deliveries leased, and when the channel's rate limit frees its next slot (zero when it is not the limit).
type ChannelSend struct {
	Channel    *Channel
	Deliveries []*NotificationDelivery
	NextFree   time.Time
}

// NotificationFilter selects a user's notifications.
type NotificationFilter struct {
	TenantID, Username string
	UnreadOnly         bool
	Page               Page
}

// NotifyStore keeps channels, notifications, their deliveries and the notification settings.
type NotifyStore interface {
	// CreateChannel returns ECONFLICT channel_exists when the name is taken.
	CreateChannel(ctx context.Context, c *Channel) error
	// GetChannel returns a channel with its sealed secrets; ENOTFOUND when unknown.
	GetChannel(ctx context.Context, tenant, name string) (*Channel, error)
	// ListChannels lists a tenant's channels by name (with their sealed secrets).
	ListChannels(ctx context.Context, tenant string) ([]*Channel, error)
	// DeleteChannel deletes a channel; its pending deliveries fail with "the channel was deleted". ENOTFOUND when
	// unknown.
	DeleteChannel(ctx context.Context, tenant, name string) error
	// FailChannelDeliveries fails the pending deliveries of a channel that does not exist (written by a step that
	// rendered from settings read before the channel was deleted) with "the channel was deleted"; it changes
	// nothing while the channel exists.
	FailChannelDeliveries(ctx context.Context, tenant, name string) (int64, error)
	// NotificationSettings returns the tenant's settings (zero settings when none were saved).
	NotificationSettings(ctx context.Context, tenant string) (*NotificationSettings, error)
	// AllNotificationSettings returns every tenant's saved settings, by tenant.
	AllNotificationSettings(ctx context.Context) (map[string]*NotificationSettings, error)
	// PutNotificationSettings saves the tenant's settings.
	PutNotificationSettings(ctx context.Context, tenant string, s *NotificationSettings) error
	// AddNotifications inserts the notifications whose (tenant, username, key) is new, in the transaction ctx
	// carries (the outbox dispatch) or its own, and returns how many it inserted.
	AddNotifications(ctx context.Context, ns []*Notification) (int, error)
	// AddNotificationDeliveries inserts the deliveries whose (tenant, channel, recipient, key) is new, likewise.
	AddNotificationDeliveries(ctx context.Context, ds []*NotificationDelivery) (int, error)
	// ListNotifications pages through a user's notifications, newest first.
	ListNotifications(ctx context.Context, f NotificationFilter) ([]*Notification, string, error)
	// CountUnread counts a user's unread notifications.
	CountUnread(ctx context.Context, tenant, username string) (int, error)
	// MarkNotificationRead marks one of the user's notifications read (again: no change); ENOTFOUND when it is
	// not theirs.
	MarkNotificationRead(ctx context.Context, tenant, username, id string, at time.Time) error
	// MarkAllNotificationsRead marks every unread notification of the user read and returns how many.
	MarkAllNotificationsRead(ctx context.Context, tenant, username string, at time.Time) (int, error)
	// DueChannels lists the (tenant, channel name) pairs that have deliveries due at now.
	DueChannels(ctx context.Context, now time.Time) ([][2]string, error)
	// ClaimChannelDeliveries leases up to n due deliveries of one channel until leaseUntil, counting an attempt
	// for each, but no more than the channel's rate (perMinute sends in any minute, across replicas; 0 = no
	// limit) allows. The channel's deliveries left due stay pending.
	ClaimChannelDeliveries(ctx context.Context, tenant, channel string, n, perMinute int, now, leaseUntil time.Time) (*ChannelSend, error)
	// FinishNotificationDelivery records an attempt's outcome; false when the attempt is no longer the latest.
	FinishNotificationDelivery(ctx context.Context, r DeliveryResult) (bool, error)
	// ListNotificationDeliveries pages through a tenant's delivery log, newest first; status "" = any.
	ListNotificationDeliveries(ctx context.Context, tenant, status string, page Page) ([]*NotificationDelivery, string, error)
	// PendingTaskCounts counts the pending tasks of each assignee of the tenant.
	PendingTaskCounts(ctx context.Context, tenant string) (map[string]int, error)
	// Users returns the tenant's users with these names (missing ones are left out).
	Users(ctx context.Context, tenant string, names []string) (map[string]*User, error)
	// PurgeNotifications deletes notifications and finished deliveries created before t.
	PurgeNotifications(ctx context.Context, before time.Time) (int64, error)
}
