// Package engine is the only code that changes an instance. One call = one database transaction that locks the
// instance row, applies an action, advances every automatic step it can (recursively, as Comet does), and writes
// the new node and task states, the history and the side effects (timers, plugin runs, events) as outbox rows.
package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/template"
)

// Store is what the engine keeps in the database, as one interface: instances changed one at a time and in
// groups (group commit, batched timers), the plugin versions and runs its steps queue and finish, and the message
// ids and message start triggers of POST /messages. The engine
// relies on every method; a store (or a test's wrapper of one) that has them all behaves the same everywhere.
// storetest.EngineStoreContract checks an implementation against the contract the engine relies on.
type Store interface {
	model.InstanceStore
	model.BatchInstanceStore
	// GetPlugin returns a plugin version (0 = latest); ENOTFOUND when missing.
	GetPlugin(ctx context.Context, tenant, name string, version int) (*model.Plugin, error)
	// GetRun returns a plugin run; ENOTFOUND when missing.
	GetRun(ctx context.Context, tenant, id string) (*model.PluginRun, error)
	// ClaimRuns leases up to n queued runs (or running runs whose lease expired) to worker.
	ClaimRuns(ctx context.Context, worker string, n int, now, leaseUntil time.Time) ([]*model.PluginRun, error)
	// ExtendRuns renews the leases of runs worker still executes and returns the others with their status.
	ExtendRuns(ctx context.Context, worker string, ids []string, leaseUntil time.Time) (map[string]string, error)
	// FinishRunOnly records a run result without touching an instance (its instance is gone or ended).
	FinishRunOnly(ctx context.Context, r *model.PluginRun) error
	// ClaimMessageID records a message id as being handled by the caller (claimed true), unless it was seen:
	// then it returns the stored answer of the first request (answer non-nil), or nil while that request is
	// still running. A claim left without an answer since before staleBefore (its request died) is taken over.
	ClaimMessageID(ctx context.Context, tenant, id string, now, staleBefore time.Time) (answer []byte, claimed bool, err error)
	// FinishMessageID stores the answer of the request that claimed the id.
	FinishMessageID(ctx context.Context, tenant, id string, answer []byte) error
	// AbandonMessageID forgets a claim whose request failed before it did anything, so a retry may run.
	AbandonMessageID(ctx context.Context, tenant, id string) error
	// MessageTriggers lists the templates that start on a message name, by key (trigger.Publisher keeps the index).
	MessageTriggers(ctx context.Context, tenant, message string) ([]model.MessageTrigger, error)
}

// Directory answers who holds a role, who a user's manager is and who leads a department.
type Directory interface {
	UsersWithRole(ctx context.Context, tenant, role string) ([]string, error)
	GetUser(ctx context.Context, tenant, username string) (*model.User, error)
	GetDepartment(ctx context.Context, tenant, name string) (*model.Department, error)
	// UserStates answers, for each name that is a user, whether it is disabled; other names are left out.
	UserStates(ctx context.Context, tenant string, names []string) (map[string]bool, error)
}

// EventSink says whether anybody subscribed to an event, so that events nobody wants cost nothing.
type EventSink interface {
	Wants(tenant, event, template string) bool
}

// Notifier is woken when there is work for it; Notify never blocks.
type Notifier interface {
	Notify()
}

// LocalExecutor is this process's plugin executor as the engine sees it (*plugin.Executor). A run the engine
// queues while it has a free worker is written leased to it in the queuing transaction and offered to it right
// after the commit: no outbox row, no claim. The durable row stays the safety net: should the process die before
// the run is done, its lease expires and any executor's claim runs it again as the next attempt.
type LocalExecutor interface {
	// Available says whether the executor would start a new run at once.
	Available() bool
	// WorkerID is the lease owner of the runs offered to it.
	WorkerID() string
	// Lease is how long an offered run is leased before the executor renews it.
	Lease() time.Duration
	// Offer gives the executor runs written leased to it, after their transaction committed.
	Offer(jobs ...plugin.Job)
	// StopRuns tells the executor, right after a commit, which runs that step closed (run id -> why): those it
	// executes have their processes killed. Runs it does not hold are ignored; runs executing on other replicas
	// are stopped by their executors' next lease renewal (PluginQueue.Extend).
	StopRuns(runs map[string]string)
}

