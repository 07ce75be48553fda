package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
)

// callDef: an auto node runs the plugin "ext" (async: it answers later through POST /plugin-runs/{id}/result)
// with a timeout of 30s and the given error handler; with catch, the branch "fix" is an approval.
func callDef(handler string) string {
	fix, fixEdge := "", ""
	if strings.Contains(handler, "catch") {
		fix, fixEdge = `{"id":"fix","type":"approval","approvers":{"users":["ops"]}},`, `,{"from":"fix","to":"end"}`
	}
	return fmt.Sprintf(`{"nodes":[
		{"id":"start","type":"start","trigger":{"kind":"manual"}},
		{"id":"call","type":"auto","timeout":"30s","plugins":{"after":["ext"]}%s},%s
		{"id":"end","type":"end","join":"or"}],
	 "edges":[{"from":"start","to":"call"},{"from":"call","to":"end"}%s]}`, handler, fix, fixEdge)
}

// plugin stores a plugin version row (the engine only needs it to exist).
func (h *harness) plugin(name string) {
	h.t.Helper()
	file := strings.NewReader("print('{}')\n")
	sum, size, err := plugin.Hash(file, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.s.CreatePlugin(h.ctx, &model.Plugin{TenantID: model.DefaultTenant, Name: name, Version: 1, Runtime: "python", SHA256: sum, Size: size,
		Warm: true, CreatedAt: t0}, file); err != nil {
		h.t.Fatal(err)
	}
}

// runOf returns the instance's plugin runs of node, oldest first.
func (h *harness) runsOf(id string) []*model.PluginRun {
	h.t.Helper()
	runs, _, err := h.s.ListRuns(h.ctx, model.RunFilter{TenantID: model.DefaultTenant, Plugin: "ext", InstanceID: id, Page: model.Page{Limit: 100}})
	if err != nil {
		h.t.Fatal(err)
	}
	// ListRuns answers newest first.
	for i, j := 0, len(runs)-1; i < j; i, j = i+1, j-1 {
		runs[i], runs[j] = runs[j], runs[i]
	}
	return runs
}

// goAsync plays the executor for the instance's latest queued run: it claims it and reports {"async":true}.
func (h *harness) goAsync(id string) *model.PluginRun {
	h.t.Helper()
	runs := h.runsOf(id)
	r := runs[len(runs)-1]
	if r.Status != model.RunQueued {
		h.t.Fatalf("latest run %s is %s, want queued", r.ID, r.Status)
	}
	claimed, err := h.s.ClaimRuns(h.ctx, "worker-1", 100, h.clk.Now(), h.clk.Now().Add(time.Minute))
	if err != nil {
		h.t.Fatalf("claim: %v", err)
	}
	var mine *model.PluginRun
	for _, c := range claimed {
		if c.ID == r.ID {
			mine = c
		}
	}
	if mine == nil {
		h.t.Fatalf("run %s was not claimed", r.ID)
	}
	now := h.clk.Now()
	if err := h.eng.PluginResult(h.ctx, mine, engine.PluginOutcome{Status: model.RunWaiting, Started: &now, Ended: &now, From: []string{model.RunRunning}}); err != nil {
		h.t.Fatalf("async reply: %v", err)
	}
	return mine
}

// asyncResult posts a plugin's result as its system would (with the signed token).
func (h *harness) asyncResult(runID, status string) error {
	_, err := h.eng.AsyncResult(h.ctx, admin, runID, engine.ResultToken([]byte("callback-key-for-tests"), runID),
		status, json.RawMessage(`{"answer":42}`))
	return err
}

// fireDue fires the timers due by the fake clock, as the scheduler would.
func (h *harness) fireDue() {
	h.t.Helper()
	due := h.dueTimers()
	for i, err := range h.fire(h.ctx, due) {
		if err != nil {
			h.t.Fatalf("timer %s: %v", due[i].ID, err)
		}
	}
}

func (h *harness) runStatus(runID string) string {
	h.t.Helper()
	r, err := h.s.GetRun(h.ctx, model.DefaultTenant, runID)
	if err != nil {
		h.t.Fatal(err)
	}
	return r.Status
}

func TestAutoNodeTimeout(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "ops")
		h.plugin("ext")
		h.publish("call-throw", callDef(""))
		h.publish("call-retry", callDef(`,"error_handler":{"operation":"retry","retry":{"count":1,"period":"5s"}}`))
		h.publish("call-catch", callDef(`,"error_handler":{"operation":"catch","catch":{"branch":"fix"}}`))

		t.Run("the timeout bounds the async wait: run timed_out, plugin_timeout, a late result is 409 run_closed", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "call-throw", `{}`)
			run := h.goAsync(id)
			h.wantNodes(id, map[string]model.NodeState{"call": "active"})
			h.clk.Advance(29 * time.Second)
			h.fireDue()
			h.wantStatus(id, model.StatusRunning)
			h.clk.Advance(time.Second)
			h.fireDue()
			h.wantStatus(id, model.StatusFailed)
			h.wantNodes(id, map[string]model.NodeState{"call": "failed", "end": ""})
			if st := h.runStatus(run.ID); st != model.RunTimedOut {
				t.Fatalf("run is %s, want timed_out", st)
			}
			inst, _ := h.get(id)
			if e := inst.State.Error; e == nil || e.Code != model.NodeErrPluginTimeout || e.NodeID != "call" {
				t.Fatalf("instance error %+v", e)
			}
			rev := inst.Rev
			wantErr(t, h.asyncResult(run.ID, model.RunSucceeded), model.ECONFLICT, "run_closed")
			inst, _ = h.get(id)
			if inst.Rev != rev || h.contextValue(id, "answer").Exists() || h.runStatus(run.ID) != model.RunTimedOut {
				t.Fatalf("a refused result changed something: rev %d→%d, context %s", rev, inst.Rev, inst.Context)
			}
			if h.count(id, "plugin.timed_out", "call") != 1 || h.count(id, "node.failed", "call") != 1 {
				t.Fatalf("history %v", h.actions(id))
			}
		})

		t.Run("a result in time wins and the timeout is cancelled", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "call-throw", `{}`)
			run := h.goAsync(id)
			h.clk.Advance(10 * time.Second)
			if err := h.asyncResult(run.ID, model.RunSucceeded); err != nil {
				t.Fatal(err)
			}
			h.wantStatus(id, model.StatusCompleted)
			if n := h.rows("timers", "instance_id = ? AND status = ?", id, model.TimerPending); n != 0 {
				t.Fatalf("%d timers still pending after the node completed", n)
			}
			wantErr(t, h.asyncResult(run.ID, model.RunSucceeded), model.ECONFLICT, "run_closed")
		})

		t.Run("retry starts a new run with a new timeout", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "call-retry", `{}`)
			first := h.goAsync(id)
			h.clk.Advance(30 * time.Second)
			h.fireDue()
			h.wantStatus(id, model.StatusRunning)
			if st := h.runStatus(first.ID); st != model.RunTimedOut {
				t.Fatalf("first run %s", st)
			}
			h.clk.Advance(5 * time.Second)
			h.fireDue() // the retry
			second := h.goAsync(id)
			if second.ID == first.ID {
				t.Fatal("the retry reused the run")
			}
			wantErr(t, h.asyncResult(first.ID, model.RunSucceeded), model.ECONFLICT, "run_closed")
			h.clk.Advance(29 * time.Second) // within the new run's own 30s
			h.fireDue()
			if err := h.asyncResult(second.ID, model.RunSucceeded); err != nil {
				t.Fatal(err)
			}
			h.wantStatus(id, model.StatusCompleted)
			if h.contextValue(id, "answer").Int() != 42 {
				t.Fatalf("context %s", h.contextValue(id, "@this").Raw)
			}
		})

		t.Run("catch: the branch runs with context.error.code plugin_timeout", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "call-catch", `{}`)
			h.goAsync(id)
			h.clk.Advance(30 * time.Second)
			h.fireDue()
			h.wantNodes(id, map[string]model.NodeState{"call": "failed", "fix": "active"})
			if c := h.contextValue(id, "error.code").String(); c != model.NodeErrPluginTimeout {
				t.Fatalf("context.error %s", h.contextValue(id, "error").Raw)
			}
			h.decide(id, "fix", "ops", true)
			h.wantStatus(id, model.StatusCompleted)
		})

		t.Run("the timeout survives a restart: a new engine and scheduler armed from the rows fire it", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "call-throw", `{}`)
			h.goAsync(id)
			// A restart: nothing of the first engine is used; the timer exists only as a row.
			eng2 := newEngine(t, s, template.New(s, template.Options{Clock: h.clk}), s, engine.Options{Clock: h.clk, CallbackKey: []byte("callback-key-for-tests")})
			sched := scheduler.NewMemory(scheduler.Options{Clock: h.clk})
			defer sched.Close()
			if n, err := scheduler.Rearm(h.ctx, s, sched, 0); err != nil || n == 0 {
				t.Fatalf("re-armed %d timers: %v", n, err)
			}
			fired := make(chan struct{}, 16)
			ctx, cancel := context.WithCancel(h.ctx)
			defer cancel()
			route := engineRoute(t, s, eng2)
			go sched.Run(ctx, func(ctx context.Context, batch []scheduler.Due) []error {
				errs := route(ctx, batch)
				fired <- struct{}{}
				return errs
			})
			h.clk.Advance(30 * time.Second)
			select {
			case <-fired:
			case <-time.After(10 * time.Second):
				t.Fatal("the re-armed timeout never fired")
			}
			h.wantStatus(id, model.StatusFailed)
		})

		t.Run("terminate closes the run it waited for: a later result is 409 run_closed", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "call-throw", `{}`)
			run := h.goAsync(id)
			if _, err := h.eng.Terminate(h.ctx, admin, id, "stop"); err != nil {
				t.Fatal(err)
			}
			if st := h.runStatus(run.ID); st != model.RunCancelled {
				t.Fatalf("run is %s after terminate, want cancelled", st)
			}
			wantErr(t, h.asyncResult(run.ID, model.RunSucceeded), model.ECONFLICT, "run_closed")
			wantErr(t, h.asyncResult(run.ID, model.RunFailed), model.ECONFLICT, "run_closed")
		})
	})
}

