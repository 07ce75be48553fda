// Package trigger starts instances from outside: crontab schedules (timers in the scheduler), synchronous and
// asynchronous API calls (/trigger/sync|async/{module}/{function}) and form submissions. It is told about every
// published version (its Publisher, given to the template service) to arm and disarm what the start node asks for,
// and keeps the index of which template starts on which message (the engine's POST /messages starts them).
package trigger

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	"golang.org/x/time/rate"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/template"
)

// Store is what the trigger service keeps.
type Store interface {
	model.TriggerStore
	model.TimerStore
	ListInstances(ctx context.Context, f model.InstanceFilter) ([]*model.Instance, string, error)
	// SetMessageTrigger records the message a template's latest version starts on (POST /messages finds it).
	SetMessageTrigger(ctx context.Context, tenant, key string, version int, message string) error
}

// Service is the trigger service.
type Service struct {
	store     Store
	templates *template.Service
	engine    *engine.Engine
	pub       *Publisher
	clock     clock.Clock
	log       *slog.Logger

	mu       sync.Mutex
	limiters map[string]*rate.Limiter // anonymous form submissions per client IP
}

// Deps are the trigger service's collaborators; all are required.
type Deps struct {
	Store     Store
	Templates *template.Service
	Engine    *engine.Engine
	// Publisher arms the next crontab fire after each fire (the one given to the template service).
	Publisher *Publisher
}

