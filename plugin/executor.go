package plugin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/halley-bpm/halley/model"
)

// Job is one claimed attempt of a durable plugin run.
type Job struct {
	RunID    string
	TenantID string // the run's tenant (its log is kept under it)
	Attempt  int
	Spec     Spec
	Input    Input
}

// Queue is the durable side of the executor, implemented by the store (MySQL/SQLite) with
// SELECT ... FOR UPDATE SKIP LOCKED and a lease column, so any number of Halley replicas share the runs.
type Queue interface {
	// Claim leases up to n queued runs (or runs whose lease expired) to worker until leaseUntil.
	Claim(ctx context.Context, worker string, n int, leaseUntil time.Time) ([]Job, error)
	// Extend renews the lease of runs this worker still executes (heartbeat) and returns those of runIDs it no
	// longer holds, each with why: the engine closed them (their node timed out, their instance ended), they
	// finished, or another worker claimed them after this one's lease expired. The executor stops them.
	Extend(ctx context.Context, worker string, runIDs []string, leaseUntil time.Time) (lost map[string]string, err error)
	// Complete records the result and hands it to the engine; must be idempotent per (runID, attempt).
	Complete(ctx context.Context, worker string, job Job, res Result) error
}

// LoggingQueue is a Queue that can write an attempt's run log record in the transaction that records its result
// (one commit a run instead of two). CompleteLogged is Complete with the record; it reports whether it wrote it,
// and the executor writes a record it did not (a run finished already, a run with no instance to step, an error).
type LoggingQueue interface {
	CompleteLogged(ctx context.Context, worker string, job Job, res Result, rec *model.PluginRunLog) (logged bool, err error)
}

// RunLog keeps the record of every finished attempt (FormatRecord): the database in production, so that any
// replica shows it; *LogStore keeps files on the local disk.
type RunLog interface {
	Write(ctx context.Context, job Job, res Result) error
}

// ErrAbandoned is passed to OnComplete for a run that was stopped by the executor's shutdown and deliberately
// not reported: its lease runs out and another worker runs it again.
var ErrAbandoned = errors.New("plugin: run abandoned at shutdown; it will be claimed again when its lease expires")

// ErrStopped is passed (wrapped, with the reason) to OnComplete for a run the executor stopped because it was no
// longer its to finish (StopRuns, or a heartbeat that did not renew its lease): its process was killed, its log
// written, and nothing reported — the engine recorded the run's end already.
var ErrStopped = errors.New("plugin: run stopped; it is closed or no longer leased to this worker, so its result is not reported")

// stopCause is the cause of a run's context cancelled by StopRuns.
type stopCause struct{ why string }

func (c *stopCause) Error() string { return "stopped: " + c.why }

// ExecutorOptions configure an Executor. Zero values take the defaults noted.
type ExecutorOptions struct {
	Workers      int           // runs at once; default 4
	PollInterval time.Duration // how often to look for runs without a Notify; default 1s
	Lease        time.Duration // lease per claim, renewed every Lease/3 while a run executes; default 1m
	WorkerID     string        // identifies this executor in the queue; default host-pid-random
	Logger       *slog.Logger  // default slog.Default()
	Now          func() time.Time

	// Logs, when set, receives every finished run's output before it is completed.
	Logs RunLog
	// ShutdownTimeout: after Run's context is done, in-flight runs get this long to finish on their own; then
	// their processes are killed and the runs are abandoned (not completed) so their lease expires and another
	// worker retries them. 0 waits for them to finish, which each plugin's own timeout bounds — or until the
	// deadline given to Drain.
	ShutdownTimeout time.Duration
	// OnComplete is called after each run has been handed to Queue.Complete, with Complete's error (or
	// ErrAbandoned). It is a test signal and a metrics hook; it must not block for long.
	OnComplete func(job Job, res Result, err error)
}

