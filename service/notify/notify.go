// Package notify tells people about their work where they already are: an in-app list with unread state for
// every user, and messages through the channels an admin configures (mail over SMTP, DingTalk, Feishu and WeCom
// group robots, a generic signed webhook).
//
// It is fed by the engine's steps: the engine hands it the events it wants (Wants) within the step, and Take adds
// each recipient's in-app notification and one delivery per channel the tenant's settings name, rendered in the
// recipient's language, to the step's work (instep.go). An event it cannot render there (the users or settings are
// not cached) goes to the outbox as an event row; the dispatcher hands committed rows to HandleEvents, which writes
// the same rows in the dispatch's transaction. A step that rolls back wrote no row; a crash before the dispatch
// leaves the row for the next one; rows are keyed by the event, so a re-dispatched row, or an event handled on both
// paths, adds nothing. The delivery loop (Run) sends due deliveries
// through the channels, within each channel's rate (across replicas), with retries and back-off, and keeps a
// delivery log. An event name and its payload are all it reads (see eventPayload).
package notify

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/outbound"
)

// Store is what notify keeps in the database.
type Store interface {
	model.NotifyStore
}

// Links builds the addresses of the web app's pages that messages link to.
type Links interface {
	// TaskPage is the page of a task; phone selects the H5 page (IM messages are read on phones).
	TaskPage(taskID string, phone bool) string
	// InstancePage is the page of an instance (a request).
	InstancePage(instanceID string) string
	// InboxPage is the inbox.
	InboxPage(phone bool) string
}

// WebLinks are the pages of Halley's own web app under a base URL (HALLEY_PUBLIC_URL): /tasks/{id},
// /m/tasks/{id}, /instances/{id}, /inbox and /m/inbox.
type WebLinks string

// TaskPage implements Links.
func (b WebLinks) TaskPage(id string, phone bool) string {
	if phone {
		return string(b) + "/m/tasks/" + id
	}
	return string(b) + "/tasks/" + id
}

// InstancePage implements Links.
func (b WebLinks) InstancePage(id string) string { return string(b) + "/instances/" + id }

// InboxPage implements Links.
func (b WebLinks) InboxPage(phone bool) string {
	if phone {
		return string(b) + "/m/inbox"
	}
	return string(b) + "/inbox"
}

// FailureCounter counts deliveries given up after their last attempt, by channel kind (the metric
// halley_deliveries_failed_total{kind}).
type FailureCounter interface {
	DeliveryFailed(kind string)
}

// Deps are what the service needs; Store, Links, Outbound and SecretKey are required.
type Deps struct {
	Store Store
	// Links builds the links in messages (WebLinks of HALLEY_PUBLIC_URL).
	Links Links
	// Outbound is the guarded client every channel calls out with (HTTP robots, webhooks, SMTP relays).
	Outbound *outbound.Client
	// SecretKey seals channel configs at rest (derived from HALLEY_SECRET; every replica needs the same).
	SecretKey []byte
	// Failures, when set, counts deliveries given up.
	Failures FailureCounter
}

// DefaultBackoff is the wait after failed attempt 1, 2, 3...; the last entry repeats, each with up to 25% jitter.
var DefaultBackoff = []time.Duration{10 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 3 * time.Hour}

// Options tune the service; zero values take the defaults in brackets.
type Options struct {
	Clock  clock.Clock  // [clock.Real]
	Logger *slog.Logger // [slog.Default]
	// Timeout bounds one attempt (connection to last byte) [10s].
	Timeout time.Duration
	// Batch is how many deliveries of one channel one claim takes [10].
	Batch       int
	MaxAttempts int             // attempts before a delivery fails [8]
	Backoff     []time.Duration // [DefaultBackoff]
	Jitter      func() float64  // in [0, 1) [math/rand/v2.Float64]
	// Lease is how long a claimed delivery belongs to its sender; it must exceed Timeout [3 × Timeout].
	Lease        time.Duration
	PollInterval time.Duration // look for due deliveries when nothing woke the loop [1s]
	// TLSConfig is the base of SMTP connections' TLS (tests add their CA) [system roots].
	TLSConfig *tls.Config
	// OnAttempt is called after each attempt was recorded (a test signal).
	OnAttempt func(d *model.NotificationDelivery, r model.DeliveryResult)
	// CacheTTL is how long the users and settings in-step notifications are rendered from are used after they
	// were read (instep.go) [DefaultCacheTTL]; negative: every event goes through the outbox.
	CacheTTL time.Duration
}

