package server_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// sleeperPlugin writes "<its pid> <its child's pid>" to the file the instance context names (atomically), then
// sleeps with its child for five minutes: a run that ends only when it is killed — or, when the context names a
// go file, as soon as that file exists.
const sleeperPlugin = `import json, os, subprocess, sys, time
d = json.load(sys.stdin)["context"]
child = subprocess.Popen(["sleep", "300"])
with open(d["pidfile"] + ".tmp", "w") as f:
    f.write("%d %d" % (os.getpid(), child.pid))
os.rename(d["pidfile"] + ".tmp", d["pidfile"])
print("started", file=sys.stderr, flush=True)
for _ in range(300 * 50):
    if d.get("gofile") and os.path.exists(d["gofile"]):
        child.kill()
        print(json.dumps({"context": {"finished": True}}))
        sys.exit(0)
    time.sleep(0.02)
`

// stops records what the executor under test reported: every run, with OnComplete's error.
type stops struct{ ch chan completionOf }

type completionOf struct {
	job plugin.Job
	res plugin.Result
	err error
}

func newStops() *stops { return &stops{ch: make(chan completionOf, 100)} }

func (s *stops) wait(t *testing.T) completionOf {
	t.Helper()
	select {
	case c := <-s.ch:
		return c
	case <-time.After(30 * time.Second): // a guard against a hung test, not a timing assumption
		t.Fatal("the executor reported no run")
		return completionOf{}
	}
}

// stopExecutor is a real executor (real child processes) with the given lease, reporting to rec. At the test's
// end it kills what still runs after a second (a failing test must not wait for a sleeper's five minutes).
func stopExecutor(t *testing.T, st plugin.RunLogStore, rec *stops, worker string, lease time.Duration, now func() time.Time) *plugin.Executor {
	t.Helper()
	logs, err := plugin.NewDBLog(st)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := plugin.NewExecutor(&plugin.ProcessRunner{WorkRoot: t.TempDir()}, plugin.ExecutorOptions{Workers: 2,
		PollInterval: 10 * time.Millisecond, Lease: lease, WorkerID: worker, Logs: logs, Logger: testkit.Quiet(), Now: now, ShutdownTimeout: time.Second,
		OnComplete: func(job plugin.Job, res plugin.Result, err error) { rec.ch <- completionOf{job, res, err} }})
	if err != nil {
		t.Fatal(err)
	}
	return ex
}

// processAlive reports whether pid runs (a zombie waiting for its reaper counts as gone).
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// waitProcessesGone polls until none of pids runs; a survivor fails the test (and is killed).
func waitProcessesGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, pid := range pids {
		for processAlive(pid) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("process %d still runs", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// publishSleeper uploads the sleeper plugin and publishes "slow": an auto node with a 1 s timeout running it.
func publishSleeper(e *env) {
	e.t.Helper()
	if r := e.upload("sleeper", "python", "10m", []byte(sleeperPlugin), e.admin); r.Status != 201 {
		e.t.Fatalf("upload: %s", r.Body)
	}
	e.publish("slow", []any{start(M{"kind": "manual"}), M{"id": "work", "type": "auto", "timeout": "1s", "plugins": M{"pre": []string{"sleeper"}}},
		M{"id": "end", "type": "end"}}, []any{edge("start", "work"), edge("work", "end")})
}

// TestClosedRunsProcessesAreKilled: when the engine closes a plugin run — its auto node's timeout passes, its
// instance is terminated — the process still running it (and what it started) is killed, on the replica that
// closed it at once (the local executor, told at the commit) and on another replica at its next lease renewal;
// the run keeps the status the engine gave it, its log records the stopped attempt.
func TestClosedRunsProcessesAreKilled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		local bool // the process runs on the replica that closes the run
		close func(e *env, id string)
		// want: the run's status, the instance's
		run, inst string
	}{
		{"timeout/same replica", true, timeOut, model.RunTimedOut, "failed"},
		{"timeout/other replica", false, timeOut, model.RunTimedOut, "failed"},
		{"terminate/same replica", true, terminate, model.RunCancelled, "terminated"},
		{"terminate/other replica", false, terminate, model.RunCancelled, "terminated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, s *store.Store) {
				rec := newStops()
				clk := &testClock{t: time.Now()}
				var e *env
				if tc.local {
					// A lease of 10 min: the heartbeat (every 200 s) cannot be what stops the run within the test.
					local := stopExecutor(t, s, rec, "local", 10*time.Minute, clk.Now)
					e = newEnvWith(t, s, wiring{clock: clk, executor: local}, func(d *server.Deps) {
						withPlugins(t, nil)(d)
						runExecutor(t, local, d.Engine.PluginQueue())
					})
				} else {
					// Another replica's executor: it only learns of the close when it renews its leases (every 1 s).
					e = newEnvWith(t, s, wiring{clock: clk}, func(d *server.Deps) {
						withPlugins(t, nil)(d)
						runExecutor(t, stopExecutor(t, s, rec, "other", 3*time.Second, clk.Now), d.Engine.PluginQueue())
					})
				}
				publishSleeper(e)
				pidFile := filepath.Join(t.TempDir(), "pids")
				id := e.do("POST", "/api/v1/instances", e.admin, M{"template": "slow", "context": M{"pidfile": pidFile}}, nil).JSON["id"].(string)
				pids := testkit.WaitPids(t, pidFile)
				for _, pid := range pids {
					if !processAlive(pid) {
						t.Fatalf("process %d does not run", pid)
					}
				}
				tc.close(e, id)

				c := rec.wait(t)
				waitProcessesGone(t, pids)
				why := "the engine closed the run: " + tc.run
				if !errors.Is(c.err, plugin.ErrStopped) || c.res.Stopped != why {
					t.Fatalf("the executor reported %v (stopped: %q), want ErrStopped: %s", c.err, c.res.Stopped, why)
				}
				if tc.local {
					if owner := e.rowCount("plugin_runs", "id = ? AND lease_owner = ?", c.job.RunID, "local"); owner != 1 {
						t.Fatal("the run was not handed to the local executor")
					}
				}
				r, err := s.GetRun(context.Background(), model.DefaultTenant, c.job.RunID)
				if err != nil {
					t.Fatal(err)
				}
				if r.Status != tc.run || r.Attempt != 1 || r.InstanceID != id {
					t.Fatalf("run after the stop: %s attempt %d of %s, want %s attempt 1 of %s", r.Status, r.Attempt, r.InstanceID, tc.run, id)
				}
				if st := e.instance(id).JSON["status"]; st != tc.inst {
					t.Fatalf("instance %v, want %s", st, tc.inst)
				}
				log := e.do("GET", "/api/v1/plugin-runs/"+c.job.RunID+"/log", e.admin, nil, nil)
				for _, want := range []string{"status:      stopped", "stopped:     " + why, "started"} {
					if log.Status != 200 || !strings.Contains(string(log.Body), want) {
						t.Fatalf("run log (%d) lacks %q:\n%s", log.Status, want, log.Body)
					}
				}
				// Nothing more is reported for it (no second attempt, no late result).
				select {
				case c := <-rec.ch:
					t.Fatalf("another report: %+v", c)
				default:
				}
			})
		})
	}
}