// Executor claims runs from a Queue and executes them with a Runner, at most Workers at a time. It is built before
// the engine, which hands it runs (Offer) and wakes it (Notify); the queue, which needs the engine, comes with Run.
type Executor struct {
	q    Queue // set by Run
	r    Runner
	opts ExecutorOptions
	log  *slog.Logger

	wake      chan struct{} // Notify: a run was committed
	offer     chan struct{} // Offer: jobs wait in offered (no claim needed)
	freed     chan struct{} // a worker slot became free
	started   atomic.Bool
	accepting atomic.Bool  // the loop runs: offered jobs will be started
	load      atomic.Int64 // jobs executing or offered and waiting for a worker

	mu      sync.Mutex
	running map[string]*tracked // by run id: the leases to heartbeat (executing or offered)
	offered []Job               // handed over already leased, waiting for a free worker

	kill     chan struct{} // closed (once) to kill the runs in flight after Run's context is done
	killOnce sync.Once
	drained  chan struct{} // closed when Run has returned
}

// tracked is a run the executor holds: offered or claimed, then executing until it is reported.
type tracked struct {
	job    Job
	cancel context.CancelCauseFunc // set when its worker starts it
	stop   string                  // why StopRuns stopped it before its worker started it
}

// Retry policy of Queue.Complete: a database blip must not turn a finished run into a re-run, but a store that
// stays down must not hold a worker forever (the lease then expires and the run is retried).
const (
	completeAttempts = 5
	completeBackoff  = 200 * time.Millisecond
	completeTimeout  = 30 * time.Second
)