// Deps are the engine's collaborators; every one is required (New says which is missing).
type Deps struct {
	Store     Store
	Templates *template.Service
	Directory Directory
	// Events says which events anybody subscribed to (the subscription service).
	Events EventSink
	// Outbox is woken after a commit that wrote outbox rows (the outbox dispatcher).
	Outbox Notifier
	// PluginFiles is where the plugin files of queued runs are found when the runs are prepared for an executor:
	// this replica's cache of the files stored in the database (*plugin.Cache).
	PluginFiles PluginFiles
	// Executor is this process's plugin executor (see LocalExecutor); NoExecutor when the process runs none.
	Executor LocalExecutor
}

// NoExecutor is the LocalExecutor of a process that executes no plugin runs itself: every run is queued for a
// claim by an executor elsewhere.
var NoExecutor LocalExecutor = noExecutor{}

type noExecutor struct{}

func (noExecutor) Available() bool      { return false }
func (noExecutor) WorkerID() string     { return "" }
func (noExecutor) Lease() time.Duration { return 0 }
func (noExecutor) Offer(...plugin.Job)  {}

func (noExecutor) StopRuns(map[string]string) {}

// Options tune the engine; the zero value is the default.
type Options struct {
	Clock  clock.Clock  // default clock.Real{}
	Logger *slog.Logger // default slog.Default()
	// CallbackKey signs callback URLs (derived from HALLEY_SECRET).
	CallbackKey []byte
	// PublicURL is the base of callback URLs, e.g. https://halley.example.com.
	PublicURL string
	// NoGroupCommit runs every step in a transaction of its own (see group.go).
	NoGroupCommit bool
	// NoBatchTimers fires every due timer in a transaction of its own (see FireTimers).
	NoBatchTimers bool
	// UserCacheTTL is how long the engine remembers whether an approver exists and is enabled (default 5s;
	// negative: not at all). It spares a step the directory read that would make it run twice (see reads); a
	// user disabled meanwhile may still get a task for that long.
	UserCacheTTL time.Duration
}

// Engine runs instances.
type Engine struct {
	store       Store
	templates   *template.Service
	dir         Directory
	clock       clock.Clock
	log         *slog.Logger
	callbackKey []byte
	publicURL   string
	events      EventSink
	outbox      Notifier
	plugins     *PluginQueue
	group       *grouper // nil: every step in a transaction of its own
	// noBatchTimers: FireTimers fires each timer alone.
	noBatchTimers bool

	users *userCache

	mu      sync.Mutex
	waiters map[string][]*endWaiter
	// loaded remembers the versions the template service has compiled (and cached) for this process.
	loaded sync.Map
}

// New returns an engine, or an error naming the dependency that is missing.
func New(d Deps, opts Options) (*Engine, error) {
	for _, m := range []struct {
		name    string
		missing bool
	}{
		{"Store", d.Store == nil}, {"Templates", d.Templates == nil}, {"Directory", d.Directory == nil}, {"Events", d.Events == nil},
		{"Outbox", d.Outbox == nil}, {"PluginFiles", d.PluginFiles == nil}, {"Executor", d.Executor == nil},
	} {
		if m.missing {
			return nil, fmt.Errorf("engine: %s is required", m.name)
		}
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	e := &Engine{store: d.Store, templates: d.Templates, dir: d.Directory, clock: opts.Clock, log: opts.Logger, callbackKey: opts.CallbackKey,
		publicURL: strings.TrimRight(opts.PublicURL, "/"), events: d.Events, outbox: d.Outbox, waiters: map[string][]*endWaiter{},
		noBatchTimers: opts.NoBatchTimers, users: newUserCache(opts.UserCacheTTL)}
	e.plugins = newPluginQueue(e, d.PluginFiles, d.Executor)
	if !opts.NoGroupCommit {
		e.group = &grouper{store: d.Store}
	}
	return e, nil
}

// Now is the engine's clock.
func (e *Engine) Now() time.Time { return e.clock.Now() }

// PluginQueue is the queue plugin executors claim this engine's runs from (plugin.Executor.Run).
func (e *Engine) PluginQueue() *PluginQueue { return e.plugins }

// committed runs after a transaction committed: hand the runs leased to this process's executor over, stop those
// of its runs the step closed, wake the dispatcher and whoever waits for the instance's end.
func (e *Engine) committed(w *model.Work) {
	if len(w.NewPluginRuns) > 0 {
		var mine []*model.PluginRun
		for _, r := range w.NewPluginRuns {
			if r.Status == model.RunRunning && r.LeaseOwner != "" {
				mine = append(mine, r)
			}
		}
		if len(mine) > 0 {
			e.plugins.handOver(mine)
		}
	}
	e.plugins.stopClosed(w.RunUpdates) // after the hand-over: a run queued and closed in one step is dropped
	if len(w.Outbox) > 0 {
		e.outbox.Notify()
	}
	if w.Instance.Ended() {
		e.mu.Lock()
		ws := e.waiters[w.Instance.ID]
		delete(e.waiters, w.Instance.ID)
		e.mu.Unlock()
		if len(ws) > 0 {
			end := *w.Instance // as committed; the waiters only read it
			for _, x := range ws {
				x.inst = &end
				close(x.done)
			}
		}
	}
}

// endWaiter is one wait for an instance's end committed by this process: done is closed after inst is set.
type endWaiter struct {
	done chan struct{}
	inst *model.Instance
}

// ended returns a waiter closed when this process commits the end of the instance. Callers also poll: another
// replica may end it.
func (e *Engine) ended(id string) (*endWaiter, func()) {
	x := &endWaiter{done: make(chan struct{})}
	e.mu.Lock()
	e.waiters[id] = append(e.waiters[id], x)
	e.mu.Unlock()
	return x, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		cs := e.waiters[id]
		for i, y := range cs {
			if y == x {
				e.waiters[id] = append(cs[:i], cs[i+1:]...)
				break
			}
		}
		if len(e.waiters[id]) == 0 {
			delete(e.waiters, id)
		}
	}
}

