package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/outbox"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

var ctx = context.Background()

// commit writes n outbox items in an instance's transaction, as the engine does.
func commit(t *testing.T, s *store.Store, id string, n int) {
	t.Helper()
	w := &model.Work{Instance: &model.Instance{ID: id, TenantID: "default", Template: "t", Version: 1, Status: model.StatusRunning, Context: []byte("{}"),
		CreatedAt: time.Now(), UpdatedAt: time.Now()}}
	for i := 0; i < n; i++ {
		w.Outbox = append(w.Outbox, model.OutboxItem{TenantID: "default", Kind: model.OutboxTimerArm, Ref: fmt.Sprintf("%s-%d", id, i), Payload: []byte(`{"due":1}`)})
	}
	if err := s.CreateInstance(ctx, w); err != nil {
		t.Fatal(err)
	}
}

func newDispatcher(t *testing.T, s *store.Store, hs outbox.Handlers, opts outbox.Options) *outbox.Dispatcher {
	t.Helper()
	d, err := outbox.New(s, hs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestNewRefusesMissingHandlers: a dispatcher without a store or handlers, or with a nil handler, is an error at
// construction, not a nil call when the first item comes.
func TestNewRefusesMissingHandlers(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	for name, hs := range map[string]outbox.Handlers{"none": nil, "nil handler": {model.OutboxEvent: nil}} {
		if _, err := outbox.New(s, hs, outbox.Options{}); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	if _, err := outbox.New(nil, outbox.Handlers{model.OutboxEvent: func(context.Context, []model.OutboxItem) error { return nil }}, outbox.Options{}); err == nil {
		t.Error("New accepted no store")
	}
}

func TestCrashBetweenCommitAndDispatchLosesNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		commit(t, s, "i1", 3)
		// The first dispatcher dies while handling (its handler fails, as a process crash would leave it).
		d1 := newDispatcher(t, s, outbox.Handlers{model.OutboxTimerArm: func(context.Context, []model.OutboxItem) error { return errors.New("crashed") }}, outbox.Options{})
		if _, err := d1.DispatchOnce(ctx); err == nil {
			t.Fatal("the failing handler's error must surface")
		}
		// A new dispatcher (the restarted process) gets every item, once.
		var got []string
		d2 := newDispatcher(t, s, outbox.Handlers{model.OutboxTimerArm: func(_ context.Context, items []model.OutboxItem) error {
			for _, it := range items {
				got = append(got, it.Ref)
			}
			return nil
		}}, outbox.Options{})
		if n, err := d2.DispatchOnce(ctx); err != nil || n != 3 {
			t.Fatalf("redispatch: %d %v", n, err)
		}
		if fmt.Sprint(got) != "[i1-0 i1-1 i1-2]" {
			t.Fatalf("items: %v", got)
		}
		if n, _ := d2.DispatchOnce(ctx); n != 0 {
			t.Fatalf("dispatched twice: %d", n)
		}
	})
}

func TestRunDrainsAndWakes(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	done := make(chan int, 10)
	d := newDispatcher(t, s, outbox.Handlers{model.OutboxTimerArm: func(context.Context, []model.OutboxItem) error { return nil }},
		outbox.Options{Interval: time.Hour, OnDispatched: func(n int) { done <- n }})
	c, cancel := context.WithCancel(ctx)
	defer cancel()
	go d.Run(c)
	commit(t, s, "i2", 2)
	d.Notify() // the commit wakes the loop; no waiting for the hour-long poll
	select {
	case n := <-done:
		if n != 2 {
			t.Fatalf("dispatched %d", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Notify did not wake the loop")
	}
}

// TestReplicasShareTheOutbox: dispatchers on two connections to one MySQL database share the outbox without a
// leader and lose nothing. Delivery is at least once: a transaction retried after a deadlock hands its items to the
// handler again (every handler is idempotent), so duplicates are rare, never losses.
func TestReplicasShareTheOutbox(t *testing.T) {
	u := storetest.URL(t, store.MySQL)
	var stores []*store.Store
	for i := 0; i < 2; i++ {
		s, err := store.Open(ctx, store.Config{URL: u})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores = append(stores, s)
	}
	if _, err := stores[0].Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		commit(t, stores[0], fmt.Sprintf("r%d", i), 4)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for _, s := range stores {
		d := newDispatcher(t, s, outbox.Handlers{model.OutboxTimerArm: func(_ context.Context, items []model.OutboxItem) error {
			mu.Lock()
			defer mu.Unlock()
			for _, it := range items {
				seen[it.Ref]++
			}
			return nil
		}}, outbox.Options{BatchSize: 7})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := d.DispatchOnce(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != 200 {
		t.Fatalf("%d distinct items dispatched, want 200: items were lost", len(seen))
	}
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	if dups > 20 {
		t.Fatalf("%d duplicate deliveries for 200 items: the replicas are not sharing the work", dups)
	}
	var left int64
	stores[0].DB().Table("outbox").Count(&left)
	if left != 0 {
		t.Fatalf("%d outbox rows left after dispatch", left)
	}
}
