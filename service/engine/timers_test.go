package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
)

// countingStore counts the batched transactions and the instances in them; failBatches makes that many of them
// fail as a database error would (after running the steps: nothing is written).
type countingStore struct {
	*store.Store
	batches     atomic.Int32
	instances   atomic.Int32
	tenants     sync.Map // tenant -> true
	failBatches atomic.Int32
}

var _ engine.Store = (*countingStore)(nil) // the engine takes the whole store interface

func (c *countingStore) UpdateInstances(ctx context.Context, tenant string, ids []string, fn func(w *model.Work) error, creates ...*model.Work) (map[string]error, error) {
	c.batches.Add(1)
	c.instances.Add(int32(len(ids)))
	c.tenants.Store(tenant, true)
	if c.failBatches.Add(-1) >= 0 {
		_, _ = c.Store.UpdateInstances(ctx, tenant, ids, func(w *model.Work) error { _ = fn(w); return fmt.Errorf("no") })
		return nil, fmt.Errorf("store: injected failure of a batch")
	}
	return c.Store.UpdateInstances(ctx, tenant, ids, fn, creates...)
}

// delayDef: start → delay until the context's "due" → end; parDef: two delays in parallel branches, so that one
// instance has two timers due at once.
const (
	delayDef = `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},{"id":"d","type":"delay","until":"due"},{"id":"end","type":"end"}],
		"edges":[{"from":"start","to":"d"},{"from":"d","to":"end"}]}`
	parDef = `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},{"id":"d1","type":"delay","until":"due"},{"id":"d2","type":"delay","until":"due"},
		{"id":"a","type":"approval","approvers":{"users":["bob"]}},{"id":"end","type":"end"}],
		"edges":[{"from":"start","to":"d1"},{"from":"start","to":"d2"},{"from":"d1","to":"a"},{"from":"d2","to":"a"},{"from":"a","to":"end"}]}`
)

// fire hands a batch of due timers to the engine as the scheduler's loop does: through scheduler.Route, which
// reads their rows and gives the engine those of its kinds.
func (h *harness) fire(ctx context.Context, batch []scheduler.Due) []error {
	h.t.Helper()
	return engineRoute(h.t, h.s, h.eng)(ctx, batch)
}

// engineRoute is the scheduler's handler as the composition root builds it, for the engine's timer kinds only.
func engineRoute(t *testing.T, s *store.Store, eng *engine.Engine) scheduler.Handler {
	t.Helper()
	hs := scheduler.Handlers{}
	for _, k := range engine.TimerKinds {
		hs[k] = eng
	}
	route, err := scheduler.Route(s, hs)
	if err != nil {
		t.Fatal(err)
	}
	return route
}