func timeOut(e *env, _ string) {
	e.t.Helper()
	e.advance(1100 * time.Millisecond)
	if n := e.fireDue(); n != 1 {
		e.t.Fatalf("fired %d timers, want the node's timeout", n)
	}
}

func terminate(e *env, id string) {
	e.t.Helper()
	if r := e.do("POST", "/api/v1/instances/"+id+"/terminate", e.admin, M{"reason": "not needed any more"}, nil); r.Status != 200 {
		e.t.Fatalf("terminate: %d %s", r.Status, r.Body)
	}
}

// extendLog is the engine's queue with a record of every lease renewal: the runs renewed and those reported lost.
type extendLog struct {
	plugin.Queue
	mu      sync.Mutex
	renewed map[string]int
	lost    map[string]string
	ch      chan struct{}
}

func (q *extendLog) Extend(ctx context.Context, worker string, ids []string, until time.Time) (map[string]string, error) {
	lost, err := q.Queue.Extend(ctx, worker, ids, until)
	if err == nil {
		q.mu.Lock()
		for _, id := range ids {
			if why, ok := lost[id]; ok {
				q.lost[id] = why
			} else {
				q.renewed[id]++
			}
		}
		q.mu.Unlock()
		select {
		case q.ch <- struct{}{}:
		default:
		}
	}
	return lost, err
}

// TestRunningPluginOutlivesItsLeaseRenewals: a run nobody closed keeps running across lease renewals (another
// replica's executor, whose heartbeat reads the run every 200 ms) and is reported when it ends by itself.
func TestRunningPluginOutlivesItsLeaseRenewals(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rec := newStops()
		clk := &testClock{t: time.Now()}
		q := &extendLog{renewed: map[string]int{}, lost: map[string]string{}, ch: make(chan struct{}, 1)}
		e := newEnvWith(t, s, wiring{clock: clk}, func(d *server.Deps) {
			withPlugins(t, nil)(d)
			q.Queue = d.Engine.PluginQueue()
			runExecutor(t, stopExecutor(t, s, rec, "other", 600*time.Millisecond, clk.Now), q)
		})
		publishSleeper(e)
		e.publish("long", []any{start(M{"kind": "manual"}), M{"id": "work", "type": "auto", "plugins": M{"pre": []string{"sleeper"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "work"), edge("work", "end")})
		dir := t.TempDir()
		pidFile, goFile := filepath.Join(dir, "pids"), filepath.Join(dir, "go")
		id := e.do("POST", "/api/v1/instances", e.admin, M{"template": "long", "context": M{"pidfile": pidFile, "gofile": goFile}}, nil).JSON["id"].(string)
		pids := testkit.WaitPids(t, pidFile)
		runs := e.do("GET", "/api/v1/plugins/sleeper/runs?instance_id="+id, e.admin, nil, nil).JSON["items"].([]any)
		runID := runs[0].(M)["id"].(string)
		deadline := time.After(30 * time.Second) // a guard against a hung test
		for renewed := 0; renewed < 3; {
			select {
			case <-q.ch:
			case <-deadline:
				t.Fatalf("the run's lease was renewed %d times", renewed)
			}
			q.mu.Lock()
			renewed = q.renewed[runID]
			q.mu.Unlock()
		}
		for _, pid := range pids {
			if !processAlive(pid) {
				t.Fatalf("process %d of a run nobody closed is gone", pid)
			}
		}
		if err := os.WriteFile(goFile, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		c := rec.wait(t)
		if c.err != nil || c.res.Err != nil || c.res.Stopped != "" {
			t.Fatalf("the run's report: %v, result %v", c.err, c.res.Err)
		}
		waitProcessesGone(t, pids[:1])
		q.mu.Lock()
		lost := len(q.lost)
		q.mu.Unlock()
		if lost != 0 {
			t.Fatalf("lease renewals reported runs lost: %v", q.lost)
		}
		r := e.instance(id)
		if r.JSON["status"] != "completed" || r.JSON["context"].(M)["finished"] != true {
			t.Fatalf("instance: %s", r.Body)
		}
		if run, err := s.GetRun(context.Background(), model.DefaultTenant, runID); err != nil || run.Status != model.RunSucceeded || run.Attempt != 1 {
			t.Fatalf("run: %+v %v", run, err)
		}
	})
}
