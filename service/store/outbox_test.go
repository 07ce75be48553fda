package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestOutboxDispatchersDoNotDeadlock: two dispatchers (two replicas) claim batches of the outbox with SKIP LOCKED,
// hold them until both have claimed, then delete them at the same time: the batches are disjoint, both deletes
// hold, every row is dispatched once. (CI's InnoDB status of 2026-11-30 showed two outbox deletes of disjoint
// seq lists in a deadlock, in a test database; this case does not reproduce it — the note of issue 31 has it.)
func TestOutboxDispatchersDoNotDeadlock(t *testing.T) {
	s := storetest.Open(t, store.MySQL)
	at := time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC)
	s.SetNow(func() time.Time { return at })
	for i := range 40 {
		inst := &model.Instance{ID: "ob" + string(rune('a'+i/26)) + string(rune('a'+i%26)), TenantID: "default", Template: "outbox", Version: 1,
			Status: model.StatusRunning, CreatedAt: at, UpdatedAt: at}
		items := make([]model.OutboxItem, 10)
		for j := range items {
			items[j] = model.OutboxItem{TenantID: "default", Kind: model.OutboxEvent, Ref: inst.ID, Payload: []byte(`{}`), CreatedAt: at}
		}
		if err := s.CreateInstance(ctx, &model.Work{Instance: inst, Outbox: items}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 5 {
		// Both hold their claims until both have claimed, then both delete.
		var claimed sync.WaitGroup
		claimed.Add(2)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		got := make([]int, 2)
		for d := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				once := sync.Once{}
				got[d], errs[d] = s.DispatchOutbox(ctx, 30, func(context.Context, []model.OutboxItem) error {
					once.Do(claimed.Done)
					claimed.Wait()
					return nil
				})
				once.Do(claimed.Done) // a dispatcher that found nothing does not hold the other up
			}()
		}
		wg.Wait()
		for d := range 2 {
			if errs[d] != nil {
				t.Fatalf("round %d: dispatcher %d: %v", round, d, errs[d])
			}
			if got[d] != 30 {
				t.Fatalf("round %d: dispatcher %d dispatched %d rows, want 30 (disjoint claims of 400)", round, d, got[d])
			}
		}
	}
	if n, _, err := s.OutboxBacklog(ctx); err != nil || n != 400-5*60 {
		t.Fatalf("outbox backlog %d (%v), want %d", n, err, 400-5*60)
	}
}