// NewExecutor returns an executor running plugins with r. Call Run to start it.
func NewExecutor(r Runner, opts ExecutorOptions) (*Executor, error) {
	if r == nil {
		return nil, errors.New("plugin: an executor needs a runner")
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.Lease <= 0 {
		opts.Lease = time.Minute
	}
	if opts.WorkerID == "" {
		opts.WorkerID = defaultWorkerID()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Executor{
		r:       r,
		opts:    opts,
		log:     opts.Logger.With("component", "plugin_executor", "worker", opts.WorkerID),
		wake:    make(chan struct{}, 1),
		offer:   make(chan struct{}, 1),
		freed:   make(chan struct{}, opts.Workers),
		running: make(map[string]*tracked),
		kill:    make(chan struct{}),
		drained: make(chan struct{}),
	}, nil
}

func defaultWorkerID() string {
	host, _ := os.Hostname()
	if host == "" {
		host = "halley"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// Lease is how long a claim (or an offered run's lease) lasts before it is renewed.
func (e *Executor) Lease() time.Duration { return e.opts.Lease }

// WorkerID is the id this executor claims runs under.
func (e *Executor) WorkerID() string { return e.opts.WorkerID }

// Notify wakes the executor to claim at once, e.g. right after a run was committed, instead of at the next
// poll. It never blocks and may be called before Run.
func (e *Executor) Notify() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// Available reports whether the executor would start an offered run at once (it runs and has a free worker). The
// engine asks it before writing a new run already leased to this executor (see Offer).
func (e *Executor) Available() bool {
	return e.accepting.Load() && e.load.Load() < int64(e.opts.Workers)
}

// Offer hands the executor jobs already leased to its WorkerID (written leased in the transaction that queued
// them), so they run without a claim. They are heartbeated from now on and started as workers free up, before
// any claim. Offered jobs that never run (shutdown, crash) keep their durable rows: their leases expire and a
// claim runs them again as a next attempt.
func (e *Executor) Offer(jobs ...Job) {
	if len(jobs) == 0 {
		return
	}
	e.mu.Lock()
	for _, j := range jobs {
		e.running[j.RunID] = &tracked{job: j}
	}
	e.offered = append(e.offered, jobs...)
	e.mu.Unlock()
	e.load.Add(int64(len(jobs)))
	select { // wake the loop to start them; unlike Notify, this asks for no claim
	case e.offer <- struct{}{}:
	default:
	}
}

// takeOffered removes up to n offered jobs.
func (e *Executor) takeOffered(n int) []Job {
	e.mu.Lock()
	defer e.mu.Unlock()
	n = min(n, len(e.offered))
	if n == 0 {
		return nil
	}
	jobs := append([]Job(nil), e.offered[:n]...)
	rest := copy(e.offered, e.offered[n:])
	clear(e.offered[rest:])
	e.offered = e.offered[:rest]
	return jobs
}

// Run claims runs from q and executes them until ctx is done, then stops claiming, waits for the runs in flight
// (see ShutdownTimeout and Drain) and returns nil. It may be called once.
func (e *Executor) Run(ctx context.Context, q Queue) error {
	if q == nil {
		return errors.New("plugin: Run needs a queue")
	}
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("plugin: executor already started")
	}
	defer close(e.drained)
	e.q = q
	// Runs outlive ctx so a shutdown lets them finish; hardStop cancels them when ShutdownTimeout passes or
	// Drain's deadline comes.
	runCtx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	go func() {
		select {
		case <-e.kill:
			hardStop()
		case <-runCtx.Done():
		}
	}()

	var workers sync.WaitGroup
	hbDone := make(chan struct{})
	hbStopped := make(chan struct{})
	go func() {
		defer close(hbStopped)
		e.heartbeat(runCtx, hbDone)
	}()

	e.loop(ctx, runCtx, &workers)

	drained := make(chan struct{})
	go func() {
		workers.Wait()
		close(drained)
	}()
	if e.opts.ShutdownTimeout > 0 {
		t := time.AfterFunc(e.opts.ShutdownTimeout, e.killRuns)
		defer t.Stop()
	}
	<-drained
	close(hbDone)
	<-hbStopped
	e.log.Info("plugin executor stopped")
	return nil
}

func (e *Executor) killRuns() { e.killOnce.Do(func() { close(e.kill) }) }

// Drain is the executor's part of a stop, after Run's context was cancelled: it waits for the runs in flight to
// finish until shortly before ctx's deadline (a second, or a tenth of the time left, sooner: what stops after the
// executor needs some of it), then kills them (they are abandoned, not completed: their leases expire and another
// worker runs them again) and waits for Run to return. It returns at once when Run never started.
func (e *Executor) Drain(ctx context.Context) error {
	if !e.started.Load() {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-min(time.Second, time.Until(dl)/10)))
		defer cancel()
	}
	select {
	case <-e.drained:
		return nil
	case <-ctx.Done():
	}
	e.log.Warn("plugin runs still in flight at the stop deadline: killing them; they run again elsewhere")
	e.killRuns()
	<-e.drained
	return nil
}

// loop claims whenever there is a reason to (start, Notify, poll tick, a likely backlog) and a free worker.
func (e *Executor) loop(ctx, runCtx context.Context, workers *sync.WaitGroup) {
	ticker := time.NewTicker(e.opts.PollInterval)
	defer ticker.Stop()
	inflight := 0
	want := true // look for work at start
	e.accepting.Store(true)
	defer e.accepting.Store(false)
	for {
		if inflight < e.opts.Workers && ctx.Err() == nil {
			// Offered jobs first: they are leased to this executor already.
			for _, job := range e.takeOffered(e.opts.Workers - inflight) {
				inflight++
				workers.Add(1)
				go e.work(runCtx, job, workers)
			}
		}
		if want && inflight < e.opts.Workers && ctx.Err() == nil {
			free := e.opts.Workers - inflight
			jobs, err := e.claim(ctx, free)
			switch {
			case err != nil:
				if ctx.Err() == nil {
					e.log.Error("unable to claim plugin runs", "error", err)
				}
				want = false // try again at the next tick or Notify
			default:
				// A full batch suggests more are queued: claim again as soon as a worker frees up.
				want = len(jobs) == free
				for _, job := range jobs {
					inflight++
					e.load.Add(1)
					workers.Add(1)
					e.track(job)
					go e.work(runCtx, job, workers)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-e.wake:
			want = true
		case <-e.offer:
		case <-ticker.C:
			want = true
		case <-e.freed:
			inflight--
		}
	}
}

func (e *Executor) claim(ctx context.Context, n int) (jobs []Job, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("queue claim panicked: %v", p)
		}
	}()
	jobs, err = e.q.Claim(ctx, e.opts.WorkerID, n, e.opts.Now().Add(e.opts.Lease))
	if err != nil {
		return nil, err
	}
	if len(jobs) > n {
		// Running them would break the bound; their leases expire and they are claimed again.
		e.log.Error("queue returned more runs than asked; leaving the extra ones to expire", "asked", n, "got", len(jobs))
		jobs = jobs[:n]
	}
	return jobs, nil
}

func (e *Executor) track(job Job) {
	e.mu.Lock()
	e.running[job.RunID] = &tracked{job: job}
	e.mu.Unlock()
}

// begin gives a run its worker's cancel function, and cancels it at once when StopRuns came first.
func (e *Executor) begin(job Job, cancel context.CancelCauseFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.running[job.RunID]
	if !ok {
		return
	}
	t.cancel = cancel
	if t.stop != "" {
		cancel(&stopCause{t.stop})
	}
}

// StopRuns stops runs this executor holds that are no longer its to finish: the engine closed them (their auto
// node timed out; their instance was terminated, withdrawn or otherwise ended; their node was left), or another
// worker holds their lease. A run executing has its context cancelled, so the runner kills its process group
// (and its cgroup or run uid's processes) at once; an offered run that has not started is dropped. Either is
// logged, its output so far goes to the run log, and nothing is reported (the engine's record of the run stands).
// runs maps run ids to why (for the log); ids this executor does not hold are ignored. It never blocks for long.
// The engine calls it right after committing a step that closed runs (this process's runs, at once); for runs
// closed on other replicas the heartbeat finds them when it renews the leases (every Lease/3).
func (e *Executor) StopRuns(runs map[string]string) {
	if len(runs) == 0 {
		return
	}
	var dropped []Job
	var whys []string
	e.mu.Lock()
	for id, why := range runs {
		t, ok := e.running[id]
		if !ok {
			continue
		}
		if why == "" {
			why = "closed"
		}
		switch {
		case t.cancel != nil:
			t.cancel(&stopCause{why})
		case e.dropOffered(id):
			delete(e.running, id)
			dropped = append(dropped, t.job)
			whys = append(whys, why)
		default:
			t.stop = why // claimed, its worker about to start: begin cancels it
		}
	}
	e.mu.Unlock()
	for i, job := range dropped {
		e.load.Add(-1)
		e.log.Info("plugin run dropped before it started: it is no longer this worker's to run", "run_id", job.RunID,
			"instance_id", job.Input.InstanceID, "node_id", job.Input.NodeID, "why", whys[i])
		e.signal(job, Result{ExitCode: -1, Stopped: whys[i]}, fmt.Errorf("%w: %s", ErrStopped, whys[i]))
	}
}

// dropOffered removes an offered job that has not started; e.mu is held.
func (e *Executor) dropOffered(id string) bool {
	for i, j := range e.offered {
		if j.RunID == id {
			n := copy(e.offered[i:], e.offered[i+1:])
			clear(e.offered[i+n:])
			e.offered = e.offered[:i+n]
			return true
		}
	}
	return false
}

func (e *Executor) untrack(job Job) {
	e.mu.Lock()
	delete(e.running, job.RunID)
	e.mu.Unlock()
}

func (e *Executor) runningIDs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.running))
	for id := range e.running {
		ids = append(ids, id)
	}
	return ids
}

