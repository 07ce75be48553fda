package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// approveConcurrently has n goroutines approve the task at once, round-robin over the engines, and returns
// how many succeeded; every failure must be a conflict.
func approveConcurrently(t *testing.T, hs []*harness, user, taskID string, n int) int {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			errs[i] = hs[i%len(hs)].approve(user, taskID)
		}(i)
	}
	close(start)
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case model.IsKind(err, model.ECONFLICT):
		default:
			t.Fatalf("a racing approval failed with %v, want success or a conflict", err)
		}
	}
	return ok
}

func TestRaceOnOneTask(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "bob")
		h.publish("race", oneNode(`{"id":"n","type":"approval","approvers":{"users":["bob"]}}`))
		id := h.start("ann", "race", `{}`)
		tk := h.task(id, "n", "bob")
		if ok := approveConcurrently(t, []*harness{h}, "bob", tk.ID, 50); ok != 1 {
			t.Fatalf("%d of 50 racing approvals succeeded, want exactly 1", ok)
		}
		h.wantStatus(id, model.StatusCompleted)
		h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": A})
		if n := h.events("task.approved", "instance_id = ?", id); n != 1 {
			t.Fatalf("%d task.approved history rows, want 1", n)
		}
		if n := h.count(id, "instance.completed", ""); n != 1 {
			t.Fatalf("instance completed %d times", n)
		}
	})
}

// twoEngines opens two stores (two connection pools) on one fresh database and builds an engine on each, as two
// Halley processes sharing one database would be.
func twoEngines(t *testing.T, dialect string) (*harness, *harness) {
	t.Helper()
	u := storetest.URL(t, dialect)
	open := func() *store.Store {
		s, err := store.Open(context.Background(), store.Config{URL: u, DataDir: t.TempDir(), Logger: testkit.Quiet()})
		if err != nil {
			t.Fatalf("open %s: %v", dialect, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s1 := open()
	if _, err := s1.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2 := open()
	return newHarness(t, s1), newHarness(t, s2)
}

func TestRaceTwoEnginesOneDatabase(t *testing.T) {
	for _, d := range storetest.Dialects {
		t.Run(d, func(t *testing.T) {
			h1, h2 := twoEngines(t, d)
			h1.users("ann", "bob", "carol")
			h1.publish("both", oneNode(`{"id":"n","type":"approval","sign":"all","approvers":{"users":["bob","carol"]}}`))

			// Two tasks of one `all` node approved at the same time through the two engines, many times over: a
			// lost update would leave the node waiting for an approval it already has.
			const instances = 20
			ids := make([]string, instances)
			for i := range ids {
				ids[i] = h1.start("ann", "both", `{}`)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 2*instances)
			for _, id := range ids {
				bob, carol := h1.task(id, "n", "bob").ID, h1.task(id, "n", "carol").ID
				wg.Add(2)
				go func() { defer wg.Done(); errs <- h1.approve("bob", bob) }()
				go func() { defer wg.Done(); errs <- h2.approve("carol", carol) }()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("approval failed: %v", err)
				}
			}
			for _, id := range ids {
				h1.wantStatus(id, model.StatusCompleted)
				h1.wantTasks(id, "n", map[string]model.TaskStatus{"bob": A, "carol": A})
				for _, c := range []struct {
					action, node string
					want         int
				}{{"task.approved", "n", 2}, {"node.completed", "n", 1}, {"node.activated", "end", 1}, {"instance.completed", "", 1}} {
					if got := h1.count(id, c.action, c.node); got != c.want {
						t.Fatalf("instance %s: %d %s, want %d: %v", id, got, c.action, c.want, h1.actions(id))
					}
				}
				inst, _ := h1.get(id)
				if g := inst.State.Nodes["n"].Groups[0]; g.Approved != 2 || g.Outcome != model.OutcomeApproved {
					t.Fatalf("tally %+v", g)
				}
			}

			// Both engines racing on one task: still exactly one decision.
			id := h1.start("ann", "both", `{}`)
			if ok := approveConcurrently(t, []*harness{h1, h2}, "bob", h1.task(id, "n", "bob").ID, 40); ok != 1 {
				t.Fatalf("%d approvals succeeded across two engines, want 1", ok)
			}
			if n := h1.count(id, "task.approved", "n"); n != 1 {
				t.Fatalf("%d task.approved rows", n)
			}
			h2.decide(id, "n", "carol", true)
			h1.wantStatus(id, model.StatusCompleted)
		})
	}
}

// TestNoPoolDeadlock runs more concurrent approvals than the store has connections, each activating a node
// whose approvers come from the directory (a role and the initiator's manager). A transaction that holds a
// pooled connection must not wait for a second one: with every connection held by such a transaction, none
// would ever get it.
func TestNoPoolDeadlock(t *testing.T) {
	for _, d := range storetest.Dialects {
		t.Run(d, func(t *testing.T) {
			u := storetest.URL(t, d)
			s, err := store.Open(context.Background(), store.Config{URL: u, DataDir: t.TempDir(), MaxOpenConns: 2,
				Logger: testkit.Quiet()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			if _, err := s.Migrate(context.Background()); err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, s)
			h.users("boss", "bob")
			h.user(identity.CreateUserRequest{Username: "ann", Manager: "boss"})
			h.user(identity.CreateUserRequest{Username: "erin", Roles: []string{"dba"}})
			h.publish("dir", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
				{"id":"a","type":"approval","approvers":{"users":["bob"]}},
				{"id":"b","type":"approval","sign":"all","approvers":{"roles":["dba"],"relation":"initiator.manager"},"cc":{"roles":["dba"]}},
				{"id":"end","type":"end"}],
				"edges":[{"from":"start","to":"a"},{"from":"a","to":"b"},{"from":"b","to":"end"}]}`)
			const n = 8
			ids := make([]string, n)
			for i := range ids {
				ids[i] = h.start("ann", "dir", `{}`)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for _, id := range ids {
				tk := h.task(id, "a", "bob").ID
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := h.eng.Approve(ctx, as("bob"), tk, "", nil)
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("approval with the pool exhausted: %v", err)
				}
			}
			for _, id := range ids {
				h.wantNodes(id, map[string]model.NodeState{"a": "completed", "b": "active"})
				h.wantTasks(id, "b", map[string]model.TaskStatus{"erin": P, "boss": P})
				// The step ran again once the directory was read: its effects are there once.
				if n := h.rows("cc", "instance_id = ? AND username = ?", id, "erin"); n != 1 || h.count(id, "cc.unresolved", "") != 0 ||
					h.count(id, "node.activated", "b") != 1 || h.count(id, "task.approved", "a") != 1 {
					t.Fatalf("cc rows %d; history %v", n, h.actions(id))
				}
			}
		})
	}
}
