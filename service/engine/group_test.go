package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
)

// gatedStore holds every single-instance step until the gate opens, so that the steps submitted meanwhile queue
// up and must run as groups; failGroups makes that many group transactions fail after running their steps.
type gatedStore struct {
	*store.Store
	gating     atomic.Bool
	gate       chan struct{}
	failGroups atomic.Int32
	groups     atomic.Int32
	creates    atomic.Int32 // instances created in groups
}

func (g *gatedStore) UpdateInstance(ctx context.Context, tenant, id string, fn func(w *model.Work) error) error {
	if g.gating.Load() {
		<-g.gate
	}
	return g.Store.UpdateInstance(ctx, tenant, id, fn)
}

func (g *gatedStore) CreateInstance(ctx context.Context, w *model.Work) error {
	if g.gating.Load() {
		<-g.gate
	}
	return g.Store.CreateInstance(ctx, w)
}

var _ engine.Store = (*gatedStore)(nil) // the engine takes the whole store interface

func (g *gatedStore) UpdateInstances(ctx context.Context, tenant string, ids []string, fn func(w *model.Work) error, creates ...*model.Work) (map[string]error, error) {
	g.groups.Add(1)
	if g.failGroups.Add(-1) >= 0 {
		// Run the steps (they change their works) and then fail as a database error would: nothing is written.
		_, _ = g.Store.UpdateInstances(ctx, tenant, ids, func(w *model.Work) error { _ = fn(w); return fmt.Errorf("no") })
		return nil, fmt.Errorf("store: injected failure of a group")
	}
	res, err := g.Store.UpdateInstances(ctx, tenant, ids, fn, creates...)
	if err == nil {
		g.creates.Add(int32(len(creates)))
	}
	return res, err
}

// TestGroupCommit runs many approvals of different instances at once, with wrong users and repeated decisions
// among them: groups form, each step has its own outcome, and every instance ends with exactly one decision.
func TestGroupCommit(t *testing.T) {
	for _, fail := range []int32{0, 2} {
		t.Run(fmt.Sprintf("failing_groups=%d", fail), func(t *testing.T) { testGroupCommit(t, fail) })
	}
}

func testGroupCommit(t *testing.T, fail int32) {
	{
		storetest.Each(t, func(t *testing.T, s *store.Store) {
			gs := &gatedStore{Store: s, gate: make(chan struct{})}
			h := newHarness(t, s)
			h.eng = newEngine(t, gs, template.New(s, template.Options{Clock: h.clk}), s, engine.Options{Clock: h.clk})
			gs.failGroups.Store(fail)
			h.users("ann", "bob", "eve")
			h.publish("g", oneNode(`{"id":"n","type":"approval","approvers":{"users":["bob"]}}`))
			const n = 40
			ids := make([]string, n)
			tasks := make([]*model.Task, n)
			for i := range ids {
				ids[i] = h.start("ann", "g", `{}`)
				tasks[i] = h.task(ids[i], "n", "bob")
			}
			gs.gating.Store(true)
			var wg sync.WaitGroup
			ok, forbidden, conflicts := atomic.Int32{}, atomic.Int32{}, atomic.Int32{}
			run := func(user string, tk *model.Task) {
				defer wg.Done()
				err := h.approve(user, tk.ID)
				switch {
				case err == nil:
					ok.Add(1)
				case model.IsKind(err, model.EFORBIDDEN):
					forbidden.Add(1)
				case model.IsKind(err, model.ECONFLICT):
					conflicts.Add(1)
				default:
					t.Errorf("approve %s as %s: %v", tk.ID, user, err)
				}
			}
			for i, tk := range tasks {
				wg.Add(2)
				go run("bob", tk) // twice on the same task: one wins, one conflicts (or waits for the next group)
				go run("bob", tk)
				if i%4 == 0 {
					wg.Add(1)
					go run("eve", tk) // not hers
				}
			}
			// Starts join the groups too.
			const m = 20
			started := make([]string, m)
			for i := range started {
				wg.Add(1)
				go func() {
					defer wg.Done()
					v, err := h.eng.Start(h.ctx, as("ann"), engine.StartParams{Template: "g", Context: []byte(`{}`)})
					if err != nil {
						t.Errorf("start %d: %v", i, err)
						return
					}
					started[i] = v.ID
				}()
			}
			for h.eng.GroupStats().Submitted < 2*n+n/4+m {
				runtime.Gosched() // until every step is in: the first ones hold the gate, the rest queue
			}
			close(gs.gate)
			wg.Wait()
			if ok.Load() != n || conflicts.Load() != n || forbidden.Load() != n/4 {
				t.Fatalf("ok %d, conflicts %d, forbidden %d; want %d, %d, %d", ok.Load(), conflicts.Load(), forbidden.Load(), n, n, n/4)
			}
			for _, id := range ids {
				h.wantStatus(id, model.StatusCompleted)
				if c := h.events("task.approved", "instance_id = ?", id); c != 1 {
					t.Fatalf("instance %s has %d approvals in its history, want 1", id, c)
				}
			}
			for _, id := range started {
				h.wantStatus(id, model.StatusRunning)
				if tk := h.task(id, "n", "bob"); tk.Status != model.TaskPending {
					t.Fatalf("started instance %s: task %+v", id, tk)
				}
				if c := h.events("instance.started", "instance_id = ?", id); c != 1 {
					t.Fatalf("started instance %s has %d start events", id, c)
				}
			}
			if fail == 0 && gs.creates.Load() == 0 {
				t.Fatalf("no start ran in a group")
			}
			st := h.eng.GroupStats()
			if st.Groups == 0 || st.Steps < 2*st.Groups || int32(st.Groups) != gs.groups.Load() {
				t.Fatalf("group stats %+v (store saw %d groups): want groups of several steps", st, gs.groups.Load())
			}
			if st.Fallbacks != int64(fail) {
				t.Fatalf("fallbacks = %d, want %d", st.Fallbacks, fail)
			}
		})
	}
}

// TestFakeStoresKeepTheContract: the engine tests' store doubles (gatedStore, countingStore), with nothing
// injected, keep the contract of the real stores (storetest.EngineStoreContract), so what the engine tests
// observe through them is what it does on SQLite and MySQL.
func TestFakeStoresKeepTheContract(t *testing.T) {
	for _, d := range storetest.Dialects {
		t.Run(d, func(t *testing.T) {
			t.Run("gatedStore", func(t *testing.T) {
				s := storetest.Open(t, d)
				storetest.EngineStoreContract(t, &gatedStore{Store: s, gate: make(chan struct{})}, s)
			})
			t.Run("countingStore", func(t *testing.T) {
				s := storetest.Open(t, d)
				storetest.EngineStoreContract(t, &countingStore{Store: s}, s)
			})
		})
	}
}