// heartbeat renews the leases of the runs in flight every Lease/3 until done is closed (after the last worker).
func (e *Executor) heartbeat(ctx context.Context, done <-chan struct{}) {
	every := max(e.opts.Lease/3, time.Millisecond)
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-done:
			return
		case <-ticker.C:
		}
		ids := e.runningIDs()
		if len(ids) == 0 {
			continue
		}
		lost, err := e.extend(ctx, ids)
		if err != nil {
			e.log.Warn("unable to extend plugin run leases", "runs", len(ids), "error", err)
			continue // no news: the runs go on (their leases still hold, or a claim elsewhere says otherwise later)
		}
		e.StopRuns(lost)
	}
}

func (e *Executor) extend(ctx context.Context, ids []string) (lost map[string]string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("queue extend panicked: %v", p)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, e.opts.Lease)
	defer cancel()
	return e.q.Extend(ctx, e.opts.WorkerID, ids, e.opts.Now().Add(e.opts.Lease))
}

// work executes one job and reports it. The lease stays tracked (heartbeated) until Complete returns. The worker
// is free (Available counts it, the loop may start another run) before OnComplete hears of the run: a caller
// reacting to a completion by offering the next run finds the worker it just freed.
func (e *Executor) work(ctx context.Context, job Job, workers *sync.WaitGroup) {
	defer workers.Done()
	res, err := e.runJob(ctx, job)
	e.untrack(job)
	e.load.Add(-1)
	e.freed <- struct{}{} // buffered to Workers: never blocks, even after the loop is gone
	e.signal(job, res, err)
}

