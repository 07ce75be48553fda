package plugin_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halley-bpm/halley/plugin"
)

// fakeQueue is an in-memory plugin.Queue that records what the executor did.
type fakeQueue struct {
	mu          sync.Mutex
	queued      []plugin.Job
	claimed     int
	asks        []int // n of every Claim
	completed   map[string][]plugin.Result
	extended    map[string]int
	leaseUntil  []time.Time
	extendedCh  chan string // every run id that got a heartbeat
	completeErr func(job plugin.Job) error
	lost        map[string]string // runs Extend reports as no longer held, with why (closeRun)
}

func newFakeQueue(n int) *fakeQueue {
	q := &fakeQueue{completed: map[string][]plugin.Result{}, extended: map[string]int{},
		extendedCh: make(chan string, 1000)}
	q.add(n)
	return q
}

func (q *fakeQueue) add(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("run-%03d", len(q.queued)+q.claimed)
		q.queued = append(q.queued, plugin.Job{RunID: id, Attempt: 1,
			Spec:  plugin.Spec{Name: "p", Version: 1, Runtime: plugin.RuntimeBinary},
			Input: plugin.Input{RunID: id, InstanceID: "inst", NodeID: "n", Phase: "auto"}})
	}
}

func (q *fakeQueue) Claim(_ context.Context, worker string, n int, leaseUntil time.Time) ([]plugin.Job, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.asks = append(q.asks, n)
	q.leaseUntil = append(q.leaseUntil, leaseUntil)
	k := min(n, len(q.queued))
	jobs := append([]plugin.Job(nil), q.queued[:k]...)
	q.queued = q.queued[k:]
	q.claimed += k
	return jobs, nil
}

func (q *fakeQueue) Extend(_ context.Context, worker string, runIDs []string, leaseUntil time.Time) (map[string]string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.leaseUntil = append(q.leaseUntil, leaseUntil)
	var lost map[string]string
	for _, id := range runIDs {
		if why, ok := q.lost[id]; ok {
			if lost == nil {
				lost = map[string]string{}
			}
			lost[id] = why
			continue
		}
		q.extended[id]++
		select {
		case q.extendedCh <- id:
		default:
		}
	}
	return lost, nil
}

// closeRun makes the next heartbeats report the run as no longer held, as the store does once the engine closed it.
func (q *fakeQueue) closeRun(id, why string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lost == nil {
		q.lost = map[string]string{}
	}
	q.lost[id] = why
}