// StartRequest is the body of POST /instances.
type StartRequest struct {
	Template      string          `json:"template"`
	Version       int             `json:"version"`
	Context       json.RawMessage `json:"context"`
	CorrelationID string          `json:"correlation_id"`
	Title         string          `json:"title"`
	// OverrideTrigger lets an admin start a template whose start trigger is not manual (its form, API or crontab
	// trigger is skipped); the history records it.
	OverrideTrigger bool `json:"override_trigger"`
	// Initiator starts the instance on behalf of this user (API tokens only); the history records the token.
	Initiator string `json:"initiator"`
}

// checkStart validates the fields every start shares and returns the context as a compact JSON object.
func checkStart(ctxDoc json.RawMessage, corr, title string) (json.RawMessage, error) {
	if len(corr) > 255 {
		return nil, model.CodedError(model.EINVALID, "invalid_correlation_id", "correlation_id must be at most 255 characters")
	}
	if len(title) > 500 {
		return nil, model.CodedError(model.EINVALID, "invalid_title", "title must be at most 500 characters")
	}
	doc := json.RawMessage(strings.TrimSpace(string(ctxDoc)))
	if len(doc) == 0 || string(doc) == "null" {
		return json.RawMessage("{}"), nil
	}
	if err := model.CheckDocumentDepth("context", doc); err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil || m == nil {
		return nil, model.CodedError(model.EINVALID, "invalid_context", "context must be a JSON object")
	}
	b, _ := json.Marshal(m)
	return b, nil
}

// Start starts an instance of a published template (latest version unless one is given). Only templates started
// by hand (trigger manual) start here: the others have a trigger of their own, with its own checks (a form's
// members, an API trigger's credentials and IP allow-list), that this route must not skip; an admin may override
// with override_trigger (403 trigger_required otherwise). An API token may start on behalf of a user, who is then
// the initiator; the history names the token.
func (e *Engine) Start(ctx context.Context, actor *model.Principal, req StartRequest) (*InstanceView, error) {
	if req.Template == "" {
		return nil, model.CodedError(model.EINVALID, "invalid_template", "template is required")
	}
	if req.Version < 0 {
		return nil, model.CodedError(model.EINVALID, "invalid_version", "version must be a positive number")
	}
	doc, err := checkStart(req.Context, req.CorrelationID, req.Title)
	if err != nil {
		return nil, err
	}
	if req.OverrideTrigger && !actor.IsAdmin() {
		return nil, model.CodedError(model.EFORBIDDEN, "admin_required", "only admins may override a template's start trigger")
	}
	opts := startOptions{secrets: systemPrincipal(actor)}
	initiator := actor.Username
	if req.Initiator != "" {
		if initiator, err = e.onBehalfOf(ctx, actor, req.Initiator); err != nil {
			return nil, err
		}
		opts.actor = actor.Username
		opts.info = map[string]any{"on_behalf_of": initiator}
	}
	c, err := e.templates.Compiled(ctx, actor.TenantID, req.Template, req.Version)
	if err != nil {
		if model.IsKind(err, model.ENOTFOUND) && req.Version == 0 {
			return nil, model.CodedError(model.ENOTFOUND, "template_not_found", "template %q not found", req.Template)
		}
		return nil, err
	}
	if c.Hidden {
		// A dynamic linear process's template ran once; starting it again would also show its steps to anyone.
		return nil, model.CodedError(model.ENOTFOUND, "template_not_found", "template %q not found", req.Template)
	}
	if kind := c.Def.Start().Trigger.Kind; kind != "" && kind != model.TriggerManual {
		if !req.OverrideTrigger {
			return nil, model.CodedError(model.EFORBIDDEN, "trigger_required", "template %q starts through its %s trigger, not here", req.Template, kind).
				WithDetails(map[string]any{"trigger": kind})
		}
		if opts.info == nil {
			opts.info = map[string]any{}
		}
		// The audit reads this: who bypassed which trigger.
		opts.info["override_trigger"] = kind
	} else if a := model.AuditFrom(ctx); a != nil && req.OverrideTrigger {
		// override_trigger on a template started by hand bypasses nothing: no override to audit (as the history
		// records none).
		a.Discard()
	}
	return e.startCompiled(ctx, uuid.Must(uuid.NewV7()).String(), actor.TenantID, initiator, c, doc, req.CorrelationID, req.Title, opts)
}