// runJob executes one job, writes its log and hands its result to the queue; it returns what OnComplete is told.
func (e *Executor) runJob(ctx context.Context, job Job) (Result, error) {
	log := e.log.With("run_id", job.RunID, "attempt", job.Attempt, "plugin", job.Spec.Name,
		"plugin_version", job.Spec.Version, "instance_id", job.Input.InstanceID, "node_id", job.Input.NodeID)
	// The run's own context: StopRuns cancels it (with a stopCause) when the run is closed meanwhile.
	jobCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	e.begin(job, cancel)
	res := e.execute(jobCtx, job, log)

	var stopped *stopCause
	if errors.As(context.Cause(jobCtx), &stopped) {
		// The engine closed the run (or another worker holds it): its status is recorded already; reporting
		// this result would be refused. Keep what it printed in its log.
		res.Stopped = stopped.why
		log.Info("plugin run stopped: it is no longer this worker's to finish; its processes are killed, its result is not reported",
			"why", stopped.why, "duration", res.Duration())
		if e.opts.Logs != nil {
			if err := e.opts.Logs.Write(ctx, job, res); err != nil {
				log.Error("unable to write plugin run log", "error", err)
			}
		}
		return res, fmt.Errorf("%w: %s", ErrStopped, stopped.why)
	}
	if ctx.Err() != nil {
		log.Warn("plugin run abandoned at shutdown", "error", res.Err)
		return res, ErrAbandoned
	}
	// The record goes with the result when the queue can write it there (a database log): one commit, and the
	// run is never seen finished without its log. Otherwise, and whenever the queue did not write it, before.
	var rec *model.PluginRunLog
	if dl, ok := e.opts.Logs.(*DBLog); ok {
		if _, ok := e.q.(LoggingQueue); ok {
			rec = dl.Record(job, res)
		}
	}
	if e.opts.Logs != nil && rec == nil {
		if err := e.opts.Logs.Write(ctx, job, res); err != nil {
			log.Error("unable to write plugin run log", "error", err)
		}
	}
	logged, err := e.complete(ctx, job, res, rec, log)
	if rec != nil && !logged {
		if err := e.opts.Logs.Write(ctx, job, res); err != nil {
			log.Error("unable to write plugin run log", "error", err)
		}
	}
	switch {
	case err != nil:
		log.Error("unable to complete plugin run; it will run again when its lease expires", "error", err)
	case res.Err != nil:
		log.Warn("plugin run failed", "status", res.Status(), "exit_code", res.ExitCode,
			"duration", res.Duration(), "error", res.Err)
	default:
		log.Info("plugin run succeeded", "duration", res.Duration(), "async", res.Output != nil && res.Output.Async)
	}
	return res, err
}

// execute runs the job, turning a panic in the runner into a failed result.
func (e *Executor) execute(ctx context.Context, job Job, log *slog.Logger) (res Result) {
	started := e.opts.Now()
	defer func() {
		if p := recover(); p != nil {
			log.Error("plugin runner panicked", "panic", p, "stack", string(debug.Stack()))
			res = Result{ExitCode: -1, StartedAt: started, EndedAt: e.opts.Now(),
				Err: fmt.Errorf("plugin runner panicked: %v", p)}
		}
	}()
	return e.r.Run(ctx, job.Spec, job.Input)
}

// complete hands the result to the queue, retrying; with rec, through LoggingQueue, reporting whether the queue
// wrote rec.
func (e *Executor) complete(ctx context.Context, job Job, res Result, rec *model.PluginRunLog, log *slog.Logger) (logged bool, err error) {
	backoff := completeBackoff
	for attempt := 1; attempt <= completeAttempts; attempt++ {
		if logged, err = e.completeOnce(ctx, job, res, rec); err == nil {
			return logged, nil
		}
		if attempt == completeAttempts {
			break
		}
		log.Warn("unable to complete plugin run, retrying", "error", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, err
		case <-t.C:
		}
		backoff *= 2
	}
	return false, err
}

func (e *Executor) completeOnce(ctx context.Context, job Job, res Result, rec *model.PluginRunLog) (logged bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			logged, err = false, fmt.Errorf("queue complete panicked: %v", p)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, completeTimeout)
	defer cancel()
	if rec != nil {
		return e.q.(LoggingQueue).CompleteLogged(ctx, e.opts.WorkerID, job, res, rec)
	}
	return false, e.q.Complete(ctx, e.opts.WorkerID, job, res)
}

func (e *Executor) signal(job Job, res Result, err error) {
	if e.opts.OnComplete != nil {
		e.opts.OnComplete(job, res, err)
	}
}