// TestLateResultRacesTheTimeout: results posted by many goroutines race the node's timeout fired by many
// others; exactly one of them takes effect.
func TestLateResultRacesTheTimeout(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "ops")
		h.plugin("ext")
		h.publish("call", callDef(""))
		outcomes := map[string]int{}
		for round := 0; round < 8; round++ {
			id := h.start("ann", "call", `{}`)
			run := h.goAsync(id)
			h.clk.Advance(30 * time.Second)
			due := h.dueTimers()
			var timer *model.Timer
			for _, d := range due {
				rows, _ := s.GetTimers(h.ctx, []string{d.ID})
				if len(rows) == 1 && rows[0].InstanceID == id {
					timer = rows[0]
				}
			}
			if timer == nil {
				t.Fatal("no due timeout")
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			accepted, closed := 0, 0
			start := make(chan struct{})
			for g := 0; g < 20; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					if g%2 == 0 {
						if err := h.eng.FireTimer(h.ctx, model.DefaultTenant, timer); err != nil {
							t.Errorf("fire: %v", err)
						}
						return
					}
					err := h.asyncResult(run.ID, model.RunSucceeded)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						accepted++
					case model.IsKind(err, model.ECONFLICT):
						closed++
					default:
						t.Errorf("result: %v", err)
					}
				}()
			}
			close(start)
			wg.Wait()
			inst, _ := h.get(id)
			succeeded, timedOut := h.count(id, "plugin.succeeded", "call"), h.count(id, "plugin.timed_out", "call")
			switch {
			case accepted == 1 && inst.Status == model.StatusCompleted && succeeded == 1 && timedOut == 0 && h.runStatus(run.ID) == model.RunSucceeded:
				outcomes["result"]++
			case accepted == 0 && inst.Status == model.StatusFailed && succeeded == 0 && timedOut == 1 && h.runStatus(run.ID) == model.RunTimedOut:
				outcomes["timeout"]++
			default:
				t.Fatalf("round %d: %d results accepted, %d refused, instance %s, history %v, run %s", round, accepted, closed, inst.Status, h.actions(id), h.runStatus(run.ID))
			}
			if accepted+closed != 10 {
				t.Fatalf("round %d: %d answers of 10", round, accepted+closed)
			}
		}
		t.Logf("winners: %v", outcomes)
	})
}
