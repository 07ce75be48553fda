// Package engine is the only code that changes an instance. One call = one database transaction that locks the
// instance row, applies an action, advances every automatic step it can (recursively, as Comet does), and writes
// the new node and task states, the history and the side effects (timers, plugin runs, events) as outbox rows.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

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

// Directory answers whether a user exists and is enabled (transfer and add-sign check the new signer); who
// decides a node is the Rules' question.
type Directory interface {
	GetUser(ctx context.Context, tenant, username string) (*model.User, error)
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
	// Rules say who decides an approval node (service/rules).
	Rules Rules
	// Events says which events anybody subscribed to (the subscription service).
	Events EventSink
	// InStep takes events within the step's transaction (the in-app notifications); NoInStep when nothing does.
	InStep InStepSink
	// Outbox is woken after a commit that wrote outbox rows (the outbox dispatcher).
	Outbox Notifier
	// PluginFiles is where the plugin files of queued runs are found when the runs are prepared for an executor:
	// this replica's cache of the files stored in the database (*plugin.Cache).
	PluginFiles PluginFiles
	// Executor is this process's plugin executor (see LocalExecutor); NoExecutor when the process runs none.
	Executor LocalExecutor
	// URLs builds the URLs the engine hands out (server.URLs, from the router's own routes).
	URLs URLs
	// Ends carries instance ends between replicas (ends.Bus, Redis pub/sub), so that a sync start waiting here
	// hears at once of an end committed elsewhere; nil (one process, or no Redis): waits poll the database.
	Ends EndBus
}

// EndBus tells every replica that an instance ended. A message is a hint to read the instance, never its state.
type EndBus interface {
	// Publish tells every replica that instance id ended; it does not wait.
	Publish(id string)
	// Listen returns a channel closed when an end of instance id is heard, or when the bus stops listening; ok is
	// false while it cannot listen. stop ends the listening.
	Listen(id string) (heard <-chan struct{}, stop func(), ok bool)
}

// URLs builds the addresses the engine hands to outside systems. The engine signs them (the token); where they
// point is the HTTP layer's business, so the composition root gives it the router's own (server.URLs).
type URLs interface {
	// Callback is the URL that resumes a callback node's visit (POST), with its token.
	Callback(instanceID, nodeInstanceID, token string) string
	// PluginResult is the URL an async plugin run's result is posted to, with its token.
	PluginResult(runID, token string) string
}

// NoExecutor is the LocalExecutor of a process that executes no plugin runs itself: every run is queued for a
// claim by an executor elsewhere.
var NoExecutor LocalExecutor = noExecutor{}

type noExecutor struct{}

func (noExecutor) Available() bool { return false }

func (noExecutor) WorkerID() string { return "" }

func (noExecutor) Lease() time.Duration { return 0 }

func (noExecutor) Offer(...plugin.Job) {}

func (noExecutor) StopRuns(map[string]string) {}

// Options tune the engine; the zero value is the default.
type Options struct {
	Clock  clock.Clock  // default clock.Real{}
	Logger *slog.Logger // default slog.Default()
	// CallbackKey signs callback and plugin result URLs (derived from HALLEY_SECRET).
	CallbackKey []byte
	// NoGroupCommit runs every step in a transaction of its own (see group.go).
	NoGroupCommit bool
	// GroupWorkers is how many group-commit transactions may run at once (group.go); 0 = DefaultGroupWorkers().
	GroupWorkers int
	// NoGroupOverlap keeps to GroupWorkers groups at once: no further group starts while they are at the database,
	// however many steps queue (group.go, mayLead).
	NoGroupOverlap bool
	// NoBatchTimers fires every due timer in a transaction of its own (see FireTimers).
	NoBatchTimers bool
	// Observer is told about every step (metrics, traces); none by default.
	Observer StepObserver
}

// Engine runs instances.
type Engine struct {
	store       Store
	templates   *template.Service
	dir         Directory
	rules       Rules
	clock       clock.Clock
	log         *slog.Logger
	callbackKey []byte
	urls        URLs
	events      EventSink
	inStep      InStepSink
	outbox      Notifier
	plugins     *PluginQueue
	group       *grouper // nil: every step in a transaction of its own
	// noBatchTimers: FireTimers fires each timer alone.
	noBatchTimers bool

	// observer hears about every step; observed is false for noObserver (steps then record no moves).
	observer StepObserver
	observed bool

	ends    EndBus // nil: no other replica hears of ends, waits poll
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
		{"Store", d.Store == nil}, {"Templates", d.Templates == nil}, {"Directory", d.Directory == nil}, {"Rules", d.Rules == nil}, {"Events", d.Events == nil}, {"InStep", d.InStep == nil},
		{"Outbox", d.Outbox == nil}, {"PluginFiles", d.PluginFiles == nil}, {"Executor", d.Executor == nil}, {"URLs", d.URLs == nil},
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
	e := &Engine{store: d.Store, templates: d.Templates, dir: d.Directory, rules: d.Rules, clock: opts.Clock, log: opts.Logger, callbackKey: opts.CallbackKey,
		urls: d.URLs, events: d.Events, inStep: d.InStep, outbox: d.Outbox, waiters: map[string][]*endWaiter{}, ends: d.Ends,
		noBatchTimers: opts.NoBatchTimers, observer: opts.Observer, observed: opts.Observer != nil}
	if e.observer == nil {
		e.observer = noObserver{}
	}
	e.plugins = newPluginQueue(e, d.PluginFiles, d.Executor)
	if !opts.NoGroupCommit {
		e.group = &grouper{store: d.Store, workersMax: opts.groupWorkers(), overlap: !opts.NoGroupOverlap}
	}
	return e, nil
}

// Now is the engine's clock.
func (e *Engine) Now() time.Time { return e.clock.Now() }

// PluginQueue is the queue plugin executors claim this engine's runs from (plugin.Executor.Run).
func (e *Engine) PluginQueue() *PluginQueue { return e.plugins }