// dueTimers lists the pending timers due by the harness's clock, as the scheduler would deliver them.
func (h *harness) dueTimers() []scheduler.Due {
	h.t.Helper()
	rows, err := h.s.PendingTimers(h.ctx, "", 100000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []scheduler.Due
	for _, r := range rows {
		if !r.DueAt.After(h.clk.Now()) {
			out = append(out, scheduler.Due{ID: r.ID, Due: r.DueAt, Attempt: 1})
		}
	}
	return out
}

// deliverConcurrently hands the due timers to the engines from many goroutines, each delivering all of them in
// its own order and batch sizes (every timer is delivered len(hs)×per times), and fails on any handler error.
func deliverConcurrently(t *testing.T, hs []*harness, due []scheduler.Due, per int) {
	t.Helper()
	var wg sync.WaitGroup
	for g := 0; g < len(hs)*per; g++ {
		h := hs[g%len(hs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			mine := append([]scheduler.Due(nil), due...)
			r.Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
			for len(mine) > 0 {
				n := min(len(mine), 1+r.IntN(40))
				for i, err := range h.fire(context.Background(), mine[:n]) {
					if err != nil {
						t.Errorf("timer %s: %v", mine[i].ID, err)
					}
				}
				mine = mine[n:]
			}
		}()
	}
	wg.Wait()
}

// TestBatchedTimersFireOnce delivers every due timer many times over, from many goroutines of two engines on one
// database: each fires exactly once, instances with two timers due at once take both, and the firing went
// through batched transactions.
func TestBatchedTimersFireOnce(t *testing.T) {
	for _, d := range storetest.Dialects {
		t.Run(d, func(t *testing.T) {
			h1, h2 := twoEngines(t, d)
			cs1, cs2 := &countingStore{Store: h1.s}, &countingStore{Store: h2.s}
			h1.eng = newEngine(t, cs1, template.New(h1.s, template.Options{Clock: h1.clk}), h1.s, engine.Options{Clock: h1.clk})
			h2.eng = newEngine(t, cs2, template.New(h2.s, template.Options{Clock: h2.clk}), h2.s, engine.Options{Clock: h2.clk})
			h1.users("ann", "bob")
			h1.publish("one", delayDef)
			h1.publish("two", parDef)
			due := `{"due":"` + t0.Add(time.Minute).Format(time.RFC3339) + `"}`
			const n = 60
			var ones, twos []string
			for i := 0; i < n; i++ {
				ones = append(ones, h1.start("ann", "one", due))
				if i%6 == 0 {
					twos = append(twos, h1.start("ann", "two", due))
				}
			}
			h1.clk.Advance(2 * time.Minute)
			h2.clk.Advance(2 * time.Minute)
			timers := h1.dueTimers()
			if want := n + 2*len(twos); len(timers) != want {
				t.Fatalf("%d due timers, want %d", len(timers), want)
			}
			deliverConcurrently(t, []*harness{h1, h2}, timers, 4)

			for _, id := range ones {
				h1.wantStatus(id, model.StatusCompleted)
				if c := h1.count(id, "timer.fired", "d"); c != 1 {
					t.Fatalf("instance %s: %d timer.fired, want 1: %v", id, c, h1.actions(id))
				}
			}
			for _, id := range twos {
				if c1, c2 := h1.count(id, "timer.fired", "d1"), h1.count(id, "timer.fired", "d2"); c1 != 1 || c2 != 1 {
					t.Fatalf("instance %s: timer.fired d1 %d, d2 %d, want 1 each: %v", id, c1, c2, h1.actions(id))
				}
				if c := h1.count(id, "node.activated", "a"); c != 1 {
					t.Fatalf("instance %s: node a activated %d times: %v", id, c, h1.actions(id))
				}
			}
			if p := h1.rows("timers", "status = ?", model.TimerPending); p != 0 {
				t.Fatalf("%d timers still pending", p)
			}
			if f := h1.rows("timers", "status = ? AND fired_at IS NOT NULL", model.TimerFired); f != int64(len(timers)) {
				t.Fatalf("%d timer rows fired, want %d", f, len(timers))
			}
			b, i := cs1.batches.Load()+cs2.batches.Load(), cs1.instances.Load()+cs2.instances.Load()
			if b == 0 || i < 2*b {
				t.Fatalf("%d batched transactions of %d instances in all: want batches of several instances", b, i)
			}
			// Delivered again later: nothing happens.
			for i, err := range h1.fire(h1.ctx, timers) {
				if err != nil {
					t.Fatalf("re-delivered timer %s: %v", timers[i].ID, err)
				}
			}
			if c := h1.events("timer.fired", ""); c != int64(len(timers)) {
				t.Fatalf("%d timer.fired rows after re-delivery, want %d", c, len(timers))
			}
		})
	}
}

// TestBatchedTimerFailureIsolated: a timer that fails is returned for retry, the others of its batch commit;
// a batch whose transaction fails as a whole falls back to firing each timer alone.
func TestBatchedTimerFailureIsolated(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		cs := &countingStore{Store: s}
		h.eng = newEngine(t, cs, template.New(s, template.Options{Clock: h.clk}), s, engine.Options{Clock: h.clk})
		h.users("ann")
		h.publish("one", delayDef)
		due := `{"due":"` + t0.Add(time.Minute).Format(time.RFC3339) + `"}`
		var ids []string
		for i := 0; i < 10; i++ {
			ids = append(ids, h.start("ann", "one", due))
		}
		h.clk.Advance(2 * time.Minute)
		timers := h.dueTimers()
		bad := timers[3].ID
		if err := s.DB().Table("timers").Where("id = ?", bad).Update("kind", "bogus").Error; err != nil {
			t.Fatal(err)
		}
		errs := h.fire(h.ctx, timers)
		for i, err := range errs {
			if (err != nil) != (timers[i].ID == bad) {
				t.Fatalf("timer %s: error %v (the failing one is %s)", timers[i].ID, err, bad)
			}
		}
		if c := h.rows("timers", "status = ?", model.TimerFired); c != int64(len(timers)-1) {
			t.Fatalf("%d fired, want %d", c, len(timers)-1)
		}
		if cs.batches.Load() != 1 {
			t.Fatalf("%d transactions, want 1", cs.batches.Load())
		}
		// Retried once the row is right again: it fires.
		if err := s.DB().Table("timers").Where("id = ?", bad).Update("kind", model.TimerDelay).Error; err != nil {
			t.Fatal(err)
		}
		for i, err := range h.fire(h.ctx, timers) {
			if err != nil {
				t.Fatalf("timer %s: %v", timers[i].ID, err)
			}
		}
		for _, id := range ids {
			h.wantStatus(id, model.StatusCompleted)
			if c := h.count(id, "timer.fired", "d"); c != 1 {
				t.Fatalf("instance %s: %d timer.fired", id, c)
			}
		}

		// A whole batch fails: every timer still fires, alone.
		var more []string
		for i := 0; i < 5; i++ {
			more = append(more, h.start("ann", "one", `{"due":"`+h.clk.Now().Add(time.Minute).Format(time.RFC3339)+`"}`))
		}
		h.clk.Advance(2 * time.Minute)
		cs.failBatches.Store(1)
		for i, err := range h.fire(h.ctx, h.dueTimers()) {
			if err != nil {
				t.Fatalf("timer %d: %v", i, err)
			}
		}
		for _, id := range more {
			h.wantStatus(id, model.StatusCompleted)
			if c := h.count(id, "timer.fired", "d"); c != 1 {
				t.Fatalf("instance %s: %d timer.fired", id, c)
			}
		}
	})
}

