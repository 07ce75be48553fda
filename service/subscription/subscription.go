// Package subscription lets admins subscribe a webhook URL (or, later, a plugin) to engine events, and delivers
// them: the engine asks Wants on its hot path (answered from an in-memory index), writes wanted events to its
// outbox, the outbox handler turns each into one delivery row per matching subscription, and the delivery loop
// POSTs them, signed, with retries and back-off, leaving a delivery log.
package subscription

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/outbound"
)

var _ engine.EventSink = (*Service)(nil)

// Store is what the service needs from the database.
type Store interface {
	model.SubscriptionStore
	// GetTemplate returns ENOTFOUND for an unknown template.
	GetTemplate(ctx context.Context, tenant, key string) (*model.Template, error)
}

// PluginRuns queues a plugin run with an event (the webhook body) as its context and returns the run id.
type PluginRuns interface {
	QueueEventPlugin(ctx context.Context, tenant, plugin, instanceID string, event json.RawMessage) (string, error)
}

// Plugins looks plugins up; when given, a plugin subscription must name an uploaded plugin.
type Plugins interface {
	// GetPlugin returns a version (0 = latest); ENOTFOUND when missing.
	GetPlugin(ctx context.Context, tenant, name string, version int) (*model.Plugin, error)
}

// DefaultBackoff is the wait after failed attempt 1, 2, 3...; the last entry repeats. Each wait gets up to
// 25% of random jitter added, so receivers that come back are not hit by every replica at once.
var DefaultBackoff = []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour}

// Options configure a Service. Zero values take the defaults in brackets.
type Options struct {
	Clock  clock.Clock  // [clock.Real]
	Logger *slog.Logger // [slog.Default]
	// Outbound sends webhooks and checks webhook URLs when they are subscribed [outbound.New with an empty allow
	// list: public addresses only]. The service adds its own redirect policy (at most 3 redirects, http/https
	// only, never from https to http) to the outbound guard's.
	Outbound    *outbound.Client
	Timeout     time.Duration   // per attempt, connection to last response byte [10s]
	Concurrency int             // deliveries in flight per process [8]
	MaxAttempts int             // attempts before a delivery is failed [8]
	Backoff     []time.Duration // [DefaultBackoff]
	// Jitter returns a number in [0, 1) [math/rand/v2.Float64]; tests pass a constant.
	Jitter func() float64
	// Lease is how long a claimed delivery belongs to its worker; past it another replica may try again. It must
	// exceed Timeout [1m].
	Lease           time.Duration
	RefreshInterval time.Duration // re-read of the subscriptions, for other replicas' changes [10s]
	PollInterval    time.Duration // look for due deliveries when nothing woke the loop [1s]
	// SecretKey, when set, seals webhook secrets at rest (AES-256-GCM with a key derived from it). Secrets stored
	// before it was set still work; sealed secrets need the same key on every replica.
	SecretKey []byte
	Plugins   Plugins
	// PluginRuns queues the plugin runs of plugin subscriptions; without it they are recorded as skipped.
	PluginRuns PluginRuns
	UserAgent  string // [Halley-Webhook/1]
	// OnAttempt is called after each attempt has been recorded (a test signal; metrics could hang here too).
	OnAttempt func(r model.DeliveryResult)
}

// Service manages subscriptions and delivers their events.
type Service struct {
	store  Store
	opts   Options
	clock  clock.Clock
	log    *slog.Logger
	client *http.Client
	aead   cipher.AEAD

	// idx is read without a lock by Wants; mu serialises the writers (reloads and changes made here) so that a
	// slow reload never replaces a newer index with an older read.
	idx  atomic.Pointer[index]
	mu   sync.Mutex
	wake chan struct{}
}

// New returns a service. It does no I/O: call Refresh (or Run) before the engine needs Wants.
func New(store Store, opts Options) *Service {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if len(opts.Backoff) == 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	if opts.Lease <= opts.Timeout {
		opts.Lease = max(time.Minute, 2*opts.Timeout)
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = 10 * time.Second
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "Halley-Webhook/1"
	}
	if opts.Outbound == nil {
		opts.Outbound = outbound.New(outbound.Options{})
	}
	client := opts.Outbound.HTTPClient(checkRedirect)
	s := &Service{store: store, opts: opts, clock: opts.Clock, log: opts.Logger, client: client, wake: make(chan struct{}, 1)}
	if len(opts.SecretKey) > 0 {
		k := sha256.Sum256(append([]byte("halley:subscription-secret:"), opts.SecretKey...))
		block, _ := aes.NewCipher(k[:]) // a 32-byte key cannot fail
		s.aead, _ = cipher.NewGCM(block)
	}
	s.idx.Store(&index{})
	return s
}

