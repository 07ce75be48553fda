package plugin_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/plugin"
)

// sleeperSpec is a plugin that starts a grandchild, writes "<its pid> <the grandchild's pid>" to pidFile
// (atomically) and waits for the grandchild, which sleeps for five minutes: a run that only ends when killed.
func sleeperSpec(t *testing.T, pidFile string) plugin.Spec {
	t.Helper()
	spec := shellSpec(t, fmt.Sprintf(`sleep 300 &
echo "$$ $!" > %[1]q.tmp && mv %[1]q.tmp %[1]q
echo started >&2
wait
`, pidFile))
	spec.Timeout = 5 * time.Minute
	return spec
}

// sleeperQueue is a queue holding one run of sleeperSpec.
func sleeperQueue(t *testing.T, pidFile string) *fakeQueue {
	t.Helper()
	q := newFakeQueue(1)
	q.queued[0].Spec = sleeperSpec(t, pidFile)
	return q
}

// wantStopped checks a run the executor stopped: reported to OnComplete as ErrStopped with why, never completed
// in the queue, its record in the log with what it printed.
func wantStopped(t *testing.T, c completion, q *fakeQueue, logs *plugin.LogStore, why string) {
	t.Helper()
	if !errors.Is(c.err, plugin.ErrStopped) || !strings.Contains(c.err.Error(), why) {
		t.Fatalf("completion err %v, want ErrStopped with %q", c.err, why)
	}
	if c.res.Stopped != why || c.res.Status() != plugin.StatusStopped || c.res.Err == nil || !strings.Contains(c.res.Err.Error(), "stopped: "+why) {
		t.Fatalf("stopped result: status %s stopped %q err %v", c.res.Status(), c.res.Stopped, c.res.Err)
	}
	if _, _, completed := q.snapshot(); len(completed) != 0 {
		t.Fatalf("a stopped run was reported: %+v", completed)
	}
	b, err := logs.Read(c.res.StartedAt, c.job.Spec.Name, c.job.RunID)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"status:      stopped", "stopped:     " + why, "started"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("run log lacks %q:\n%s", want, b)
		}
	}
}

// TestExecutorStopsRunItNoLongerHolds: a heartbeat that finds the run closed (the engine timed it out on some
// replica) kills its process group — the plugin and its grandchild — and reports nothing.
func TestExecutorStopsRunItNoLongerHolds(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pids")
	q := sleeperQueue(t, pidFile)
	logs := &plugin.LogStore{Dir: filepath.Join(t.TempDir(), "logs")}
	done, _, _ := startExecutor(t, q, newRunner(t), plugin.ExecutorOptions{Workers: 1, Lease: 30 * time.Millisecond,
		PollInterval: time.Hour, Logs: logs})
	pids := testkit.WaitPids(t, pidFile)
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("process %d is not running", pid)
		}
	}
	// Its lease is renewed while it is held.
	for id := range q.extendedCh {
		if id == "run-000" {
			break
		}
	}
	const why = "the engine closed the run: timed_out"
	q.closeRun("run-000", why)
	c := waitCompletion(t, done)
	waitDead(t, pids)
	wantStopped(t, c, q, logs, why)
}

// TestExecutorStopRuns: StopRuns (the engine's call after committing a step that closed runs) kills a run in
// flight at once, drops an offered run that has not started, and ignores runs the executor does not hold.
func TestExecutorStopRuns(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pids")
	q := sleeperQueue(t, pidFile)
	logs := &plugin.LogStore{Dir: filepath.Join(t.TempDir(), "logs")}
	// No heartbeat within the test: only StopRuns can stop the run.
	done, ex, _ := startExecutor(t, q, newRunner(t), plugin.ExecutorOptions{Workers: 1, Lease: time.Hour,
		PollInterval: time.Hour, Logs: logs})
	pids := testkit.WaitPids(t, pidFile)
	marker := filepath.Join(dir, "offered-ran")
	offered := shellSpec(t, fmt.Sprintf("touch %q\necho '{}'\n", marker))
	ex.Offer(plugin.Job{RunID: "offered-1", Attempt: 1, Spec: offered, Input: plugin.Input{RunID: "offered-1"}})
	if ex.Available() {
		t.Fatal("available with its only worker busy")
	}

	ex.StopRuns(map[string]string{"not-mine": "not this executor's run"})
	if !alive(pids[0]) {
		t.Fatal("StopRuns of a run the executor does not hold stopped another")
	}
	const why = "the engine closed the run: cancelled"
	ex.StopRuns(map[string]string{"run-000": why, "offered-1": why})
	got := map[string]completion{}
	for range 2 {
		c := waitCompletion(t, done)
		got[c.job.RunID] = c
	}
	waitDead(t, pids)
	wantStopped(t, got["run-000"], q, logs, why)
	if c := got["offered-1"]; !errors.Is(c.err, plugin.ErrStopped) || c.res.Stopped != why {
		t.Fatalf("offered run: %+v", c)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the dropped offered run ran: %v", err)
	}
	if !ex.Available() {
		t.Fatal("not available once both runs were stopped")
	}
}