// TestBatchedTimerCancelledConcurrently races approvals against the approval timeouts of the same tasks: per
// instance exactly one of them wins; a timeout cancelled by a decision does not fire.
func TestBatchedTimerCancelledConcurrently(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "bob")
		h.publish("to", oneNode(`{"id":"n","type":"approval","approvers":{"users":["bob"]},"timeout":"1h","on_timeout":"reject"}`))
		const n = 40
		ids := make([]string, n)
		tasks := make([]string, n)
		for i := range ids {
			ids[i] = h.start("ann", "to", `{}`)
			tasks[i] = h.task(ids[i], "n", "bob").ID
		}
		// Decided before the timer is delivered: the timer does nothing.
		h.decide(ids[0], "n", "bob", true)
		h.clk.Advance(2 * time.Hour)
		timers := h.dueTimers()
		if len(timers) != n-1 {
			t.Fatalf("%d due timers, want %d (the decided one cancelled)", len(timers), n-1)
		}
		// The cancelled one delivered anyway (the scheduler's cancel may come late): no effect.
		var tid string
		if err := s.DB().Table("timers").Select("id").Where("instance_id = ?", ids[0]).Scan(&tid).Error; err != nil || tid == "" {
			t.Fatalf("timer of %s: %q %v", ids[0], tid, err)
		}
		cancelled := []scheduler.Due{{ID: tid, Due: t0.Add(time.Hour), Attempt: 1}}
		if err := h.fire(h.ctx, cancelled)[0]; err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		approved := make([]atomic.Bool, n)
		for i := 1; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := h.approve("bob", tasks[i])
				switch {
				case err == nil:
					approved[i].Store(true)
				case model.IsKind(err, model.ECONFLICT):
				default:
					t.Errorf("approve %s: %v", tasks[i], err)
				}
			}()
		}
		deliverConcurrently(t, []*harness{h}, timers, 3)
		wg.Wait()
		deliverConcurrently(t, []*harness{h}, cancelled, 2)
		for i, id := range ids {
			fired, ok := h.count(id, "timer.fired", "n"), h.count(id, "task.approved", "n")
			if fired+ok != 1 {
				t.Fatalf("instance %s: %d timer.fired and %d approvals, want exactly one of them: %v", id, fired, ok, h.actions(id))
			}
			if i > 0 && (ok == 1) != approved[i].Load() {
				t.Fatalf("instance %s: approval answered %v but history has %d", id, approved[i].Load(), ok)
			}
			want := model.StatusCompleted
			if fired == 1 {
				want = model.StatusRejected
			}
			h.wantStatus(id, want)
		}
		if c := h.rows("timers", "instance_id = ? AND status = ?", ids[0], model.TimerCancelled); c != 1 {
			t.Fatalf("the decided instance's timer is not cancelled (%d)", c)
		}
	})
}