// index answers Wants without I/O and lists the subscriptions an event goes to.
type index struct {
	wants    map[wantKey]struct{}
	byTenant map[string][]*model.Subscription
	all      []*model.Subscription
}

// wantKey has Event "*" for any event and Template "" for any template.
type wantKey struct{ tenant, event, template string }

func newIndex(subs []*model.Subscription) *index {
	x := &index{wants: map[wantKey]struct{}{}, byTenant: map[string][]*model.Subscription{}, all: subs}
	for _, s := range subs {
		x.wants[wantKey{s.TenantID, s.Event, s.Template}] = struct{}{}
		x.byTenant[s.TenantID] = append(x.byTenant[s.TenantID], s)
	}
	return x
}

// Wants reports whether a subscription of the tenant wants the event of an instance of template. It reads the
// in-memory index only (the engine calls it inside its transactions).
func (s *Service) Wants(tenant, event, template string) bool {
	x := s.idx.Load()
	if len(x.wants) == 0 {
		return false
	}
	for _, k := range [...]wantKey{{tenant, event, template}, {tenant, event, ""}, {tenant, model.EventAny, template}, {tenant, model.EventAny, ""}} {
		if _, ok := x.wants[k]; ok {
			return true
		}
	}
	return false
}

// Refresh re-reads every subscription into the index (other replicas' changes arrive this way).
func (s *Service) Refresh(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.reload(ctx)
	return err
}

// reload must be called with mu held.
func (s *Service) reload(ctx context.Context) (*index, error) {
	subs, err := s.store.AllSubscriptions(ctx)
	if err != nil {
		return nil, err
	}
	x := newIndex(subs)
	s.idx.Store(x)
	return x, nil
}

// CreateRequest is the body of POST /subscriptions.
type CreateRequest struct {
	Event      string `json:"event"`
	Template   string `json:"template"`
	Plugin     string `json:"plugin"`
	WebhookURL string `json:"webhook_url"`
	Secret     string `json:"secret"`
}

const (
	maxURLLen    = 2048
	maxSecretLen = 256
)

var pluginNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)

// Create validates and stores a subscription. Codes: forbidden (403) for non-admins; invalid_event,
// invalid_target, invalid_webhook_url, invalid_plugin, invalid_secret (400); unknown_template, unknown_plugin,
// address_not_allowed (422: the webhook host is or resolves to a loopback, link-local, private or other
// non-public address that HALLEY_OUTBOUND_ALLOW does not list); subscription_exists (409) when the same event,
// template and target are already subscribed.
func (s *Service) Create(ctx context.Context, p *model.Principal, req CreateRequest) (*model.Subscription, error) {
	if !p.IsAdmin() {
		return nil, model.CodedError(model.EFORBIDDEN, "admin_required", "only admins manage subscriptions")
	}
	req.Event = strings.TrimSpace(req.Event)
	req.Template = strings.TrimSpace(req.Template)
	req.Plugin = strings.TrimSpace(req.Plugin)
	req.WebhookURL = strings.TrimSpace(req.WebhookURL)
	if !model.ValidEvent(req.Event) {
		return nil, model.CodedError(model.EINVALID, "invalid_event", "event %q is not one of %s or \"*\"", req.Event, strings.Join(model.Events, ", ")).
			WithDetails(map[string]any{"events": append(append([]string{}, model.Events...), model.EventAny)})
	}
	if (req.Plugin == "") == (req.WebhookURL == "") {
		return nil, model.CodedError(model.EINVALID, "invalid_target", "give exactly one of plugin and webhook_url")
	}
	if req.WebhookURL != "" {
		if err := ValidWebhookURL(req.WebhookURL); err != nil {
			return nil, err
		}
		if err := s.opts.Outbound.CheckURL(ctx, req.WebhookURL); err != nil {
			return nil, err
		}
	}
	if req.Plugin != "" {
		if !pluginNameRe.MatchString(req.Plugin) {
			return nil, model.CodedError(model.EINVALID, "invalid_plugin", "plugin %q must be 1-64 lowercase letters, digits and dashes", req.Plugin)
		}
		if req.Secret != "" {
			return nil, model.CodedError(model.EINVALID, "invalid_secret", "a secret signs webhook bodies; plugin subscriptions take none")
		}
	}
	if len(req.Secret) > maxSecretLen {
		return nil, model.CodedError(model.EINVALID, "invalid_secret", "secret must be at most %d bytes", maxSecretLen)
	}
	if req.Template != "" {
		if _, err := s.store.GetTemplate(ctx, p.TenantID, req.Template); err != nil {
			if model.IsKind(err, model.ENOTFOUND) {
				return nil, model.CodedError(model.EUNPROCESSABLE, "unknown_template", "template %q does not exist", req.Template)
			}
			return nil, err
		}
	}
	if req.Plugin != "" && s.opts.Plugins != nil {
		if _, err := s.opts.Plugins.GetPlugin(ctx, p.TenantID, req.Plugin, 0); err != nil {
			if model.IsKind(err, model.ENOTFOUND) {
				return nil, model.CodedError(model.EUNPROCESSABLE, "unknown_plugin", "plugin %q has not been uploaded", req.Plugin)
			}
			return nil, err
		}
	}

	sub := &model.Subscription{ID: uuid.NewString(), TenantID: p.TenantID, Event: req.Event, Template: req.Template, Plugin: req.Plugin,
		WebhookURL: req.WebhookURL, HasSecret: req.Secret != "", CreatedBy: p.Username, CreatedAt: s.clock.Now().UTC().Truncate(time.Microsecond)}
	sealed, err := s.seal(sub.ID, req.Secret)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	x, err := s.reload(ctx)
	if err != nil {
		return nil, err
	}
	for _, o := range x.byTenant[p.TenantID] {
		if o.Event == sub.Event && o.Template == sub.Template && o.Plugin == sub.Plugin && o.WebhookURL == sub.WebhookURL {
			return nil, model.CodedError(model.ECONFLICT, "subscription_exists", "subscription %s already sends %s events there", o.ID, o.Event).
				WithDetails(map[string]any{"id": o.ID})
		}
	}
	stored := *sub
	stored.Secret = sealed
	if err := s.store.CreateSubscription(ctx, &stored); err != nil {
		return nil, err
	}
	// The index never holds secrets: the delivery loop reads them with each claimed delivery.
	s.idx.Store(newIndex(append(append([]*model.Subscription{}, x.all...), sub)))
	s.log.InfoContext(ctx, "subscription created", "subscription_id", sub.ID, "tenant", sub.TenantID, "event", sub.Event,
		"template", sub.Template, "plugin", sub.Plugin, "webhook_host", hostOf(sub.WebhookURL), "by", p.Username)
	return sub, nil
}