// onBehalfOf checks a start on behalf of a user: only API tokens may, and the user must exist and be enabled.
func (e *Engine) onBehalfOf(ctx context.Context, actor *model.Principal, username string) (string, error) {
	if !actor.Token {
		return "", model.CodedError(model.EFORBIDDEN, "not_allowed", "only API tokens may start an instance on behalf of a user")
	}
	if err := model.ValidUsername(username); err != nil {
		return "", model.CodedError(model.EUNPROCESSABLE, "unknown_user", "initiator %q is not a user", username)
	}
	u, err := e.dir.GetUser(ctx, actor.TenantID, username)
	switch {
	case model.IsKind(err, model.ENOTFOUND):
		return "", model.CodedError(model.EUNPROCESSABLE, "unknown_user", "initiator %q is not a user", username)
	case err != nil:
		return "", err
	case u.Disabled:
		return "", model.CodedError(model.EUNPROCESSABLE, "user_disabled", "initiator %q is disabled", username)
	}
	return u.Username, nil
}

// systemPrincipal reports a caller that acts for systems: an admin or an API token. Only they see signed URLs
// (callback URLs) and resume system waits (callbacks, messages, bookmarks).
func systemPrincipal(actor *model.Principal) bool {
	return actor != nil && (actor.IsAdmin() || actor.Token)
}

// startOptions are what a start records besides its instance.
type startOptions struct {
	actor   string         // who started it, when not the initiator (an API token on behalf of a user)
	info    map[string]any // added to the data of the instance.started history item
	secrets bool           // the answer shows signed URLs (callback URLs): for admins and API tokens
}

// LinearRequest is the body of POST /instances/linear.
type LinearRequest struct {
	Title         string                `json:"title"`
	Steps         []template.LinearStep `json:"steps"`
	Context       json.RawMessage       `json:"context"`
	CorrelationID string                `json:"correlation_id"`
}

// StartLinear starts a dynamic linear process (动态线性流程): a hidden one-off version built from the steps.
func (e *Engine) StartLinear(ctx context.Context, actor *model.Principal, req LinearRequest) (*InstanceView, error) {
	doc, err := checkStart(req.Context, req.CorrelationID, req.Title)
	if err != nil {
		return nil, err
	}
	c, err := e.templates.CreateLinear(ctx, actor, req.Title, req.Steps)
	if err != nil {
		return nil, err
	}
	return e.startCompiled(ctx, uuid.Must(uuid.NewV7()).String(), actor.TenantID, actor.Username, c, doc, req.CorrelationID, req.Title,
		startOptions{secrets: systemPrincipal(actor)})
}

// StartCompiled starts an instance of a compiled version for an initiator (triggers use it directly). Its answer
// shows no signed URLs: triggers answer anonymous callers and users.
func (e *Engine) StartCompiled(ctx context.Context, tenant, initiator string, c *template.Compiled, doc json.RawMessage, corr, title string) (*InstanceView, error) {
	return e.startCompiled(ctx, uuid.Must(uuid.NewV7()).String(), tenant, initiator, c, doc, corr, title, startOptions{})
}

