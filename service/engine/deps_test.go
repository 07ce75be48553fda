package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/engine/enginetest"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
)

// TestNewNamesTheMissingDependency: every dependency of the engine is required; leaving one out is an error from
// New that names it, not a nil dereferenced on the first step that needs it.
func TestNewNamesTheMissingDependency(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	full := func() engine.Deps { return enginetest.Deps(t, s, template.New(s, template.Options{}), s) }
	if _, err := engine.New(full(), engine.Options{}); err != nil {
		t.Fatalf("complete deps: %v", err)
	}
	for name, drop := range map[string]func(*engine.Deps){
		"Store":       func(d *engine.Deps) { d.Store = nil },
		"Templates":   func(d *engine.Deps) { d.Templates = nil },
		"Directory":   func(d *engine.Deps) { d.Directory = nil },
		"Events":      func(d *engine.Deps) { d.Events = nil },
		"Outbox":      func(d *engine.Deps) { d.Outbox = nil },
		"PluginFiles": func(d *engine.Deps) { d.PluginFiles = nil },
		"Executor":    func(d *engine.Deps) { d.Executor = nil },
		"URLs":        func(d *engine.Deps) { d.URLs = nil },
	} {
		d := full()
		drop(&d)
		eng, err := engine.New(d, engine.Options{})
		if err == nil || eng != nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: New = %v, %v; want an error naming it", name, eng, err)
		}
	}
	if _, err := engine.NewEventPlugins(nil, enginetest.Nobody{}); err == nil {
		t.Error("NewEventPlugins accepted no store")
	}
	if _, err := engine.NewEventPlugins(s, nil); err == nil {
		t.Error("NewEventPlugins accepted nothing to wake")
	}
}

// wakes counts Notify calls.
type wakes struct{ n int }

func (w *wakes) Notify() { w.n++ }

// TestEngineWakesWhomItWasGiven: a commit that wrote outbox rows wakes the Outbox notifier given to New (and one
// that wrote none does not); a run the engine queues while its local executor is available is written leased to
// that executor and offered to it after the commit, without an outbox row.
func TestEngineWakesWhomItWasGiven(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		out := &wakes{}
		local := &offers{}
		d := enginetest.Deps(t, s, h.tpl, s)
		d.Outbox, d.Executor = out, local
		var err error
		if h.eng, err = engine.New(d, engine.Options{Clock: h.clk}); err != nil {
			t.Fatal(err)
		}
		h.users("ann", "bob")
		h.publish("a", oneNode(`{"id":"n","type":"approval","approvers":{"users":["bob"]}}`))
		id := h.start("ann", "a", `{}`)
		if out.n != 0 {
			t.Fatalf("a start that wrote no outbox row woke the dispatcher %d times", out.n)
		}
		h.publish("d", oneNode(`{"id":"n","type":"delay","interval":3600}`))
		h.start("ann", "d", `{}`) // arms a timer: an outbox row
		if out.n != 1 {
			t.Fatalf("the dispatcher was woken %d times, want 1", out.n)
		}
		h.decide(id, "n", "bob", true)

		file := strings.NewReader("print('{}')\n")
		sum, size, err := plugin.Hash(file, 1<<10)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CreatePlugin(h.ctx, &model.Plugin{TenantID: model.DefaultTenant, Name: "tick", Version: 1, Runtime: "python", SHA256: sum,
			Size: size, Warm: true, CreatedAt: t0}, file); err != nil {
			t.Fatal(err)
		}
		h.publish("p", oneNode(`{"id":"n","type":"auto","plugins":{"pre":["tick"]}}`))
		pid := h.start("ann", "p", `{}`)
		if len(local.jobs) != 1 || local.jobs[0].Input.InstanceID != pid || local.jobs[0].Spec.Name != "tick" || local.jobs[0].TenantID != model.DefaultTenant {
			t.Fatalf("offered %+v, want the run of %s", local.jobs, pid)
		}
		if n := h.rows("plugin_runs", "instance_id = ? AND status = ? AND lease_owner = ?", pid, model.RunRunning, "here"); n != 1 {
			t.Fatalf("the run is not written leased to the local executor (%d)", n)
		}
		if n := h.rows("outbox", "kind = ? AND ref = ?", model.OutboxPluginRun, local.jobs[0].RunID); n != 0 {
			t.Fatal("a run handed to the local executor also went through the outbox")
		}
		// A run the queue hands out comes back to the engine through Complete: the instance moves on.
		res := plugin.Result{ExitCode: 0, StartedAt: t0, EndedAt: t0, Output: &plugin.Output{}}
		if err := h.eng.PluginQueue().Complete(context.Background(), "here", local.jobs[0], res); err != nil {
			t.Fatal(err)
		}
		h.wantStatus(pid, model.StatusCompleted)
	})
}