// Service is the notification service.
type Service struct {
	store    Store
	links    Links
	seal     sealer
	tr       *transport
	failures FailureCounter
	opts     Options
	clock    clock.Clock
	log      *slog.Logger
	wake     chan struct{}

	mu      sync.Mutex
	blocked map[[2]string]time.Time // channel → when its rate frees a slot (this replica's view)

	cache *cache // what in-step notifications render from; nil: none are

	ids model.TimeIDs // the ids of notifications and deliveries, stamped with their creation time (the purge's key)
}

// New returns the service, or an error naming the missing dependency.
func New(d Deps, opts Options) (*Service, error) {
	for _, m := range []struct {
		name    string
		missing bool
	}{{"Store", d.Store == nil}, {"Links", d.Links == nil}, {"Outbound", d.Outbound == nil}, {"SecretKey", len(d.SecretKey) == 0}} {
		if m.missing {
			return nil, fmt.Errorf("notify: %s is required", m.name)
		}
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Batch <= 0 {
		opts.Batch = 10
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
		opts.Lease = 3 * opts.Timeout
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.TLSConfig == nil {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tr := &transport{out: d.Outbound, http: d.Outbound.HTTPClient(noRedirects), now: opts.Clock.Now, timeout: opts.Timeout,
		tlsConfig: opts.TLSConfig, userAgent: "Halley-Notify/1"}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	s := &Service{store: d.Store, links: d.Links, seal: newSealer(d.SecretKey), tr: tr, failures: d.Failures, opts: opts, clock: opts.Clock,
		log: opts.Logger, wake: make(chan struct{}, 1), blocked: map[[2]string]time.Time{}}
	if opts.CacheTTL > 0 {
		s.cache = newCache(opts.CacheTTL, opts.Clock.Now, s.load, opts.Logger.Warn)
	}
	return s, nil
}

// noRedirects: a robot or webhook that redirects is answered as it answered; following would send the
// message (and its signature) somewhere the admin did not configure.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Engine events notify reads, and the notified event each becomes (task.created of a resubmit task is
// task.returned; the engine's reminder event is task.reminder, task.reminded is accepted too).
var engineEvents = map[string]string{
	"task.created": model.NotifyTaskCreated, "task.reminder": model.NotifyTaskReminded, "task.reminded": model.NotifyTaskReminded,
	"task.urged": model.NotifyTaskUrged, "instance.completed": model.NotifyInstanceCompleted, "instance.rejected": model.NotifyInstanceRejected,
	"cc.created": model.NotifyCCCreated,
}

// Wants reports whether notify needs an engine event: those that tell someone of their work, for every tenant
// and template, whatever the subscriptions (engine.EventSink).
func (s *Service) Wants(_, event, _ string) bool {
	_, ok := engineEvents[event]
	return ok
}

// eventPayload is what notify reads of an engine event's outbox row: these fields and nothing else.
type eventPayload struct {
	Event string `json:"event"`
	// Key names the event (model.StepEvent.Key); rows written from an event without one are keyed by the outbox row.
	Key        string      `json:"key"`
	At         time.Time   `json:"at"`
	InstanceID string      `json:"instance_id"`
	Template   string      `json:"template"`
	Title      string      `json:"title"`
	Initiator  string      `json:"initiator"`
	NodeName   string      `json:"node_name"`
	Task       *model.Task `json:"task"`
	Users      []string    `json:"users"`
	Actor      string      `json:"actor"`
	Comment    string      `json:"comment"`
	// The texts in each language (zh-CN, en) the engine adds when the definition or instance has them: each
	// recipient reads their language's, else the plain one.
	TitleI18n    map[string]string `json:"title_i18n"`
	NodeI18n     map[string]string `json:"node_i18n"`
	TemplateName string            `json:"template_name"`
	TemplateI18n map[string]string `json:"template_i18n"`
}

// notice is one notified event for one person, before rendering.
type notice struct {
	key       string
	event     string
	tenant    string
	username  string
	at        time.Time
	data      Data
	link      func(phone bool) string
	inApp     string // the in-app link (a path of the web app)
	title     string
	step      string
	initiator string
	actor     string
	createdAt time.Time // of the task: for Waiting
	// per language (zh-CN, en): the title, the step's name and the template's name
	titleI18n, stepI18n, templateI18n map[string]string
	templateName                      string
}

// OutboxHandler handles model.OutboxEvent items (besides the subscriptions' handler: see outbox.All).
func (s *Service) OutboxHandler() func(ctx context.Context, items []model.OutboxItem) error {
	return s.HandleEvents
}

// HandleEvents turns a batch of event outbox items into in-app notifications and deliveries, in the
// transaction ctx carries (the dispatch's). Running it again with the same items adds nothing.
func (s *Service) HandleEvents(ctx context.Context, items []model.OutboxItem) error {
	var notices []*notice
	for _, it := range items {
		ev := it.Ref
		if _, ok := engineEvents[ev]; !ok {
			continue
		}
		var p eventPayload
		if err := json.Unmarshal(it.Payload, &p); err != nil {
			s.log.ErrorContext(ctx, "notify: unreadable event in the outbox; nobody is told of it", "seq", it.Seq, "event", ev, "err", err)
			continue
		}
		key := p.Key
		if key == "" {
			key = fmt.Sprintf("%d-%d", it.Seq, it.CreatedAt.UnixMicro())
		}
		notices = append(notices, s.noticesOf(key, it.TenantID, ev, &p)...)
	}
	if len(notices) == 0 {
		return nil
	}
	_, n, err := s.write(ctx, notices)
	if err != nil {
		return err
	}
	if n > 0 {
		s.Notify()
	}
	return nil
}

// noticesOf says who hears of one event; key names the event (the same on the in-step and the outbox path).
func (s *Service) noticesOf(key, tenant, ev string, p *eventPayload) []*notice {
	base := notice{key: key, event: engineEvents[ev], tenant: tenant, at: p.At,
		title: p.Title, step: p.NodeName, initiator: p.Initiator, actor: p.Actor,
		titleI18n: p.TitleI18n, stepI18n: p.NodeI18n, templateI18n: p.TemplateI18n, templateName: p.TemplateName}
	base.data = Data{Title: p.Title, Template: p.Template, InstanceID: p.InstanceID, Comment: p.Comment}
	instanceLink := func(bool) string { return s.links.InstancePage(p.InstanceID) }
	var who []string
	switch base.event {
	case model.NotifyTaskCreated, model.NotifyTaskReminded, model.NotifyTaskUrged:
		t := p.Task
		if t == nil || t.Assignee == "" || (ev == "task.created" && t.Status != model.TaskPending) {
			return nil
		}
		if t.Kind == model.TaskKindResubmit && base.event == model.NotifyTaskCreated {
			base.event = model.NotifyTaskReturned
		}
		who = []string{t.Assignee}
		base.data.TaskID, base.createdAt = t.ID, t.CreatedAt
		base.step = t.NodeName
		if base.title == "" {
			base.title = t.Title
		}
		if base.initiator == "" {
			base.initiator = t.Initiator
		}
		base.link = func(phone bool) string { return s.links.TaskPage(t.ID, phone) }
		base.inApp = "/tasks/" + t.ID
	case model.NotifyInstanceCompleted, model.NotifyInstanceRejected:
		who = []string{p.Initiator}
		base.link, base.inApp = instanceLink, "/instances/"+p.InstanceID
	case model.NotifyCCCreated:
		who = p.Users
		base.link, base.inApp = instanceLink, "/instances/"+p.InstanceID
	}
	var out []*notice
	seen := map[string]bool{}
	for _, u := range who {
		if u == "" || seen[u] || !model.IsPersonInitiator(u) {
			continue
		}
		seen[u] = true
		n := base
		n.username = u
		out = append(out, &n)
	}
	return out
}

// tenantView is what writing one tenant's notices reads once per batch.
type tenantView struct {
	settings *model.NotificationSettings
	channels map[string]*model.Channel
}

// write renders the notices and stores them with their deliveries; it returns how many notifications and how
// many deliveries are new.
func (s *Service) write(ctx context.Context, notices []*notice) (int, int, error) {
	byTenant := map[string][]*notice{}
	for _, n := range notices {
		byTenant[n.tenant] = append(byTenant[n.tenant], n)
	}
	now := s.clock.Now().UTC().Truncate(time.Microsecond)
	var inApp []*model.Notification
	var ds []*model.NotificationDelivery
	for tenant, ns := range byTenant {
		v, users, err := s.view(ctx, tenant, ns)
		if err != nil {
			return 0, 0, err
		}
		for _, n := range ns {
			u := users[n.username]
			if u == nil || u.Disabled {
				continue // not a user (any more), or disabled: they get no work and no news
			}
			in, out := s.render(ctx, v, u, users, n, now)
			inApp = append(inApp, in)
			ds = append(ds, out...)
		}
	}
	n, err := s.store.AddNotifications(ctx, inApp)
	if err != nil {
		return 0, 0, err
	}
	d, err := s.store.AddNotificationDeliveries(ctx, ds)
	return n, d, err
}

func (s *Service) view(ctx context.Context, tenant string, ns []*notice) (*tenantView, map[string]*model.User, error) {
	v, err := s.tenantView(ctx, tenant)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, n := range ns {
		names = append(names, n.username, n.initiator, n.actor)
	}
	slices.Sort(names)
	users, err := s.store.Users(ctx, tenant, slices.Compact(names))
	if err != nil {
		return nil, nil, err
	}
	return v, users, nil
}

// tenantView reads the tenant's settings and, when they send anything through channels, its channels.
func (s *Service) tenantView(ctx context.Context, tenant string) (*tenantView, error) {
	settings, err := s.store.NotificationSettings(ctx, tenant)
	if err != nil {
		return nil, err
	}
	v := &tenantView{settings: settings, channels: map[string]*model.Channel{}}
	if len(settings.Events) > 0 {
		chs, err := s.store.ListChannels(ctx, tenant)
		if err != nil {
			return nil, err
		}
		for _, c := range chs {
			v.channels[c.Name] = c
		}
	}
	return v, nil
}

// load reads what the cache asks for: the tenant's view (when view) and the users named.
func (s *Service) load(ctx context.Context, tenant string, names []string, view bool) (*tenantView, map[string]*model.User, error) {
	var v *tenantView
	if view {
		var err error
		if v, err = s.tenantView(ctx, tenant); err != nil {
			return nil, nil, err
		}
	}
	users := map[string]*model.User{}
	if len(names) > 0 {
		var err error
		if users, err = s.store.Users(ctx, tenant, names); err != nil {
			return nil, nil, err
		}
	}
	return v, users, nil
}

// language is the recipient's language: their own, else the tenant's, else Chinese.
func language(u *model.User, st *model.NotificationSettings) string {
	for _, l := range []string{u.Language, st.Language} {
		if l == LangZH || l == LangEN {
			return l
		}
	}
	return LangZH
}

// inLanguage is by[lang] when there is one, else plain.
func inLanguage(by map[string]string, lang, plain string) string {
	if v := by[lang]; v != "" {
		return v
	}
	return plain
}

func displayName(users map[string]*model.User, name string) string {
	if u := users[name]; u != nil && u.DisplayName != "" {
		return u.DisplayName
	}
	return name
}

// render writes one notice's in-app notification and its deliveries, in the recipient's language.
func (s *Service) render(ctx context.Context, v *tenantView, u *model.User, users map[string]*model.User, n *notice, now time.Time) (*model.Notification, []*model.NotificationDelivery) {
	d := n.data
	d.Event, d.Lang = n.event, language(u, v.settings)
	d.Recipient, d.Initiator, d.Actor = displayName(users, u.Username), displayName(users, n.initiator), displayName(users, n.actor)
	d.Step = inLanguage(n.stepI18n, d.Lang, n.step)
	if d.Title == "" {
		d.Title = n.title
	}
	d.Title = inLanguage(n.titleI18n, d.Lang, d.Title)
	d.TemplateName = inLanguage(n.templateI18n, d.Lang, n.templateName)
	if d.TemplateName == "" {
		d.TemplateName = d.Template
	}
	if !n.createdAt.IsZero() {
		d.Waiting = waiting(n.at.Sub(n.createdAt), d.Lang)
	}
	to := Recipient{Username: u.Username, DisplayName: d.Recipient, Email: u.Email, Mobile: u.Mobile, IMID: u.IMID, Language: d.Lang}
	msg := func(phone bool) *Message {
		d := d
		d.Link = n.link(phone)
		subject, body, err := render(v.settings.Templates, d)
		if err != nil {
			s.log.WarnContext(ctx, "notify: "+err.Error(), "tenant", n.tenant, "event", n.event)
		}
		return &Message{Event: n.event, At: n.at, Lang: d.Lang, Subject: subject, Text: body, Link: d.Link, InstanceID: d.InstanceID, TaskID: d.TaskID,
			Title: d.Title, Step: d.Step, To: to}
	}
	var web *Message
	if len(v.settings.Events[n.event]) == 0 {
		// No channel delivers the event: the notification keeps only the subject (renderSubject).
		d := d
		d.Link = n.link(false)
		subject, err := renderSubject(v.settings.Templates, d)
		if err != nil {
			s.log.WarnContext(ctx, "notify: "+err.Error(), "tenant", n.tenant, "event", n.event)
		}
		web = &Message{Subject: subject}
	} else {
		web = msg(false)
	}
	in := &model.Notification{ID: s.ids.Next(now), TenantID: n.tenant, Username: u.Username, Key: n.key + "/" + n.event, Event: n.event,
		InstanceID: d.InstanceID, TaskID: d.TaskID, Title: truncate(d.Title, 500), NodeName: truncate(d.Step, 200), Message: web.Subject,
		Link: n.inApp, At: now}
	var out []*model.NotificationDelivery
	for _, name := range v.settings.Events[n.event] {
		dl := &model.NotificationDelivery{ID: s.ids.Next(now), TenantID: n.tenant, Channel: name, Recipient: u.Username, Key: in.Key, Event: n.event,
			InstanceID: d.InstanceID, TaskID: d.TaskID, Status: model.DeliveryPending, CreatedAt: now, NextAttemptAt: &now}
		ch := v.channels[name]
		m := web
		switch {
		case ch == nil:
			dl.Kind, dl.Status, dl.LastError, dl.FinishedAt = "", model.DeliveryFailed, fmt.Sprintf("there is no channel named %q (the notification settings name it)", name), &now
		case ch.Kind == model.ChannelSMTP && u.Email == "":
			dl.Kind, dl.Status, dl.LastError, dl.FinishedAt = ch.Kind, model.DeliverySkipped, u.Username+" has no email address", &now
		default:
			dl.Kind = ch.Kind
			if ch.Kind == model.ChannelDingTalk || ch.Kind == model.ChannelFeishu || ch.Kind == model.ChannelWeCom {
				m = msg(true) // read on a phone: the H5 page
			}
		}
		dl.Message, _ = json.Marshal(m)
		out = append(out, dl)
	}
	return in, out
}

// Notify wakes the delivery loop. HandleEvents calls it, but its rows are visible only once the dispatch
// committed: the composition root also calls it after each dispatched batch.
func (s *Service) Notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// channelOf opens a channel's sealed config and builds its sender.
func (s *Service) channelOf(ch *model.Channel) (*channelConfig, Sender, error) {
	c, err := s.seal.open(ch.TenantID, ch.Name, ch.Secrets)
	if err != nil {
		return nil, nil, err
	}
	snd, err := s.tr.newSender(ch.Kind, ch.Name, c)
	return c, snd, err
}

// errorText is the error of an attempt for the log: never a secret (senders name hosts, not URLs).
func errorText(err error) string {
	return strings.TrimSpace(err.Error())
}