// Options tune the trigger service and its publisher; the zero value is the default.
type Options struct {
	Clock  clock.Clock  // default clock.Real{}
	Logger *slog.Logger // default slog.Default()
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// New returns the service, or an error naming the dependency that is missing.
func New(d Deps, opts Options) (*Service, error) {
	switch {
	case d.Store == nil:
		return nil, fmt.Errorf("trigger: Store is required")
	case d.Templates == nil:
		return nil, fmt.Errorf("trigger: Templates is required")
	case d.Engine == nil:
		return nil, fmt.Errorf("trigger: Engine is required")
	case d.Publisher == nil:
		return nil, fmt.Errorf("trigger: Publisher is required")
	}
	opts = opts.withDefaults()
	return &Service{store: d.Store, templates: d.Templates, engine: d.Engine, pub: d.Publisher, clock: opts.Clock, log: opts.Logger,
		limiters: map[string]*rate.Limiter{}}, nil
}

// Publisher keeps the start triggers of published versions in force: told about every version published
// (template.Publisher), it points the template's API routes at it and arms its crontab's next fire. It needs
// neither the template service nor the engine, so it is built before them and handed to the template service.
type Publisher struct {
	store Store
	sched scheduler.Scheduler
	clock clock.Clock
	log   *slog.Logger
}

// NewPublisher returns the publisher; crontab fires are armed in sched.
func NewPublisher(store Store, sched scheduler.Scheduler, opts Options) (*Publisher, error) {
	if store == nil || sched == nil {
		return nil, fmt.Errorf("trigger: a publisher needs a store and a scheduler")
	}
	opts = opts.withDefaults()
	return &Publisher{store: store, sched: sched, clock: opts.Clock, log: opts.Logger}, nil
}

var (
	_ template.Publisher     = (*Publisher)(nil)
	_ scheduler.TimerHandler = (*Service)(nil)
)

func apiRoutes(tenant, key string, c *template.Compiled) []model.APITriggerRoute {
	tr := c.Def.Start().Trigger
	if tr.Kind != model.TriggerSyncAPI && tr.Kind != model.TriggerAsyncAPI {
		return nil
	}
	return []model.APITriggerRoute{{TenantID: tenant, Module: tr.Module, Function: tr.Function, Key: key}}
}

// CheckPublish refuses a version whose API route another template owns (422 trigger_taken).
func (s *Publisher) CheckPublish(ctx context.Context, tenant, key string, c *template.Compiled) error {
	for _, r := range apiRoutes(tenant, key, c) {
		owner, _, err := s.store.APIRouteOwner(ctx, tenant, r.Module, r.Function)
		if err != nil {
			return err
		}
		if owner != "" && owner != key {
			return model.CodedError(model.EUNPROCESSABLE, "trigger_taken", "module %q function %q is already the trigger of template %q", r.Module, r.Function, owner).
				WithDetails(map[string]any{"errors": []model.ValidationError{model.NewValidationError(model.CodeBadNode, []string{c.Def.Start().ID},
					"module %q function %q is already the trigger of template %q", r.Module, r.Function, owner)}})
		}
	}
	return nil
}

// Published points the template's API routes and message start at the new version and re-arms its crontab
// schedule.
func (s *Publisher) Published(ctx context.Context, tenant, key string, c *template.Compiled) {
	if err := s.store.SetAPIRoutes(ctx, tenant, key, c.Version, apiRoutes(tenant, key, c)); err != nil {
		s.log.Error("trigger: unable to set API routes", "template", key, "version", c.Version, "err", err)
	}
	message := ""
	if tr := c.Def.Start().Trigger; tr.Kind == model.TriggerMessage {
		message = tr.Message
	}
	if err := s.store.SetMessageTrigger(ctx, tenant, key, c.Version, message); err != nil {
		s.log.Error("trigger: unable to set the message start", "template", key, "version", c.Version, "err", err)
	}
	ids, err := s.store.CancelCronTimers(ctx, tenant, key)
	if err != nil {
		s.log.Error("trigger: unable to cancel crontab timers", "template", key, "err", err)
	}
	if len(ids) > 0 {
		if err := s.sched.Cancel(ctx, ids...); err != nil {
			s.log.Error("trigger: unable to cancel crontab timers in the scheduler", "template", key, "err", err)
		}
	}
	tr := c.Def.Start().Trigger
	if tr.Kind == model.TriggerCrontab {
		if err := s.armCron(ctx, tenant, key, c.Version, tr, s.clock.Now()); err != nil {
			s.log.Error("trigger: unable to arm crontab", "template", key, "version", c.Version, "err", err)
		}
	}
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

type cronPayload struct {
	Version     int       `json:"version"`
	ScheduledAt time.Time `json:"scheduled_at"`
}

// armCron writes the next fire (strictly after `after`, inside the window) as a timer row and schedules it.
func (s *Publisher) armCron(ctx context.Context, tenant, key string, version int, tr model.Trigger, after time.Time) error {
	sched, err := cronParser.Parse(tr.Expr)
	if err != nil {
		return fmt.Errorf("trigger: bad crontab %q: %w", tr.Expr, err)
	}
	start, end, err := tr.Window()
	if err != nil {
		return err
	}
	from := after
	if !start.IsZero() && start.After(from) {
		from = start.Add(-time.Nanosecond)
	}
	next := sched.Next(from)
	if !end.IsZero() && next.After(end) {
		return s.store.AppendTriggerLog(ctx, &model.TriggerLogEntry{TenantID: tenant, Key: key, Version: version, Kind: model.TriggerCrontab,
			Action: "closed", At: s.clock.Now(), Detail: fmt.Sprintf("no fire before end_at %s: the schedule is closed", end.UTC().Format(time.RFC3339))})
	}
	payload, _ := json.Marshal(cronPayload{Version: version, ScheduledAt: next.UTC()})
	t := &model.Timer{ID: fmt.Sprintf("cron-%s-%s-%d", tenant, key, next.Unix()), TenantID: tenant, NodeID: key, Kind: model.TimerCrontab,
		DueAt: next, Status: model.TimerPending, Payload: payload}
	if err := s.store.SaveTimer(ctx, t); err != nil {
		return err
	}
	return s.sched.Schedule(ctx, scheduler.Item{ID: t.ID, Due: next})
}

// FireTimers fires crontab timers (scheduler.Handlers routes model.TimerCrontab here), one after another.
func (s *Service) FireTimers(ctx context.Context, timers []*model.Timer) []error {
	errs := make([]error, len(timers))
	for i, t := range timers {
		errs[i] = s.HandleCron(ctx, t)
	}
	return errs
}

// HandleCron fires a crontab timer: it starts an instance (unless allow_repeated is false and the previous one
// still runs — then the skip is logged) and arms the next fire after now, so fires missed while Halley was down
// collapse into this one. A re-delivered timer finds its instance by correlation id and does not start another.
func (s *Service) HandleCron(ctx context.Context, t *model.Timer) error {
	var p cronPayload
	if err := json.Unmarshal(t.Payload, &p); err != nil {
		return fmt.Errorf("trigger: bad crontab timer %s: %w", t.ID, err)
	}
	key, tenant := t.NodeID, t.TenantID
	c, err := s.templates.Compiled(ctx, tenant, key, 0)
	if err != nil {
		return err
	}
	if c.Version != p.Version || c.Def.Start().Trigger.Kind != model.TriggerCrontab {
		_, err := s.store.MarkTimerFired(ctx, t.ID, s.clock.Now()) // a newer version replaced this schedule
		return err
	}
	tr := c.Def.Start().Trigger
	corr := "cron:" + t.ID
	existing, _, err := s.store.ListInstances(ctx, model.InstanceFilter{TenantID: tenant, CorrelationID: corr, Page: model.Page{Limit: 1}})
	if err != nil {
		return err
	}
	entry := &model.TriggerLogEntry{TenantID: tenant, Key: key, Version: c.Version, Kind: model.TriggerCrontab, At: s.clock.Now()}
	switch {
	case len(existing) > 0:
		// Started before a crash or a lease expiry: do not start it twice.
	default:
		running := ""
		if !tr.AllowRepeated {
			if running, err = s.store.RunningInstance(ctx, tenant, key, model.InitiatorCron); err != nil {
				return err
			}
		}
		if running != "" {
			entry.Action, entry.InstanceID = "skipped", running
			entry.Detail = fmt.Sprintf("fire of %s skipped: instance %s from the previous fire is still running and allow_repeated is false", p.ScheduledAt.Format(time.RFC3339), running)
			s.log.Info("trigger: crontab fire skipped", "template", key, "running", running)
		} else {
			doc, _ := json.Marshal(map[string]any{"scheduled_at": p.ScheduledAt.UTC().Format(time.RFC3339)})
			v, err := s.engine.StartCompiled(ctx, tenant, model.InitiatorCron, c, doc, corr, fmt.Sprintf("%s %s", c.Key, p.ScheduledAt.UTC().Format("2006-01-02 15:04")))
			if err != nil {
				return err
			}
			entry.Action, entry.InstanceID = "started", v.ID
		}
		if err := s.store.AppendTriggerLog(ctx, entry); err != nil {
			return err
		}
	}
	after := s.clock.Now()
	if p.ScheduledAt.After(after) {
		after = p.ScheduledAt
	}
	if err := s.pub.armCron(ctx, tenant, key, c.Version, tr, after); err != nil {
		return err
	}
	_, err = s.store.MarkTimerFired(ctx, t.ID, s.clock.Now())
	return err
}

// Call is one request to an API trigger.
type Call struct {
	Sync             bool
	Module, Function string
	Method           string
	RemoteIP         string
	Header           func(string) string
	Body             []byte
	Query            url.Values
	Wait             time.Duration
}

// CallResult is what an API trigger answers.
type CallResult struct {
	InstanceID string               `json:"instance_id"`
	Status     model.InstanceStatus `json:"status"`
	Context    json.RawMessage      `json:"context,omitempty"`
	// Done is false when a sync call's wait ended before the instance did.
	Done bool `json:"-"`
}

// Invoke runs an API trigger: 404 no such route, 405 wrong method, 403 remote IP not allowed, 401 bad
// credentials, 400 body not a JSON object.
func (s *Service) Invoke(ctx context.Context, call Call) (*CallResult, error) {
	tenant := model.DefaultTenant
	key, version, err := s.store.APIRouteOwner(ctx, tenant, call.Module, call.Function)
	if err != nil {
		return nil, err
	}
	notFound := model.CodedError(model.ENOTFOUND, "trigger_not_found", "no %s trigger %s/%s", kindName(call.Sync), call.Module, call.Function)
	if key == "" {
		return nil, notFound
	}
	c, err := s.templates.Compiled(ctx, tenant, key, version)
	if err != nil {
		return nil, err
	}
	tr := c.Def.Start().Trigger
	if (call.Sync && tr.Kind != model.TriggerSyncAPI) || (!call.Sync && tr.Kind != model.TriggerAsyncAPI) {
		return nil, notFound
	}
	if !strings.EqualFold(call.Method, tr.HTTPMethod()) {
		return nil, model.CodedError("method_not_allowed", "method_not_allowed", "this trigger accepts %s, not %s", tr.HTTPMethod(), call.Method).
			WithDetails(map[string]any{"allow": tr.HTTPMethod()})
	}
	if err := checkIP(tr, call.RemoteIP); err != nil {
		return nil, err
	}
	if err := s.checkLogin(tr, call.Header); err != nil {
		return nil, err
	}
	doc, err := callContext(call.Body, call.Query)
	if err != nil {
		return nil, err
	}
	initiator, corr := "api:"+call.Module+"/"+call.Function, call.Header("X-Correlation-ID")
	if !call.Sync {
		v, err := s.engine.StartCompiled(ctx, tenant, initiator, c, doc, corr, "")
		if err != nil {
			return nil, err
		}
		return &CallResult{InstanceID: v.ID, Status: v.Status, Done: v.Ended()}, nil
	}
	// Sync: listen for the end before the start commits, so an end committed here needs no read.
	v, inst, err := s.engine.StartCompiledAndWait(ctx, tenant, initiator, c, doc, corr, "", call.Wait)
	if err != nil {
		return nil, err
	}
	res := &CallResult{InstanceID: v.ID, Status: v.Status, Context: v.Context, Done: v.Ended()}
	if inst != nil {
		res.Status, res.Context, res.Done = inst.Status, inst.Context, inst.Ended()
	}
	return res, nil
}

func kindName(sync bool) string {
	if sync {
		return "sync"
	}
	return "async"
}

func checkIP(tr model.Trigger, remote string) error {
	prefixes, err := tr.RemoteIPPrefixes()
	if err != nil || len(prefixes) == 0 {
		return err
	}
	ip, err := netip.ParseAddr(remote)
	if err == nil {
		ip = ip.Unmap()
		for _, p := range prefixes {
			if p.Contains(ip) {
				return nil
			}
		}
	}
	return model.CodedError(model.EFORBIDDEN, "ip_not_allowed", "requests from %s are not allowed for this trigger", remote)
}

// checkLogin checks an API call's credentials against the trigger's (stored keyed-hashed: template/secrets.go).
func (s *Service) checkLogin(tr model.Trigger, header func(string) string) error {
	bad := model.CodedError(model.EUNAUTHORIZED, "invalid_trigger_credentials", "missing or wrong trigger credentials")
	switch tr.Login() {
	case model.LoginToken:
		if !s.templates.SecretMatches(tr.HeaderToken, header("X-Halley-Token")) {
			return bad
		}
	case model.LoginPassword:
		userOK := subtle.ConstantTimeCompare([]byte(tr.HeaderUser), []byte(header("X-Halley-User"))) == 1
		if !s.templates.SecretMatches(tr.HeaderPassword, header("X-Halley-Password")) || !userOK || tr.HeaderUser == "" {
			return bad
		}
	}
	return nil
}

// callContext builds the context of an API-started instance: the JSON body (an object, or empty) plus the query
// parameters that the body does not set (one value → a string, several → a list).
func callContext(body []byte, q url.Values) (json.RawMessage, error) {
	m := map[string]any{}
	if b := strings.TrimSpace(string(body)); b != "" {
		dec := json.NewDecoder(strings.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil || m == nil {
			return nil, model.CodedError(model.EINVALID, "invalid_context", "the body must be a JSON object")
		}
		if err := model.CheckDocumentDepth("the body", []byte(b)); err != nil {
			return nil, err
		}
	}
	for k, vs := range q {
		if k == "wait" {
			continue
		}
		if _, ok := m[k]; ok {
			continue
		}
		if len(vs) == 1 {
			m[k] = vs[0]
		} else {
			m[k] = vs
		}
	}
	return json.Marshal(m)
}

// FormView is what GET /forms/{key} answers.
type FormView struct {
	Key          string          `json:"key"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Version      int             `json:"version"`
	Form         json.RawMessage `json:"form"`
	Members      []string        `json:"members"`
	RequireLogin bool            `json:"require_login"`
}

// formOf returns the compiled latest version of a form-started template and checks who may use it.
func (s *Service) formOf(ctx context.Context, key string, who *model.Principal) (*template.Compiled, *model.Trigger, error) {
	tenant := model.DefaultTenant
	if who != nil {
		tenant = who.TenantID
	}
	c, err := s.templates.Compiled(ctx, tenant, key, 0)
	if err != nil {
		if model.IsKind(err, model.EUNPROCESSABLE) {
			return nil, nil, model.CodedError(model.ENOTFOUND, "form_not_found", "no form %q", key)
		}
		return nil, nil, err
	}
	tr := c.Def.Start().Trigger
	if tr.Kind != model.TriggerForm {
		return nil, nil, model.CodedError(model.ENOTFOUND, "form_not_found", "template %q is not started by a form", key)
	}
	if tr.RequireLogin || len(tr.Members) > 0 {
		if who == nil {
			return nil, nil, model.CodedError(model.EUNAUTHORIZED, "login_required", "log in to use this form")
		}
		if len(tr.Members) > 0 && !slices.Contains(tr.Members, who.Username) && !who.IsAdmin() {
			return nil, nil, model.CodedError(model.EFORBIDDEN, "not_a_member", "this form is open to its members only")
		}
	}
	return c, &tr, nil
}

// Form returns a form-started template's form.
func (s *Service) Form(ctx context.Context, key string, who *model.Principal) (*FormView, error) {
	c, tr, err := s.formOf(ctx, key, who)
	if err != nil {
		return nil, err
	}
	t, err := s.templates.Get(ctx, model.DefaultTenant, key)
	if err != nil {
		return nil, err
	}
	members := tr.Members
	if members == nil {
		members = []string{}
	}
	return &FormView{Key: key, Name: t.Name, Description: t.Description, Version: c.Version, Form: tr.Form, Members: members, RequireLogin: tr.RequireLogin}, nil
}

// Submit starts an instance from form values. Anonymous submissions (allowed when the form neither requires a
// login nor lists members) are rate-limited per client IP.
func (s *Service) Submit(ctx context.Context, key string, who *model.Principal, clientIP string, values json.RawMessage) (*engine.InstanceView, error) {
	c, _, err := s.formOf(ctx, key, who)
	if err != nil {
		return nil, err
	}
	initiator, tenant := model.InitiatorAnonymous, model.DefaultTenant
	if who != nil {
		initiator, tenant = who.Username, who.TenantID
	} else if !s.allowAnonymous(clientIP) {
		return nil, model.CodedError(model.ERATELIMITED, "rate_limited", "too many anonymous submissions from %s; retry in a minute", clientIP)
	}
	doc, err := callContext(values, nil)
	if err != nil {
		return nil, err
	}
	// The start checks the file fields of every form of the template (template.Compiled.CheckFiles).
	return s.engine.StartCompiled(ctx, tenant, initiator, c, doc, "", "")
}

func (s *Service) allowAnonymous(ip string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.limiters[ip]
	if !ok {
		if len(s.limiters) > 10000 {
			s.limiters = map[string]*rate.Limiter{} // bounded memory; a reset only forgives
		}
		l = rate.NewLimiter(rate.Every(6*time.Second), 5) // 10 a minute, bursts of 5
		s.limiters[ip] = l
	}
	return l.Allow()
}

// Log returns what a template's start trigger did (started, skipped, closed), newest first.
func (s *Service) Log(ctx context.Context, tenant, key string, limit int) ([]*model.TriggerLogEntry, error) {
	if _, err := s.templates.Get(ctx, tenant, key); err != nil {
		return nil, err
	}
	return s.store.TriggerLog(ctx, tenant, key, limit)
}