func (q *fakeQueue) Complete(_ context.Context, worker string, job plugin.Job, res plugin.Result) error {
	if q.completeErr != nil {
		if err := q.completeErr(job); err != nil {
			return err
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.completed[job.RunID] = append(q.completed[job.RunID], res)
	return nil
}

func (q *fakeQueue) snapshot() (claimed int, asks []int, completed map[string][]plugin.Result) {
	q.mu.Lock()
	defer q.mu.Unlock()
	completed = map[string][]plugin.Result{}
	for k, v := range q.completed {
		completed[k] = v
	}
	return q.claimed, append([]int(nil), q.asks...), completed
}

type runnerFunc func(ctx context.Context, spec plugin.Spec, in plugin.Input) plugin.Result

func (f runnerFunc) Run(ctx context.Context, spec plugin.Spec, in plugin.Input) plugin.Result {
	return f(ctx, spec, in)
}

type completion struct {
	job plugin.Job
	res plugin.Result
	err error
}

// startExecutor runs e until the test ends; stop cancels it and waits for Run to return.
// A test that must cancel synchronously uses startExecutorCtx with its own parent context.
func startExecutor(t *testing.T, q plugin.Queue, r plugin.Runner, opts plugin.ExecutorOptions) (
	done <-chan completion, ex *plugin.Executor, stop func() error) {
	t.Helper()
	return startExecutorCtx(t, context.Background(), q, r, opts)
}

func startExecutorCtx(t *testing.T, parent context.Context, q plugin.Queue, r plugin.Runner, opts plugin.ExecutorOptions) (
	done <-chan completion, ex *plugin.Executor, stop func() error) {
	t.Helper()
	ch := make(chan completion, 1000)
	opts.OnComplete = func(job plugin.Job, res plugin.Result, err error) { ch <- completion{job, res, err} }
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if opts.WorkerID == "" {
		opts.WorkerID = "test-worker"
	}
	ex, err := plugin.NewExecutor(r, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(parent)
	returned := make(chan error, 1)
	go func() { returned <- ex.Run(ctx, q) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-returned:
			case <-time.After(20 * time.Second):
				runErr = errors.New("executor did not stop")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return ch, ex, stop
}

func waitCompletion(t *testing.T, ch <-chan completion) completion {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("no run completed")
		return completion{}
	}
}

func ok(in plugin.Input) plugin.Result {
	now := time.Now()
	return plugin.Result{ExitCode: 0, StartedAt: now, EndedAt: now,
		Output: &plugin.Output{Context: map[string]any{"run": in.RunID}}}
}

func TestExecutorBoundedConcurrency(t *testing.T) {
	const workers, jobs = 3, 20
	q := newFakeQueue(jobs)
	var current, peak atomic.Int32
	started := make(chan string, jobs)
	release := make(chan struct{})
	r := runnerFunc(func(ctx context.Context, _ plugin.Spec, in plugin.Input) plugin.Result {
		n := current.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		started <- in.RunID
		<-release
		current.Add(-1)
		return ok(in)
	})
	// No polling: only the first claim, Notify and the backlog after a full batch drive the executor.
	done, ex, stop := startExecutor(t, q, r, plugin.ExecutorOptions{Workers: workers, PollInterval: time.Hour})
	ex.Notify()

	for i := 0; i < workers; i++ {
		select {
		case <-started:
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d runs started", i)
		}
	}
	// Every worker is busy: nothing more may have been claimed (claim happens before start).
	if claimed, _, _ := q.snapshot(); claimed != workers {
		t.Fatalf("claimed %d runs with %d workers busy", claimed, workers)
	}
	close(release)

	seen := map[string]bool{}
	for i := 0; i < jobs; i++ {
		c := waitCompletion(t, done)
		if c.err != nil || seen[c.job.RunID] {
			t.Fatalf("completion %+v (seen before: %v)", c, seen[c.job.RunID])
		}
		seen[c.job.RunID] = true
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	if p := peak.Load(); p != workers {
		t.Errorf("peak concurrency %d, want exactly %d", p, workers)
	}
	claimed, asks, completed := q.snapshot()
	if claimed != jobs || len(completed) != jobs {
		t.Errorf("claimed %d completed %d, want %d", claimed, len(completed), jobs)
	}
	for id, rs := range completed {
		if len(rs) != 1 || rs[0].Output == nil || rs[0].Output.Context["run"] != id {
			t.Errorf("run %s completed %d times: %+v", id, len(rs), rs)
		}
	}
	for _, n := range asks {
		if n < 1 || n > workers {
			t.Errorf("claim asked for %d runs with %d workers (asks %v)", n, workers, asks)
		}
	}
}

func TestExecutorNotifyWakesIdleExecutor(t *testing.T) {
	q := newFakeQueue(0)
	r := runnerFunc(func(_ context.Context, _ plugin.Spec, in plugin.Input) plugin.Result { return ok(in) })
	done, ex, _ := startExecutor(t, q, r, plugin.ExecutorOptions{Workers: 2, PollInterval: time.Hour})
	for round := 0; round < 3; round++ {
		q.add(1)
		ex.Notify()
		if c := waitCompletion(t, done); c.err != nil || c.res.Err != nil {
			t.Fatalf("round %d: %+v", round, c)
		}
	}
	if _, _, completed := q.snapshot(); len(completed) != 3 {
		t.Errorf("completed %d, want 3", len(completed))
	}
}

func TestExecutorHeartbeatsLongRun(t *testing.T) {
	q := newFakeQueue(1)
	base := time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC)
	const lease = 30 * time.Millisecond
	r := runnerFunc(func(ctx context.Context, _ plugin.Spec, in plugin.Input) plugin.Result {
		// A long run: it ends only once its lease has been renewed.
		for id := range q.extendedCh {
			if id == in.RunID {
				break
			}
		}
		return ok(in)
	})
	done, _, _ := startExecutor(t, q, r, plugin.ExecutorOptions{Workers: 1, Lease: lease, PollInterval: time.Hour,
		Now: func() time.Time { return base }})
	c := waitCompletion(t, done)
	if c.err != nil || c.res.Err != nil {
		t.Fatalf("completion %+v", c)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.extended["run-000"] < 1 {
		t.Errorf("lease extended %d times", q.extended["run-000"])
	}
	for _, until := range q.leaseUntil {
		if !until.Equal(base.Add(lease)) {
			t.Errorf("lease until %v, want now+lease %v", until, base.Add(lease))
		}
	}
}

func TestExecutorRecoversRunnerPanic(t *testing.T) {
	q := newFakeQueue(2)
	r := runnerFunc(func(_ context.Context, _ plugin.Spec, in plugin.Input) plugin.Result {
		if in.RunID == "run-000" {
			panic("nil map in runner")
		}
		return ok(in)
	})
	done, _, stop := startExecutor(t, q, r, plugin.ExecutorOptions{Workers: 1, PollInterval: time.Hour})
	results := map[string]completion{}
	for i := 0; i < 2; i++ {
		c := waitCompletion(t, done)
		results[c.job.RunID] = c
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	failed := results["run-000"]
	if failed.err != nil || failed.res.Err == nil || !strings.Contains(failed.res.Err.Error(), "panicked: nil map in runner") ||
		failed.res.Status() != plugin.StatusFailed || failed.res.ExitCode != -1 {
		t.Errorf("panicking run: %+v", failed)
	}
	if c := results["run-001"]; c.err != nil || c.res.Err != nil {
		t.Errorf("the run after the panic: %+v", c)
	}
	_, _, completed := q.snapshot()
	if len(completed["run-000"]) != 1 || completed["run-000"][0].Err == nil {
		t.Errorf("the failed result was not completed: %+v", completed["run-000"])
	}
}

func TestExecutorShutdownWaitsForRunsInFlight(t *testing.T) {
	q := newFakeQueue(1)
	started := make(chan struct{})
	release := make(chan struct{})
	var ctxCanceled atomic.Bool
	r := runnerFunc(func(ctx context.Context, _ plugin.Spec, in plugin.Input) plugin.Result {
		close(started)
		<-release
		ctxCanceled.Store(ctx.Err() != nil)
		return ok(in)
	})
	parent, shutdown := context.WithCancel(context.Background())
	done, ex, stop := startExecutorCtx(t, parent, q, r, plugin.ExecutorOptions{Workers: 2, PollInterval: time.Hour})
	<-started

	shutdown()
	// Work committed during shutdown is not claimed any more.
	q.add(1)
	ex.Notify()
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	close(release)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	// Run returned, so the run in flight must have been completed first, with a live context.
	select {
	case c := <-done:
		if c.err != nil || c.job.RunID != "run-000" {
			t.Errorf("completion %+v", c)
		}
	default:
		t.Fatal("Run returned before the run in flight was completed")
	}
	if ctxCanceled.Load() {
		t.Error("shutdown canceled the run's context; it should have been left to finish")
	}
	claimed, _, completed := q.snapshot()
	if claimed != 1 || len(completed) != 1 {
		t.Errorf("claimed %d completed %d, want 1 1", claimed, len(completed))
	}
	if err := ex.Run(context.Background(), q); err == nil {
		t.Error("a second Run should be refused")
	}
}

func TestExecutorShutdownTimeoutAbandonsRuns(t *testing.T) {
	q := newFakeQueue(1)
	started := make(chan struct{})
	r := runnerFunc(func(ctx context.Context, _ plugin.Spec, in plugin.Input) plugin.Result {
		close(started)
		<-ctx.Done() // a run that only ends when killed
		return plugin.Result{ExitCode: -1, Err: fmt.Errorf("run canceled: %w", ctx.Err())}
	})
	done, _, stop := startExecutor(t, q, r, plugin.ExecutorOptions{Workers: 1, PollInterval: time.Hour,
		ShutdownTimeout: 50 * time.Millisecond})
	<-started
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	c := waitCompletion(t, done)
	if !errors.Is(c.err, plugin.ErrAbandoned) {
		t.Errorf("completion err %v, want ErrAbandoned", c.err)
	}
	if _, _, completed := q.snapshot(); len(completed) != 0 {
		t.Errorf("an abandoned run was completed: %+v", completed)
	}
}

// TestExecutorDrainKillsAtTheDeadline: Drain (the executor's part of a stop) waits for a run in flight until its
// deadline, then kills it; the run is abandoned, not completed, and Run returns. Before Run, Drain does nothing.
func TestExecutorDrainKillsAtTheDeadline(t *testing.T) {
	if _, err := plugin.NewExecutor(nil, plugin.ExecutorOptions{}); err == nil {
		t.Fatal("NewExecutor accepted no runner")
	}
	q := newFakeQueue(1)
	started := make(chan struct{})
	r := runnerFunc(func(ctx context.Context, _ plugin.Spec, in plugin.Input) plugin.Result {
		close(started)
		<-ctx.Done() // a run that only ends when killed
		return plugin.Result{ExitCode: -1, Err: fmt.Errorf("run canceled: %w", ctx.Err())}
	})
	done := make(chan completion, 1)
	ex, err := plugin.NewExecutor(r, plugin.ExecutorOptions{Workers: 1, PollInterval: time.Hour, WorkerID: "w",
		OnComplete: func(job plugin.Job, res plugin.Result, err error) { done <- completion{job, res, err} }})
	if err != nil {
		t.Fatal(err)
	}
	if err := ex.Drain(context.Background()); err != nil {
		t.Fatalf("Drain before Run: %v", err)
	}
	if err := ex.Run(context.Background(), nil); err == nil {
		t.Fatal("Run accepted no queue")
	}
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() { returned <- ex.Run(ctx, q) }()
	<-started
	cancel()
	select {
	case err := <-returned:
		t.Fatalf("Run returned (%v) with a run in flight before any deadline", err)
	case <-time.After(50 * time.Millisecond):
	}
	dctx, cancelDrain := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelDrain()
	if err := ex.Drain(dctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-returned:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Drain killed its run")
	}
	if c := waitCompletion(t, done); !errors.Is(c.err, plugin.ErrAbandoned) {
		t.Errorf("completion err %v, want ErrAbandoned", c.err)
	}
	if _, _, completed := q.snapshot(); len(completed) != 0 {
		t.Errorf("an abandoned run was completed: %+v", completed)
	}
}

func TestExecutorRetriesComplete(t *testing.T) {
	q := newFakeQueue(1)
	var calls atomic.Int32
	q.completeErr = func(plugin.Job) error {
		if calls.Add(1) <= 2 {
			return errors.New("deadlock found when trying to get lock")
		}
		return nil
	}
	r := runnerFunc(func(_ context.Context, _ plugin.Spec, in plugin.Input) plugin.Result { return ok(in) })
	done, _, _ := startExecutor(t, q, r, plugin.ExecutorOptions{Workers: 1, PollInterval: time.Hour})
	c := waitCompletion(t, done)
	if c.err != nil || calls.Load() != 3 {
		t.Errorf("err %v after %d Complete calls, want nil after 3", c.err, calls.Load())
	}
	if _, _, completed := q.snapshot(); len(completed["run-000"]) != 1 {
		t.Errorf("completed %d times, want once", len(completed["run-000"]))
	}
}

// TestExecutorEndToEnd: a real upload, a real process, the run log on disk.
func TestExecutorEndToEnd(t *testing.T) {
	requirePython(t)
	files := newFileStore(t)
	stored, err := files.Save("stamp", 1, strings.NewReader(`
import halley_plugin as hp
inp = hp.read_input()
hp.log("stamping", inp["run_id"])
hp.write_output(context={"stamped": inp["context"]["n"] * 2})
`), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	logs := &plugin.LogStore{Dir: filepath.Join(t.TempDir(), "logs")}
	q := newFakeQueue(0)
	q.mu.Lock()
	q.queued = append(q.queued, plugin.Job{RunID: "run-e2e", Attempt: 1,
		Spec:  plugin.Spec{Name: "stamp", Version: 1, Runtime: plugin.RuntimePython, Path: stored.Path, Timeout: 30 * time.Second},
		Input: plugin.Input{RunID: "run-e2e", InstanceID: "inst-1", NodeID: "auto-1", Phase: "auto", Context: []byte(`{"n":21}`)}})
	q.mu.Unlock()

	done, _, _ := startExecutor(t, q, newRunner(t), plugin.ExecutorOptions{Workers: 2, Logs: logs})
	c := waitCompletion(t, done)
	if c.err != nil || c.res.Err != nil || fmt.Sprint(c.res.Output.Context["stamped"]) != "42" {
		t.Fatalf("completion err=%v res.Err=%v output=%+v stderr=%q", c.err, c.res.Err, c.res.Output, c.res.Stderr)
	}
	b, err := logs.Read(c.res.StartedAt, "stamp", "run-e2e")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "stamping run-e2e") || !strings.Contains(string(b), "status:      succeeded") {
		t.Errorf("run log:\n%s", b)
	}
}

// TestExecutorOffer: jobs offered (already leased) run without a claim, at most Workers at a time, each once, and
// before any claim; Available reports whether another would start at once.
func TestExecutorOffer(t *testing.T) {
	const workers = 2
	q := newFakeQueue(1) // one queued run for a claim as well
	var current, peak atomic.Int32
	started := make(chan string, 10)
	release := make(chan struct{})
	r := runnerFunc(func(ctx context.Context, _ plugin.Spec, in plugin.Input) plugin.Result {
		n := current.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		started <- in.RunID
		<-release
		current.Add(-1)
		return ok(in)
	})
	ex, err := plugin.NewExecutor(r, plugin.ExecutorOptions{Workers: workers, PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Available() {
		t.Fatal("available before Run")
	}
	done, ex, stop := startExecutor(t, q, r, plugin.ExecutorOptions{Workers: workers, PollInterval: time.Hour})
	// The first claim takes the queued run; wait for it to start.
	first := <-started
	deadline := time.Now().Add(10 * time.Second) // guard against a hung test
	for !ex.Available() {
		if time.Now().After(deadline) {
			t.Fatal("never available with a free worker")
		}
		time.Sleep(time.Millisecond)
	}
	var offered []plugin.Job
	for i := 1; i <= 3; i++ {
		offered = append(offered, plugin.Job{RunID: fmt.Sprintf("offered-%d", i), Attempt: 1, Input: plugin.Input{RunID: fmt.Sprintf("offered-%d", i)}})
	}
	ex.Offer(offered...)
	if ex.Available() {
		t.Fatal("available with every worker busy")
	}
	second := <-started
	if first == second || !strings.HasPrefix(second, "offered-") {
		t.Fatalf("started %s then %s", first, second)
	}
	close(release)
	seen := map[string]bool{}
	for i := 0; i < 4; i++ {
		c := waitCompletion(t, done)
		if c.err != nil || seen[c.job.RunID] {
			t.Fatalf("completion %+v (seen before: %v)", c, seen[c.job.RunID])
		}
		seen[c.job.RunID] = true
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p > workers {
		t.Errorf("peak concurrency %d with %d workers", p, workers)
	}
	claimed, asks, completed := q.snapshot()
	if claimed != 1 || len(completed) != 4 {
		t.Errorf("claimed %d completed %d, want 1 and 4", claimed, len(completed))
	}
	if len(asks) != 1 {
		t.Errorf("offers caused claims: %d claims (%v), want only the first", len(asks), asks)
	}
}
