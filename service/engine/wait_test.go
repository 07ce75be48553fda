package engine_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
)

const waitDef = `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"lead","type":"approval","approvers":{"users":["bob"]}},
	{"id":"end","type":"end"}],
 "edges":[{"from":"start","to":"lead"},{"from":"lead","to":"end"}]}`

// TestStartCompiledAndWait: a sync start sees an end committed by this engine (without reading the instance), an
// end committed by another engine on the same database (a replica: at its next poll), and its deadline.
func TestStartCompiledAndWait(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("bob")
		h.publish("wait", waitDef)
		c, err := h.tpl.Compiled(h.ctx, model.DefaultTenant, "wait", 0)
		if err != nil {
			t.Fatal(err)
		}
		replica := newEngine(t, s, template.New(s, template.Options{Clock: h.clk}), s, engine.Options{Clock: h.clk, CallbackKey: []byte("callback-key-for-tests")})

		type result struct {
			v    *engine.InstanceView
			inst *model.Instance
			err  error
		}
		// startWaiting starts an instance with a correlation id and returns its id once it is committed, and the
		// channel of StartCompiledAndWait's answer.
		startWaiting := func(corr string, wait time.Duration) (string, <-chan result) {
			ch := make(chan result, 1)
			go func() {
				v, inst, err := h.eng.StartCompiledAndWait(h.ctx, model.DefaultTenant, "alice", c, json.RawMessage(`{}`), corr, "", wait)
				ch <- result{v, inst, err}
			}()
			deadline := time.Now().Add(10 * time.Second) // guard against a hung test, not a timing assumption
			for time.Now().Before(deadline) {
				got, _, err := s.ListInstances(h.ctx, model.InstanceFilter{TenantID: model.DefaultTenant, CorrelationID: corr, Page: model.Page{Limit: 5}})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) == 1 {
					return got[0].ID, ch
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Fatalf("instance %s never started", corr)
			return "", nil
		}
		approveOn := func(e *engine.Engine, id string) {
			t.Helper()
			tk := h.task(id, "lead", "bob")
			if _, err := e.Approve(h.ctx, as("bob"), tk.ID, "", nil); err != nil {
				t.Fatal(err)
			}
		}
		answer := func(ch <-chan result) result {
			t.Helper()
			select {
			case r := <-ch:
				if r.err != nil {
					t.Fatal(r.err)
				}
				return r
			case <-time.After(10 * time.Second):
				t.Fatal("StartCompiledAndWait did not return")
			}
			return result{}
		}

		// Ended by this engine.
		id, ch := startWaiting("here", 30*time.Second)
		approveOn(h.eng, id)
		r := answer(ch)
		if r.v.ID != id || r.inst == nil || r.inst.Status != model.StatusCompleted {
			t.Fatalf("end committed here: %+v", r.inst)
		}

		// Ended by a replica: seen at the next poll, on the engine's clock.
		id, ch = startWaiting("replica", 30*time.Second)
		approveOn(replica, id)
		h.clk.BlockUntil(1)
		h.clk.Advance(time.Second)
		r = answer(ch)
		if r.inst == nil || r.inst.Status != model.StatusCompleted || r.inst.ID != id {
			t.Fatalf("end committed by a replica: %+v", r.inst)
		}

		// Not ended within the wait: the instance as it is.
		_, ch = startWaiting("slow", 50*time.Millisecond)
		r = answer(ch)
		if r.inst == nil || r.inst.Status != model.StatusRunning {
			t.Fatalf("past the wait: %+v", r.inst)
		}

		// Wait 0: no waiting at all.
		v, inst, err := h.eng.StartCompiledAndWait(h.ctx, model.DefaultTenant, "alice", c, json.RawMessage(`{}`), "now", "", 0)
		if err != nil || inst != nil || v.Status != model.StatusRunning {
			t.Fatalf("wait 0: %v %+v %v", v, inst, err)
		}
	})
}

// readCountingStore counts the instance reads of a waiter.
type readCountingStore struct {
	*store.Store
	reads atomic.Int64
}

func (c *readCountingStore) GetInstance(ctx context.Context, tenant, id string) (*model.Instance, []*model.Task, error) {
	c.reads.Add(1)
	return c.Store.GetInstance(ctx, tenant, id)
}