// localExecutor builds h's engine with opts and a local executor that keeps what it is offered, and returns it.
func (h *harness) localExecutor(opts engine.Options) *offers {
	h.t.Helper()
	local := &offers{}
	d := enginetest.Deps(h.t, h.s, h.tpl, h.s)
	d.Executor = local
	opts.Clock = h.clk
	var err error
	if h.eng, err = engine.New(d, opts); err != nil {
		h.t.Fatal(err)
	}
	return local
}

// offers is a local executor that is always available and keeps what it is offered.
type offers struct {
	jobs  []plugin.Job
	stops []string // StopRuns: "run id: why"
}

func (*offers) Available() bool            { return true }
func (*offers) WorkerID() string           { return "here" }
func (*offers) Lease() time.Duration       { return time.Minute }
func (o *offers) Offer(jobs ...plugin.Job) { o.jobs = append(o.jobs, jobs...) }
func (o *offers) StopRuns(runs map[string]string) {
	for id, why := range runs {
		o.stops = append(o.stops, id+": "+why)
	}
}

// TestEngineStopsTheRunsItCloses: right after a step that closed runs commits — an auto node's timeout, a
// terminate — the engine tells its local executor which (StopRuns), so that their processes are killed at once;
// the queue's heartbeat (Extend) reports the same runs to an executor on any replica, with why, and renews the
// others.
func TestEngineStopsTheRunsItCloses(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		local := h.localExecutor(engine.Options{CallbackKey: []byte("callback-key-for-tests")})
		h.users("ann")
		h.plugin("ext")
		h.publish("call", callDef(""))
		q := h.eng.PluginQueue()
		extend := func(ids ...string) map[string]string {
			t.Helper()
			lost, err := q.Extend(h.ctx, "here", ids, h.clk.Now().Add(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			return lost
		}

		timedOut := h.start("ann", "call", `{}`)
		terminated := h.start("ann", "call", `{}`)
		if len(local.jobs) != 2 {
			t.Fatalf("offered %d runs, want 2", len(local.jobs))
		}
		runOf := map[string]string{}
		for _, j := range local.jobs {
			runOf[j.Input.InstanceID] = j.RunID
		}
		if lost := extend(runOf[timedOut], runOf[terminated]); len(lost) != 0 || len(local.stops) != 0 {
			t.Fatalf("runs nobody closed: lost %v, stops %v", lost, local.stops)
		}

		if _, err := h.eng.Terminate(h.ctx, admin, terminated, "no longer needed"); err != nil {
			t.Fatal(err)
		}
		want := runOf[terminated] + ": the engine closed the run: cancelled"
		if len(local.stops) != 1 || local.stops[0] != want {
			t.Fatalf("stops after the terminate %v, want [%s]", local.stops, want)
		}
		if st := h.runStatus(runOf[terminated]); st != model.RunCancelled {
			t.Fatalf("terminated instance's run is %s", st)
		}
		h.clk.Advance(30 * time.Second)
		h.fireDue()
		h.wantStatus(timedOut, model.StatusFailed)
		want = runOf[timedOut] + ": the engine closed the run: timed_out"
		if len(local.stops) != 2 || local.stops[1] != want {
			t.Fatalf("stops after the timeout %v, want [... %s]", local.stops, want)
		}
		lost := extend(runOf[timedOut], runOf[terminated], "gone")
		if len(lost) != 3 || lost[runOf[timedOut]] != "the engine closed the run: timed_out" ||
			lost[runOf[terminated]] != "the engine closed the run: cancelled" || lost["gone"] != "the run is gone" {
			t.Fatalf("heartbeat after the closes: %v", lost)
		}
	})
}