// ValidWebhookURL returns invalid_webhook_url (400) unless raw is an absolute http(s) URL with a host, at most
// 2048 characters long.
func ValidWebhookURL(raw string) error {
	bad := func(why string) error {
		return model.CodedError(model.EINVALID, "invalid_webhook_url", "webhook_url %s", why)
	}
	if len(raw) > maxURLLen {
		return bad("must be at most 2048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("is not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("must start with http:// or https://")
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return bad("must name a host, e.g. https://example.com/hook")
	}
	return nil
}

// Get returns a subscription (without its secret); ENOTFOUND when unknown.
func (s *Service) Get(ctx context.Context, tenant, id string) (*model.Subscription, error) {
	sub, err := s.store.GetSubscription(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	sub.Secret = ""
	return sub, nil
}

// List pages through the tenant's subscriptions, oldest first.
func (s *Service) List(ctx context.Context, tenant string, page model.Page) ([]*model.Subscription, string, error) {
	subs, next, err := s.store.ListSubscriptions(ctx, tenant, page)
	for _, sub := range subs {
		sub.Secret = ""
	}
	return subs, next, err
}

// Delete removes a subscription and its delivery log; ENOTFOUND when unknown.
func (s *Service) Delete(ctx context.Context, p *model.Principal, id string) error {
	if !p.IsAdmin() {
		return model.CodedError(model.EFORBIDDEN, "admin_required", "only admins manage subscriptions")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.store.DeleteSubscription(ctx, p.TenantID, id); err != nil {
		return err
	}
	x := s.idx.Load()
	keep := make([]*model.Subscription, 0, len(x.all))
	for _, o := range x.all {
		if o.ID != id || o.TenantID != p.TenantID {
			keep = append(keep, o)
		}
	}
	s.idx.Store(newIndex(keep))
	s.log.InfoContext(ctx, "subscription deleted", "subscription_id", id, "tenant", p.TenantID, "by", p.Username)
	return nil
}

// Deliveries pages through a subscription's delivery log, newest first; ENOTFOUND for an unknown subscription.
func (s *Service) Deliveries(ctx context.Context, tenant, id string, page model.Page) ([]*model.Delivery, string, error) {
	if _, err := s.store.GetSubscription(ctx, tenant, id); err != nil {
		return nil, "", err
	}
	return s.store.ListDeliveries(ctx, tenant, id, page)
}

// PurgeDeliveries deletes finished deliveries created before t (a housekeeping job).
func (s *Service) PurgeDeliveries(ctx context.Context, before time.Time) (int64, error) {
	return s.store.PurgeDeliveries(ctx, before)
}