// TestWaitPollsLessAndLess: a wait for an end that another replica may commit reads the instance at growing
// intervals (250 ms, then half as long again each time, up to 5 s), not every 250 ms: ten minutes of waiting cost
// 130 reads, not 2,400.
func TestWaitPollsLessAndLess(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	h := newHarness(t, s)
	h.users("bob")
	h.publish("wait", waitDef)
	cs := &readCountingStore{Store: s}
	eng := newEngine(t, cs, h.tpl, s, engine.Options{Clock: h.clk, CallbackKey: []byte("callback-key-for-tests")})
	v, err := eng.Start(h.ctx, as("alice"), engine.StartParams{Template: "wait"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan *model.Instance, 1)
	go func() {
		inst, _ := eng.WaitEnd(ctx, model.DefaultTenant, v.ID)
		done <- inst
	}()
	start := h.clk.Now()
	for h.clk.Now().Sub(start) < 10*time.Minute {
		h.clk.BlockUntil(1) // the waiter is parked on its next poll
		h.clk.Advance(250 * time.Millisecond)
	}
	h.clk.BlockUntil(1)
	reads := cs.reads.Load()
	// 1 at once, then polls at 0.25, 0.625, 1.19 ... s; from 5 s apart on: about 10 + (600 - 40) / 5.
	t.Logf("%d reads", reads)
	if reads < 100 || reads > 140 {
		t.Fatalf("%d reads in ten minutes of waiting; want about 130 (a fixed 250 ms poll makes 2,400)", reads)
	}
	// The end is seen at the next poll when another engine commits it, and at once when this one does.
	if _, err := eng.Approve(h.ctx, as("bob"), h.task(v.ID, "lead", "bob").ID, "", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case inst := <-done:
		if inst == nil || inst.Status != model.StatusCompleted {
			t.Fatalf("the end: %+v", inst)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not see the end committed by its own engine")
	}
	cancel()
}

// TestAuditedSteps: an audit entry in the context of a start or of an instance action is written with the step,
// in its transaction (what POST /instances with override_trigger and jump/terminate rely on), once per request,
// with the instance's status and active nodes before and after.
func TestAuditedSteps(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("bob")
		h.publish("wait", waitDef)
		start := &model.AuditEntry{TenantID: model.DefaultTenant, Actor: "admin", Action: model.AuditInstanceOverride}
		v, err := h.eng.Start(model.WithAudit(h.ctx, start), admin, engine.StartParams{Template: "wait"})
		if err != nil {
			t.Fatal(err)
		}
		if !start.Written() || start.Target != v.ID || string(start.After) != `{"active_nodes":["lead"],"status":"running"}` {
			t.Fatalf("the start's entry: written %v, target %s, after %s", start.Written(), start.Target, start.After)
		}
		term := &model.AuditEntry{TenantID: model.DefaultTenant, Actor: "admin", Action: model.AuditInstanceTerminate, Target: v.ID, Reason: "dup"}
		if _, err := h.eng.Terminate(model.WithAudit(h.ctx, term), admin, v.ID, "dup"); err != nil {
			t.Fatal(err)
		}
		items, _, err := s.ListAudit(h.ctx, model.AuditFilter{TenantID: model.DefaultTenant, Page: model.Page{Limit: 10}})
		if err != nil || len(items) != 2 {
			t.Fatalf("entries: %+v %v", items, err)
		}
		got := items[0]
		if got.Action != model.AuditInstanceTerminate || string(got.Before) != `{"active_nodes":["lead"],"status":"running"}` ||
			string(got.After) != `{"active_nodes":[],"status":"terminated"}` || got.Reason != "dup" {
			t.Fatalf("terminate entry: %+v before %s after %s", got, got.Before, got.After)
		}
		// A refused action writes nothing.
		again := &model.AuditEntry{TenantID: model.DefaultTenant, Actor: "admin", Action: model.AuditInstanceTerminate, Target: v.ID}
		if _, err := h.eng.Terminate(model.WithAudit(h.ctx, again), admin, v.ID, "again"); err == nil {
			t.Fatal("terminating twice")
		}
		if n, _, _ := s.ListAudit(h.ctx, model.AuditFilter{TenantID: model.DefaultTenant, Page: model.Page{Limit: 10}}); len(n) != 2 || again.Written() {
			t.Fatalf("a refused terminate was recorded: %d entries", len(n))
		}
	})
}