// TestExecutorKeepsRunItHolds: a long run whose leases are renewed keeps running across many heartbeats and is
// reported when it ends by itself.
func TestExecutorKeepsRunItHolds(t *testing.T) {
	dir := t.TempDir()
	pidFile, goFile := filepath.Join(dir, "pids"), filepath.Join(dir, "go")
	q := newFakeQueue(1)
	q.queued[0].Spec = shellSpec(t, fmt.Sprintf(`echo $$ > %[1]q.tmp && mv %[1]q.tmp %[1]q
while [ ! -e %[2]q ]; do sleep 0.02; done
echo '{"context":{"done":true}}'
`, pidFile, goFile))
	q.queued[0].Spec.Timeout = 5 * time.Minute
	done, _, _ := startExecutor(t, q, newRunner(t), plugin.ExecutorOptions{Workers: 1, Lease: 30 * time.Millisecond,
		PollInterval: time.Hour})
	pids := testkit.WaitPids(t, pidFile)
	for n := 0; n < 5; {
		if <-q.extendedCh == "run-000" {
			n++
		}
	}
	if !alive(pids[0]) {
		t.Fatal("a run whose lease was renewed was stopped")
	}
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c := waitCompletion(t, done)
	if c.err != nil || c.res.Err != nil || c.res.Output.Context["done"] != true {
		t.Fatalf("completion %+v", c)
	}
	if _, _, completed := q.snapshot(); len(completed["run-000"]) != 1 {
		t.Fatalf("completed %d times, want once", len(completed["run-000"]))
	}
}

// TestExecutorFreesWorkerBeforeReporting: when OnComplete hears of a run, the run's worker is free already, so a
// caller that offers the next run from there sees Available (CI once saw the report come first). The runs are
// offered one at a time, each after the last one's report, with nothing to claim: with a backlog the loop may give
// the freed worker a claimed run before the report, and Available is rightly false then.
func TestExecutorFreesWorkerBeforeReporting(t *testing.T) {
	const runs = 50
	q := newFakeQueue(0)
	type seen struct {
		id        string
		available bool
	}
	ch := make(chan seen, runs)
	var ex *plugin.Executor
	ex, err := plugin.NewExecutor(runnerFunc(func(context.Context, plugin.Spec, plugin.Input) plugin.Result {
		return plugin.Result{ExitCode: 0, Output: &plugin.Output{}}
	}), plugin.ExecutorOptions{Workers: 1, Lease: time.Hour, PollInterval: time.Hour, WorkerID: "test-worker",
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnComplete: func(job plugin.Job, _ plugin.Result, _ error) { ch <- seen{job.RunID, ex.Available()} }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan error, 1)
	go func() { returned <- ex.Run(ctx, q) }()
	defer func() {
		cancel()
		if err := <-returned; err != nil {
			t.Error(err)
		}
	}()
	for i := range runs {
		id := fmt.Sprintf("offered-%02d", i)
		ex.Offer(plugin.Job{RunID: id, Attempt: 1, Spec: plugin.Spec{Name: "p", Version: 1, Runtime: plugin.RuntimeBinary},
			Input: plugin.Input{RunID: id, InstanceID: "inst", NodeID: "n", Phase: "auto"}})
		select {
		case s := <-ch:
			if s.id != id || !s.available {
				t.Fatalf("OnComplete of %s (offered %s) ran while its worker still counted as busy: available %v", s.id, id, s.available)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no completion")
		}
	}
}
