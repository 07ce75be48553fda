package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestOutboxDispatchersDoNotDeadlock: two dispatchers (two replicas) claim batches of the outbox with SKIP LOCKED,
// hold them until both have claimed, then delete them at the same time: the batches are disjoint, both deletes
// hold, every row is dispatched once. The batches are the dispatcher's default (200) of an outbox of 400: with a
// plain DELETE … WHERE seq IN (…) MariaDB's optimizer scans the whole small table instead of the 200 keys, waits on
// the other dispatcher's rows, and the two deletes deadlock (CI's InnoDB status of 2026-11-30 showed exactly that).
func TestOutboxDispatchersDoNotDeadlock(t *testing.T) {
	s := storetest.Open(t, store.MySQL)
	at := time.Date(2026, 11, 30, 20, 0, 0, 0, time.UTC)
	s.SetNow(func() time.Time { return at })
	const batch, perRound = 200, 400
	next := 0
	for round := range 5 {
		for range perRound / 10 {
			inst := &model.Instance{ID: fmt.Sprintf("ob%04d", next), TenantID: "default", Template: "outbox", Version: 1,
				Status: model.StatusRunning, CreatedAt: at, UpdatedAt: at}
			next++
			items := make([]model.OutboxItem, 10)
			for j := range items {
				items[j] = model.OutboxItem{TenantID: "default", Kind: model.OutboxEvent, Ref: inst.ID, Payload: []byte(`{}`), CreatedAt: at}
			}
			if err := s.CreateInstance(ctx, &model.Work{Instance: inst, Outbox: items}); err != nil {
				t.Fatal(err)
			}
		}
		// Both hold their claims until both have claimed, then both delete.
		var claimed sync.WaitGroup
		claimed.Add(2)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		got := make([]int, 2)
		calls := make([]int, 2)
		seen := make([]map[int64]bool, 2)
		for d := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				once := sync.Once{}
				got[d], errs[d] = s.DispatchOutbox(ctx, batch, func(_ context.Context, items []model.OutboxItem) error {
					calls[d]++
					seen[d] = map[int64]bool{}
					for _, it := range items {
						seen[d][it.Seq] = true
					}
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
			// One call each: a deadlock rolls a dispatch back and the store retries it (the handler runs again).
			if got[d] != batch || calls[d] != 1 {
				t.Fatalf("round %d: dispatcher %d dispatched %d rows in %d calls, want %d in 1 (disjoint claims of %d)",
					round, d, got[d], calls[d], batch, perRound)
			}
		}
		for seq := range seen[0] {
			if seen[1][seq] {
				t.Fatalf("round %d: outbox row %d dispatched by both", round, seq)
			}
		}
		if n, _, err := s.OutboxBacklog(ctx); err != nil || n != 0 {
			t.Fatalf("round %d: outbox backlog %d (%v), want 0", round, n, err)
		}
	}
}