// TestBatchedTimersMixedTenants: one delivered batch with timers of two tenants fires them all, one transaction
// per tenant.
func TestBatchedTimersMixedTenants(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		cs := &countingStore{Store: s}
		h.eng = newEngine(t, cs, template.New(s, template.Options{Clock: h.clk}), s, engine.Options{Clock: h.clk})
		h.tpl = template.New(s, template.Options{Clock: h.clk})
		h.users("ann")
		h.publish("one", delayDef)
		other := &model.Principal{TenantID: "acme", Username: "root", Roles: []string{model.RoleAdmin}}
		if _, err := h.tpl.Create(h.ctx, other, template.CreateRequest{Key: "one", Definition: []byte(delayDef)}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.tpl.Publish(h.ctx, other, "one"); err != nil {
			t.Fatal(err)
		}
		due := `{"due":"` + t0.Add(time.Minute).Format(time.RFC3339) + `"}`
		var mine, theirs []string
		for i := 0; i < 6; i++ {
			mine = append(mine, h.start("ann", "one", due))
			v, err := h.eng.Start(h.ctx, other, engine.StartParams{Template: "one", Context: []byte(due)})
			if err != nil {
				t.Fatal(err)
			}
			theirs = append(theirs, v.ID)
		}
		h.clk.Advance(2 * time.Minute)
		timers := h.dueTimers()
		if len(timers) != 12 {
			t.Fatalf("%d due timers, want 12", len(timers))
		}
		for i, err := range h.fire(h.ctx, timers) {
			if err != nil {
				t.Fatalf("timer %s: %v", timers[i].ID, err)
			}
		}
		for _, id := range mine {
			h.wantStatus(id, model.StatusCompleted)
		}
		for _, id := range theirs {
			inst, _, err := s.GetInstance(h.ctx, "acme", id)
			if err != nil || inst.Status != model.StatusCompleted {
				t.Fatalf("acme instance %s: %v %v", id, inst, err)
			}
		}
		if b := cs.batches.Load(); b != 2 {
			t.Fatalf("%d transactions, want one per tenant", b)
		}
		for _, tn := range []string{model.DefaultTenant, "acme"} {
			if _, ok := cs.tenants.Load(tn); !ok {
				t.Fatalf("no transaction for tenant %s", tn)
			}
		}
	})
}