func (e *Engine) startCompiled(ctx context.Context, id, tenant, initiator string, c *template.Compiled, doc json.RawMessage, corr, title string,
	opts startOptions) (*InstanceView, error) {
	if title == "" {
		title = c.Name // the template's name reads better in an inbox than its key
	}
	if title == "" {
		title = c.Key
	}
	actor := opts.actor
	if actor == "" {
		actor = initiator
	}
	started := map[string]any{"template": c.Key, "version": c.Version}
	for k, v := range opts.info {
		started[k] = v
	}
	var (
		inst *model.Instance
		w    *model.Work
	)
	for attempt := 0; ; attempt++ {
		now := e.clock.Now().UTC()
		inst = &model.Instance{ID: id, TenantID: tenant, Template: c.Key, Version: c.Version, Title: title,
			Initiator: initiator, CorrelationID: corr, Context: doc, CreatedAt: now}
		w = &model.Work{Instance: inst}
		s := e.newStep(ctx, w, c, actor)
		if err := s.moveInstance(model.MoveStart); err != nil {
			return nil, err
		}
		s.history("instance.started", "", "", "", started)
		s.event("instance.started", "", nil)
		if err := s.activate(c.Def.Start().ID, model.MoveActivate); err != nil {
			return nil, err
		}
		err := e.createInstance(ctx, w)
		if errors.Is(err, model.ErrStaleRead) && attempt < 3 {
			continue // a queued message it consumed was taken by another step: start again from fresh reads
		}
		if err != nil {
			return nil, err
		}
		break
	}
	e.loaded.Store(loadedKey(tenant, c.Key, c.Version), true)
	e.committed(w)
	return e.view(inst, w.Tasks, opts.secrets), nil
}

