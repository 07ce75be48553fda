package model

import (
	"context"
	"slices"
	"time"
)

// EventAny subscribes to every event.
const EventAny = "*"

// Events are the engine events a subscription can ask for (besides EventAny). The engine writes an event to
// the outbox only when a subscription wants it (engine.EventSink).
var Events = []string{
	"instance.started", "node.activated", "task.created", "task.decided",
	"instance.completed", "instance.rejected", "instance.terminated", "instance.failed", "instance.withdrawn",
	"timer.fired", "task.reminder", "cc.created",
}

// ValidEvent reports whether name is one of Events or EventAny.
func ValidEvent(name string) bool { return name == EventAny || slices.Contains(Events, name) }

// Subscription asks for an event (or every event) of a tenant, optionally of one template only, to be delivered
// to a plugin or a webhook URL. Exactly one of Plugin and WebhookURL is set.
type Subscription struct {
	ID         string `json:"id"`
	TenantID   string `json:"-"`
	Event      string `json:"event"`
	Template   string `json:"template,omitempty"` // "" = every template
	Plugin     string `json:"plugin,omitempty"`
	WebhookURL string `json:"webhook_url,omitempty"`
	// Secret signs webhook bodies. It never leaves the server: responses carry HasSecret instead. In the store
	// it may be sealed (see service/subscription).
	Secret    string    `json:"-"`
	HasSecret bool      `json:"has_secret"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
}

// Matches reports whether the subscription wants event of template.
func (s *Subscription) Matches(event, template string) bool {
	return (s.Event == EventAny || s.Event == event) && (s.Template == "" || s.Template == template)
}

// Delivery statuses.
const (
	DeliveryPending   = "pending"   // due at NextAttemptAt (or in flight until then: the lease)
	DeliveryDelivered = "delivered" // the receiver answered 2xx
	DeliveryFailed    = "failed"    // every attempt failed
	DeliverySkipped   = "skipped"   // not deliverable by this build (plugin subscriptions, for now)
)

// Delivery is one event on its way to one subscription, and the log of its attempts.
type Delivery struct {
	ID             string `json:"id"`
	TenantID       string `json:"-"`
	SubscriptionID string `json:"subscription_id"`
	// OutboxKey identifies the outbox event the delivery came from; (SubscriptionID, OutboxKey) is unique.
	OutboxKey     string     `json:"-"`
	Event         string     `json:"event"`
	InstanceID    string     `json:"instance_id"`
	Body          []byte     `json:"-"` // the exact bytes POSTed (and signed), the same on every attempt
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	StatusCode    int        `json:"status_code"` // of the last attempt; 0 = no HTTP answer
	LastError     string     `json:"last_error"`
	NextAttemptAt *time.Time `json:"next_attempt_at"` // pending only
	CreatedAt     time.Time  `json:"created_at"`
	LastAttemptAt *time.Time `json:"last_attempt_at"`
	FinishedAt    *time.Time `json:"finished_at"`
	// Target is the subscription, with its secret, filled in by ClaimDeliveries (nil when it was deleted).
	Target *Subscription `json:"-"`
}

// DeliveryResult is the outcome of one attempt.
type DeliveryResult struct {
	ID            string
	Attempt       int // the attempt number ClaimDeliveries gave; a result for an older attempt is ignored
	Status        string
	StatusCode    int
	Error         string
	NextAttemptAt time.Time  // pending: when to try again
	FinishedAt    *time.Time // delivered or failed
}

// SubscriptionStore keeps subscriptions and their deliveries.
type SubscriptionStore interface {
	CreateSubscription(ctx context.Context, s *Subscription) error
	// GetSubscription returns ENOTFOUND for an unknown id (or one of another tenant).
	GetSubscription(ctx context.Context, tenant, id string) (*Subscription, error)
	// ListSubscriptions pages through a tenant's subscriptions, oldest first.
	ListSubscriptions(ctx context.Context, tenant string, page Page) ([]*Subscription, string, error)
	// AllSubscriptions returns every tenant's subscriptions without their secrets (the in-memory index).
	AllSubscriptions(ctx context.Context) ([]*Subscription, error)
	// DeleteSubscription deletes a subscription and its deliveries; ENOTFOUND when unknown.
	DeleteSubscription(ctx context.Context, tenant, id string) error
	// AddDeliveries inserts, in one transaction, the deliveries whose (SubscriptionID, OutboxKey) is new, and
	// returns how many it inserted. It writes nothing when all exist.
	AddDeliveries(ctx context.Context, ds []*Delivery) (int, error)
	// ClaimDeliveries leases up to n pending deliveries due at now until leaseUntil, counting an attempt for
	// each, with their Target. Replicas never claim the same delivery while its lease runs.
	ClaimDeliveries(ctx context.Context, n int, now, leaseUntil time.Time) ([]*Delivery, error)
	// FinishDelivery records an attempt's outcome; false when the attempt is no longer the delivery's latest.
	FinishDelivery(ctx context.Context, r DeliveryResult) (bool, error)
	// ListDeliveries pages through a subscription's deliveries, newest first.
	ListDeliveries(ctx context.Context, tenant, subscriptionID string, page Page) ([]*Delivery, string, error)
	// PurgeDeliveries deletes finished (delivered, failed, skipped) deliveries created before t.
	PurgeDeliveries(ctx context.Context, before time.Time) (int64, error)
}