// TestRearmGrace: the periodic re-arm skips timers armed less than the grace ago; at start-up (grace 0) every
// pending timer missing from the scheduler is added.
func TestRearmGrace(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	h := newHarness(t, s)
	h.users("ann")
	h.publish("one", delayDef)
	h.start("ann", "one", `{"due":"`+t0.Add(time.Hour).Format(time.RFC3339)+`"}`)
	sched := scheduler.NewMemory(scheduler.Options{Clock: h.clk})
	defer sched.Close()
	if n, err := scheduler.Rearm(h.ctx, h.s, sched, time.Minute); err != nil || n != 0 {
		t.Fatalf("re-arm with a grace: %d, %v; want 0 (the timer was just armed)", n, err)
	}
	if n, err := scheduler.Rearm(h.ctx, h.s, sched, 0); err != nil || n != 1 {
		t.Fatalf("re-arm at start-up: %d, %v; want 1", n, err)
	}
	if n, err := scheduler.Rearm(h.ctx, h.s, sched, 0); err != nil || n != 0 {
		t.Fatalf("second re-arm: %d, %v; want 0 (already in the scheduler)", n, err)
	}
}

// TestTimersNeverEarly: a due time between milliseconds is rounded up — in the timer row, in the outbox item that
// arms the scheduler, and so in the scheduler — never truncated (which fired timers up to 1 ms early).
func TestTimersNeverEarly(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann")
		h.publish("short", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},{"id":"d","type":"delay","interval":"1ms"},
			{"id":"end","type":"end"}],"edges":[{"from":"start","to":"d"},{"from":"d","to":"end"}]}`)
		h.clk.Set(t0.Add(300 * time.Microsecond))
		id := h.start("ann", "short", `{}`)
		want := t0.Add(2 * time.Millisecond) // 1.3 ms rounded up
		rows, err := s.PendingTimers(h.ctx, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		var row *model.Timer
		for _, r := range rows {
			if r.InstanceID == id {
				row = r
			}
		}
		if row == nil || !row.DueAt.Equal(want) {
			t.Fatalf("timer row %+v, want due %s", row, want)
		}
		var armed []int64
		if _, err := s.DispatchOutbox(h.ctx, 100, func(_ context.Context, items []model.OutboxItem) error {
			for _, it := range items {
				if it.Kind == model.OutboxTimerArm && it.Ref == row.ID {
					var p model.TimerArm
					if err := json.Unmarshal(it.Payload, &p); err != nil {
						t.Fatalf("timer.arm payload %s: %v", it.Payload, err)
					}
					armed = append(armed, p.Due)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(armed) != 1 || armed[0] != want.UnixMilli() {
			t.Fatalf("armed at %v, want %d", armed, want.UnixMilli())
		}
		// The scheduler armed from that item (as the composition root's timer.arm handler does) delivers it at 2 ms,
		// not at 1.3 ms (when a probe due at 1 ms goes).
		sched := scheduler.NewMemory(scheduler.Options{Clock: h.clk})
		defer sched.Close()
		if err := sched.Schedule(h.ctx, scheduler.Item{ID: row.ID, Due: model.TimerArm{Due: armed[0]}.DueAt()},
			scheduler.Item{ID: "probe", Due: t0.Add(time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
		fired := make(chan string, 4)
		ctx, cancel := context.WithCancel(h.ctx)
		defer cancel()
		route := engineRoute(t, s, h.eng)
		go sched.Run(ctx, func(ctx context.Context, batch []scheduler.Due) []error {
			errs := route(ctx, batch)
			for _, d := range batch {
				fired <- d.ID
			}
			return errs
		})
		next := func() string {
			select {
			case id := <-fired:
				return id
			case <-time.After(10 * time.Second):
				t.Fatal("nothing fired")
			}
			return ""
		}
		h.clk.Set(t0.Add(1300 * time.Microsecond))
		if got := next(); got != "probe" {
			t.Fatalf("at 1.3 ms %s fired, want only the probe", got)
		}
		h.clk.Set(want)
		if got := next(); got != row.ID {
			t.Fatalf("at 2 ms %s fired", got)
		}
		h.wantStatus(id, model.StatusCompleted)
	})
}