// update runs fn on a locked instance with a fresh run, and returns the instance afterwards. A step that needs
// reads which must not happen inside the transaction (see reads) is rolled back, the reads are done with no
// transaction open, and the step runs again with their answers.
func (e *Engine) update(ctx context.Context, tenant, instanceID, actor string, fn func(s *step) error) (*model.Work, error) {
	rd := newReads()
	for round := 0; ; round++ {
		var done *model.Work
		err := e.updateInstance(ctx, tenant, instanceID, func(w *model.Work) error {
			c, err := e.compiledIn(ctx, rd, tenant, w.Instance.Template, w.Instance.Version)
			if err != nil {
				return err
			}
			s := e.newStep(ctx, w, c, actor)
			s.reads = rd
			err = fn(s)
			if len(rd.pending) > 0 {
				return errNeedRead // whatever the run did without the answers is rolled back
			}
			if err != nil {
				return err
			}
			done = w
			return nil
		})
		if errors.Is(err, model.ErrStaleRead) && round < maxReadRounds {
			rd = newReads() // something read outside the transaction was taken meanwhile: read everything again
			continue
		}
		if errors.Is(err, errNeedRead) {
			if round >= maxReadRounds {
				return nil, fmt.Errorf("engine: instance %s: the step still needs reads after %d rounds", instanceID, round+1)
			}
			if err := rd.fetch(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		e.committed(done)
		return done, nil
	}
}

// maxReadRounds bounds how often one step is run again for reads (each round answers at least one more).
const maxReadRounds = 16

// reads holds the answers of reads a step makes outside its transaction: the directory (roles, users,
// departments). Inside UpdateInstance the transaction holds a pooled connection and the instance row lock; a
// read on another connection would wait for a free one, and with every connection held by such a transaction
// (more concurrent steps than the pool has connections) none would ever come. So a run that needs an answer it
// does not have records the read and fails with errNeedRead; update does the reads with no transaction open and
// runs the step again (runs are deterministic given the instance and the answers). A run outside any
// transaction (StartCompiled) reads at once.
type reads struct {
	answers map[string]readAnswer
	pending map[string]func(ctx context.Context) (any, error)
}

type readAnswer struct {
	v   any
	err error
}

func newReads() *reads {
	return &reads{answers: map[string]readAnswer{}, pending: map[string]func(ctx context.Context) (any, error){}}
}

var errNeedRead = errors.New("engine: the step needs reads outside its transaction")

// read returns the answer of a read keyed by key (see reads).
func (s *step) read(key string, fn func(ctx context.Context) (any, error)) (any, error) {
	return s.reads.get(s.ctx, key, fn)
}

// get answers a read from what was fetched, or records it and returns errNeedRead; with rd nil (no transaction
// open) it reads at once.
func (rd *reads) get(ctx context.Context, key string, fn func(ctx context.Context) (any, error)) (any, error) {
	if rd == nil {
		return fn(ctx)
	}
	if a, ok := rd.answers[key]; ok {
		return a.v, a.err
	}
	rd.pending[key] = fn
	return nil, errNeedRead
}

func loadedKey(tenant, key string, version int) string {
	return tenant + "\x00" + key + "\x00" + strconv.Itoa(version)
}

// compiledIn returns an instance's compiled version inside its transaction. The template service caches
// compiled versions for good (they are immutable), so once a version was loaded in this process it is
// answered from memory; the first time, it is read outside the transaction like any other read.
func (e *Engine) compiledIn(ctx context.Context, rd *reads, tenant, key string, version int) (*template.Compiled, error) {
	ck := loadedKey(tenant, key, version)
	if _, ok := e.loaded.Load(ck); ok {
		return e.templates.Compiled(ctx, tenant, key, version)
	}
	v, err := rd.get(ctx, "template\x00"+ck, func(ctx context.Context) (any, error) { return e.templates.Compiled(ctx, tenant, key, version) })
	if err != nil {
		return nil, err
	}
	e.loaded.Store(ck, true)
	return v.(*template.Compiled), nil
}

// fetch does the pending reads. A domain answer (e.g. ENOTFOUND) is kept for the run to judge; any other error
// fails the action, as a database error inside the transaction would.
func (rd *reads) fetch(ctx context.Context) error {
	for k, fn := range rd.pending {
		v, err := fn(ctx)
		if err != nil && model.ErrorKind(err) == model.EINTERNAL {
			return err
		}
		rd.answers[k] = readAnswer{v: v, err: err}
	}
	clear(rd.pending)
	return nil
}

// taskAction locks the task's instance and runs fn on the task after the common checks: it exists (404), it is
// the caller's or the caller is an admin (403), it is pending (409).
func (e *Engine) taskAction(ctx context.Context, actor *model.Principal, taskID string, fn func(s *step, t *model.Task) error) (*model.Work, error) {
	instID := InstanceOf(taskID)
	if instID == "" {
		return nil, model.CodedError(model.ENOTFOUND, "task_not_found", "task %q not found", taskID)
	}
	w, err := e.update(ctx, actor.TenantID, instID, actor.Username, func(s *step) error {
		t := s.task(taskID)
		if t == nil {
			// Not open (or unknown): why is read after the transaction. Reading it here would take a second
			// connection while this one holds the row lock; with every pooled connection held by a request
			// racing on the same instance, that read would wait forever.
			return errTaskNotOpen
		}
		if t.Assignee != actor.Username && !actor.IsAdmin() {
			return model.CodedError(model.EFORBIDDEN, "not_assignee", "task %s is not yours", taskID)
		}
		if t.Status != model.TaskPending {
			return model.CodedError(model.ECONFLICT, "task_not_pending", "task %s is %s: it is not its turn yet", taskID, t.Status).
				WithDetails(map[string]any{"status": t.Status})
		}
		if s.inst.Ended() {
			return model.CodedError(model.ECONFLICT, "instance_ended", "instance %s is %s", s.inst.ID, s.inst.Status)
		}
		return fn(s, t)
	})
	if errors.Is(err, errTaskNotOpen) {
		old, gerr := e.store.GetTask(ctx, actor.TenantID, taskID)
		switch {
		case model.IsKind(gerr, model.ENOTFOUND):
			return nil, model.CodedError(model.ENOTFOUND, "task_not_found", "task %q not found", taskID)
		case gerr != nil:
			return nil, gerr
		case old.Assignee != actor.Username && !actor.IsAdmin():
			return nil, model.CodedError(model.EFORBIDDEN, "not_assignee", "task %s is not yours", taskID)
		}
		return nil, model.CodedError(model.ECONFLICT, "task_already_decided", "task %s is already %s", taskID, old.Status).
			WithDetails(map[string]any{"status": old.Status})
	}
	if model.IsKind(err, model.ENOTFOUND) && !strings.Contains(err.Error(), "task") {
		return nil, model.CodedError(model.ENOTFOUND, "task_not_found", "task %q not found", taskID)
	}
	return w, err
}

// errTaskNotOpen aborts a task action whose task is not open; taskAction then says why (404, 403 or 409).
var errTaskNotOpen = errors.New("engine: task is not open")

// DecideRequest is the body of approve and reject.
type DecideRequest struct {
	Comment string          `json:"comment"`
	Data    json.RawMessage `json:"data"`
}

// Approve approves a pending task; data is written into the context as the task's form allows (formdata.go).
func (e *Engine) Approve(ctx context.Context, actor *model.Principal, taskID string, req DecideRequest) (*Decided, error) {
	return e.decide(ctx, actor, taskID, true, req)
}

// Reject rejects a pending task.
func (e *Engine) Reject(ctx context.Context, actor *model.Principal, taskID string, req DecideRequest) (*Decided, error) {
	return e.decide(ctx, actor, taskID, false, req)
}

func (e *Engine) decide(ctx context.Context, actor *model.Principal, taskID string, approve bool, req DecideRequest) (*Decided, error) {
	if len(req.Comment) > 4000 {
		return nil, model.CodedError(model.EINVALID, "invalid_comment", "comment must be at most 4000 characters")
	}
	data := json.RawMessage(strings.TrimSpace(string(req.Data)))
	if len(data) > 0 && string(data) != "null" && data[0] != '{' {
		return nil, model.CodedError(model.EINVALID, "invalid_data", "data must be a JSON object")
	}
	if err := model.CheckDocumentDepth("data", data); err != nil {
		return nil, err
	}
	var out *model.Task
	w, err := e.taskAction(ctx, actor, taskID, func(s *step, t *model.Task) error {
		if err := s.decide(t, Decision{Approve: approve, Comment: req.Comment, Data: data, By: actor.Username}); err != nil {
			return err
		}
		out = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	d := &Decided{Task: out, NextTasks: []*model.Task{}}
	for _, t := range w.Tasks {
		if t.Status == model.TaskPending && t.Assignee == actor.Username {
			d.NextTasks = append(d.NextTasks, t)
		}
	}
	return d, nil
}

// Decided is the answer to approve and reject: the decided task and, in next_tasks, the instance's tasks pending
// for the same user once the decision is made (the next step of a process they approve step after step), so a
// client needs no GET /tasks to go on.
type Decided struct {
	*model.Task
	NextTasks []*model.Task `json:"next_tasks"`
}

// TransferRequest is the body of POST /tasks/{id}/transfer.
type TransferRequest struct {
	To      string `json:"to"`
	Comment string `json:"comment"`
}

// Transfer hands a pending task to another user and returns the new task.
func (e *Engine) Transfer(ctx context.Context, actor *model.Principal, taskID string, req TransferRequest) (*model.Task, error) {
	if err := model.ValidUsername(req.To); err != nil {
		return nil, err
	}
	if err := e.checkAssignable(ctx, actor.TenantID, req.To); err != nil {
		return nil, err
	}
	var out *model.Task
	_, err := e.taskAction(ctx, actor, taskID, func(s *step, t *model.Task) error {
		nt, err := s.transfer(t, req.To, req.Comment, actor.Username)
		out = nt
		return err
	})
	return out, err
}

// AddSignRequest is the body of POST /tasks/{id}/add-sign.
type AddSignRequest struct {
	Users    []string `json:"users"`
	Position string   `json:"position"`
	Comment  string   `json:"comment"`
}

// AddSignResult is what add-sign answers: the task and the tasks it created.
type AddSignResult struct {
	Task    *model.Task   `json:"task"`
	Created []*model.Task `json:"created"`
}

// AddSign adds signers before, after or beside a pending task.
func (e *Engine) AddSign(ctx context.Context, actor *model.Principal, taskID string, req AddSignRequest) (*AddSignResult, error) {
	if len(req.Users) == 0 || len(req.Users) > 20 {
		return nil, model.CodedError(model.EINVALID, "invalid_users", "users must list 1 to 20 usernames")
	}
	users := dedupe(req.Users)
	for _, u := range users {
		if err := e.checkAssignable(ctx, actor.TenantID, u); err != nil {
			return nil, err
		}
	}
	switch req.Position {
	case SignBefore, SignAfter, SignParallel:
	default:
		return nil, model.CodedError(model.EINVALID, "invalid_position", "position must be before, after or parallel")
	}
	var out AddSignResult
	_, err := e.taskAction(ctx, actor, taskID, func(s *step, t *model.Task) error {
		created, err := s.addSign(t, users, req.Position, req.Comment)
		out = AddSignResult{Task: t, Created: created}
		if out.Created == nil {
			out.Created = []*model.Task{}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ReasonRequest is the body of terminate and withdraw.
type ReasonRequest struct {
	Reason string `json:"reason"`
}

// Terminate ends a running instance (admin or initiator).
func (e *Engine) Terminate(ctx context.Context, actor *model.Principal, id, reason string) (*InstanceView, error) {
	return e.end(ctx, actor, id, reason, model.MoveTerminate)
}

// Withdraw ends a running instance on behalf of its initiator.
func (e *Engine) Withdraw(ctx context.Context, actor *model.Principal, id, reason string) (*InstanceView, error) {
	return e.end(ctx, actor, id, reason, model.MoveWithdraw)
}

func (e *Engine) end(ctx context.Context, actor *model.Principal, id, reason string, m model.Move) (*InstanceView, error) {
	if len(reason) > 4000 {
		return nil, model.CodedError(model.EINVALID, "invalid_reason", "reason must be at most 4000 characters")
	}
	w, err := e.update(ctx, actor.TenantID, id, actor.Username, func(s *step) error {
		switch {
		case m == model.MoveWithdraw && s.inst.Initiator != actor.Username:
			return model.CodedError(model.EFORBIDDEN, "not_initiator", "only the initiator may withdraw an instance")
		case m == model.MoveTerminate && s.inst.Initiator != actor.Username && !actor.IsAdmin():
			return model.CodedError(model.EFORBIDDEN, "not_allowed", "only an admin or the initiator may terminate an instance")
		case s.inst.Ended():
			return model.CodedError(model.ECONFLICT, "instance_ended", "instance %s is already %s", id, s.inst.Status)
		}
		return s.finish(m, reason)
	})
	if err != nil {
		return nil, err
	}
	return e.view(w.Instance, w.Tasks, true), nil
}

// FireTimer handles a due timer of an instance (the scheduler calls it). Timers of node visits that are over, or
// already handled, do nothing.
func (e *Engine) FireTimer(ctx context.Context, tenant string, t *model.Timer) error {
	_, err := e.update(ctx, tenant, t.InstanceID, model.ActorSystem, func(s *step) error {
		if s.inst.Ended() {
			s.w.FiredTimers = append(s.w.FiredTimers, t.ID)
			return nil
		}
		return s.fire(t)
	})
	if model.IsKind(err, model.ENOTFOUND) {
		return nil
	}
	return err
}

// WaitEnd waits until the instance ends or ctx is done, and returns it.
func (e *Engine) WaitEnd(ctx context.Context, tenant, id string) (*model.Instance, error) {
	x, cancel := e.ended(id)
	defer cancel()
	return e.waitEnd(ctx, tenant, id, x, true)
}

// Polling for an end committed by another replica starts at waitPollFirst and grows by half at every read up to
// waitPollMax: a sync call that is answered quickly (the usual case, and then by this process's own signal) costs
// no read, and one waiting for minutes costs a read every few seconds, not four a second.
const (
	waitPollFirst = 250 * time.Millisecond
	waitPollMax   = 5 * time.Second
)

// waitEnd waits for x, the end committed by this process, which carries the instance (no read). Another replica
// may end it instead, so it also reads the instance now and then (waitPollFirst, growing to waitPollMax, on the
// engine's clock); readFirst reads once at once. When ctx is done it returns the instance as it is then.
func (e *Engine) waitEnd(ctx context.Context, tenant, id string, x *endWaiter, readFirst bool) (*model.Instance, error) {
	get := func() (*model.Instance, error) {
		// Read with a context of its own: the last look after ctx's deadline must still succeed.
		rctx, cancelRead := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancelRead()
		inst, _, err := e.store.GetInstance(rctx, tenant, id)
		return inst, err
	}
	every := waitPollFirst
	poll := e.clock.NewTimer(every)
	defer poll.Stop()
	read := readFirst
	for {
		if read {
			inst, err := get()
			if err != nil || inst.Ended() || ctx.Err() != nil {
				return inst, err
			}
			read = false
		}
		select {
		case <-ctx.Done():
			read = true // the last look
		case <-x.done:
			return x.inst, nil
		case <-poll.C():
			read = true
			every = min(every*3/2, waitPollMax)
			poll.Reset(every)
		}
	}
}

// StartCompiledAndWait starts an instance like StartCompiled and, unless it ended in its first step, waits up to
// wait for its end (sync triggers). It listens for the end before the start commits, so an end committed by this
// process is seen without reading the instance again; ended reports whether it ended within wait. The instance
// returned is the one at the end (or at the deadline).
func (e *Engine) StartCompiledAndWait(ctx context.Context, tenant, initiator string, c *template.Compiled, doc json.RawMessage, corr, title string,
	wait time.Duration) (*InstanceView, *model.Instance, error) {
	id := uuid.Must(uuid.NewV7()).String()
	x, cancel := e.ended(id)
	defer cancel()
	v, err := e.startCompiled(ctx, id, tenant, initiator, c, doc, corr, title, startOptions{})
	if err != nil {
		return nil, nil, err
	}
	if v.Ended() || wait <= 0 {
		return v, nil, nil
	}
	wctx, cancelWait := context.WithTimeout(ctx, wait)
	defer cancelWait()
	inst, err := e.waitEnd(wctx, tenant, id, x, false)
	if err != nil {
		return nil, nil, err
	}
	return v, inst, nil
}

// sortNodes orders node views by activation.
func sortNodes(ns []NodeView) {
	sort.SliceStable(ns, func(i, j int) bool { return ns[i].seq < ns[j].seq })
}
