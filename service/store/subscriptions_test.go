package store_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

func mkSubscription(t *testing.T, s *store.Store, tenant, id string, at time.Time) *model.Subscription {
	t.Helper()
	sub := &model.Subscription{ID: id, TenantID: tenant, Event: "task.created", Template: "leave", WebhookURL: "https://hooks.example.com/" + id,
		Secret: "sekret-" + id, CreatedBy: "admin", CreatedAt: at}
	if err := s.CreateSubscription(t.Context(), sub); err != nil {
		t.Fatal(err)
	}
	return sub
}

func mkDelivery(sub *model.Subscription, key string, at time.Time) *model.Delivery {
	return &model.Delivery{ID: sub.ID + "-" + key, TenantID: sub.TenantID, SubscriptionID: sub.ID, OutboxKey: key, Event: "task.created",
		InstanceID: "i-" + key, Body: []byte(`{"event":"task.created"}`), Status: model.DeliveryPending, CreatedAt: at, NextAttemptAt: &at}
}

func TestSubscriptionsCRUD(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
		a := mkSubscription(t, s, "default", "sub-a", t0)
		mkSubscription(t, s, "default", "sub-b", t0.Add(time.Second))
		mkSubscription(t, s, "default", "sub-c", t0.Add(2*time.Second))
		mkSubscription(t, s, "other", "sub-x", t0)
		if err := s.CreateSubscription(ctx, a); !model.IsKind(err, model.ECONFLICT) {
			t.Fatalf("duplicate id: %v, want conflict", err)
		}

		got, err := s.GetSubscription(ctx, "default", "sub-a")
		if err != nil {
			t.Fatal(err)
		}
		if got.Secret != "sekret-sub-a" || !got.HasSecret || got.Template != "leave" || got.WebhookURL != a.WebhookURL || !got.CreatedAt.Equal(t0) {
			t.Fatalf("round trip: %+v", got)
		}
		if _, err := s.GetSubscription(ctx, "other", "sub-a"); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("another tenant's subscription: %v, want not found", err)
		}

		page1, next, err := s.ListSubscriptions(ctx, "default", model.Page{Limit: 2})
		if err != nil || len(page1) != 2 || page1[0].ID != "sub-a" || page1[1].ID != "sub-b" || next == "" {
			t.Fatalf("page 1: %v %q %v", ids(page1), next, err)
		}
		page2, next, err := s.ListSubscriptions(ctx, "default", model.Page{Limit: 2, Cursor: next})
		if err != nil || len(page2) != 1 || page2[0].ID != "sub-c" || next != "" {
			t.Fatalf("page 2: %v %q %v", ids(page2), next, err)
		}
		if _, _, err := s.ListSubscriptions(ctx, "default", model.Page{Limit: 2, Cursor: "%%%"}); !model.IsKind(err, model.EINVALID) {
			t.Fatalf("bad cursor: %v", err)
		}

		all, err := s.AllSubscriptions(ctx)
		if err != nil || len(all) != 4 {
			t.Fatalf("all: %d %v", len(all), err)
		}
		for _, x := range all {
			if x.Secret != "" || !x.HasSecret {
				t.Fatalf("AllSubscriptions must not carry secrets: %+v", x)
			}
		}

		if _, err := s.AddDeliveries(ctx, []*model.Delivery{mkDelivery(a, "1-1", t0), mkDelivery(a, "2-2", t0)}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSubscription(ctx, "other", "sub-a"); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("delete across tenants: %v", err)
		}
		if err := s.DeleteSubscription(ctx, "default", "sub-a"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSubscription(ctx, "default", "sub-a"); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("second delete: %v, want not found", err)
		}
		var n int64
		s.DB().Table("subscription_deliveries").Where("subscription_id = ?", "sub-a").Count(&n)
		if n != 0 {
			t.Fatalf("%d deliveries left after deleting their subscription", n)
		}
	})
}

func ids(subs []*model.Subscription) []string {
	var out []string
	for _, s := range subs {
		out = append(out, s.ID)
	}
	return out
}

func TestDeliveriesLifecycle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
		a := mkSubscription(t, s, "default", "sub-a", t0)
		b := mkSubscription(t, s, "default", "sub-b", t0)

		batch := []*model.Delivery{mkDelivery(a, "1-100", t0), mkDelivery(b, "1-100", t0), mkDelivery(a, "2-100", t0.Add(time.Second))}
		later := t0.Add(time.Hour)
		batch[2].NextAttemptAt = &later
		n, err := s.AddDeliveries(ctx, batch)
		if err != nil || n != 3 {
			t.Fatalf("add: %d %v", n, err)
		}
		// The same outbox events again (a re-dispatched batch, with fresh delivery ids): nothing new.
		again := []*model.Delivery{mkDelivery(a, "1-100", t0), mkDelivery(b, "1-100", t0), mkDelivery(a, "2-100", t0)}
		for _, d := range again {
			d.ID += "-again"
		}
		if n, err := s.AddDeliveries(ctx, again); err != nil || n != 0 {
			t.Fatalf("re-add: %d %v, want 0", n, err)
		}
		var rows int64
		s.DB().Table("subscription_deliveries").Count(&rows)
		if rows != 3 {
			t.Fatalf("%d delivery rows, want 3", rows)
		}

		// Two are due at t0; the third only later.
		now := t0.Add(time.Second)
		lease := now.Add(time.Minute)
		got, err := s.ClaimDeliveries(ctx, 10, now, lease)
		if err != nil || len(got) != 2 {
			t.Fatalf("claim: %d %v", len(got), err)
		}
		for _, d := range got {
			if d.Attempts != 1 || d.Target == nil || d.Target.Secret != "sekret-"+d.SubscriptionID || d.Target.WebhookURL == "" || string(d.Body) != `{"event":"task.created"}` {
				t.Fatalf("claimed delivery: %+v target %+v", d, d.Target)
			}
			if d.LastAttemptAt == nil || !d.LastAttemptAt.Equal(now) {
				t.Fatalf("last_attempt_at %v, want %v", d.LastAttemptAt, now)
			}
		}
		// Leased: nobody else gets them until the lease ends.
		if again, err := s.ClaimDeliveries(ctx, 10, now.Add(30*time.Second), lease); err != nil || len(again) != 0 {
			t.Fatalf("claimed during the lease: %d %v", len(again), err)
		}
		// Delivery 1 succeeds; delivery 2's worker dies.
		fin := now.Add(time.Second)
		ok, err := s.FinishDelivery(ctx, model.DeliveryResult{ID: got[0].ID, Attempt: 1, Status: model.DeliveryDelivered, StatusCode: 204, FinishedAt: &fin})
		if err != nil || !ok {
			t.Fatalf("finish: %v %v", ok, err)
		}
		rescued, err := s.ClaimDeliveries(ctx, 10, lease.Add(time.Second), lease.Add(2*time.Minute))
		if err != nil || len(rescued) != 1 || rescued[0].ID != got[1].ID || rescued[0].Attempts != 2 {
			t.Fatalf("rescue after the lease: %v %v", rescued, err)
		}
		// The dead worker's late answer is for attempt 1: ignored.
		if ok, err := s.FinishDelivery(ctx, model.DeliveryResult{ID: got[1].ID, Attempt: 1, Status: model.DeliveryDelivered, FinishedAt: &fin}); err != nil || ok {
			t.Fatalf("stale finish applied: %v %v", ok, err)
		}
		retry := lease.Add(time.Hour)
		if ok, err := s.FinishDelivery(ctx, model.DeliveryResult{ID: got[1].ID, Attempt: 2, Status: model.DeliveryPending, StatusCode: 500, Error: "HTTP 500", NextAttemptAt: retry}); err != nil || !ok {
			t.Fatalf("finish pending: %v %v", ok, err)
		}

		log, next, err := s.ListDeliveries(ctx, "default", "sub-a", model.Page{Limit: 1})
		if err != nil || len(log) != 1 || log[0].ID != batch[2].ID || next == "" {
			t.Fatalf("log page 1 (newest first): %+v %q %v", log, next, err)
		}
		log, next, err = s.ListDeliveries(ctx, "default", "sub-a", model.Page{Limit: 1, Cursor: next})
		if err != nil || len(log) != 1 || log[0].ID != batch[0].ID || next != "" {
			t.Fatalf("log page 2: %+v %q %v", log, next, err)
		}
		byID := map[string]*model.Delivery{}
		for _, sub := range []string{"sub-a", "sub-b"} {
			l, _, _ := s.ListDeliveries(ctx, "default", sub, model.Page{Limit: 10})
			for _, d := range l {
				byID[d.ID] = d
			}
		}
		if d := byID[got[0].ID]; d.Status != model.DeliveryDelivered || d.StatusCode != 204 || d.FinishedAt == nil || d.NextAttemptAt != nil {
			t.Fatalf("delivered: %+v", d)
		}
		if d := byID[got[1].ID]; d.Status != model.DeliveryPending || d.Attempts != 2 || d.StatusCode != 500 || d.LastError != "HTTP 500" ||
			d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(retry) || d.FinishedAt != nil {
			t.Fatalf("pending: %+v", d)
		}
		if l, _, _ := s.ListDeliveries(ctx, "other", "sub-a", model.Page{Limit: 10}); len(l) != 0 {
			t.Fatalf("another tenant sees %d deliveries", len(l))
		}

		// Purge: finished deliveries created before the cut-off go; pending ones stay.
		n64, err := s.PurgeDeliveries(ctx, t0.Add(time.Hour))
		if err != nil || n64 != 1 {
			t.Fatalf("purge: %d %v, want 1", n64, err)
		}
		s.DB().Table("subscription_deliveries").Count(&rows)
		if rows != 2 {
			t.Fatalf("%d rows after purge, want 2", rows)
		}
	})
}

// TestClaimDeliveriesConcurrently: claimers racing over one table each get distinct deliveries, and every due
// delivery is claimed exactly once.
func TestClaimDeliveriesConcurrently(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
		sub := mkSubscription(t, s, "default", "sub-a", t0)
		var ds []*model.Delivery
		for i := range 60 {
			ds = append(ds, mkDelivery(sub, fmt.Sprintf("%d-1", i), t0))
		}
		if n, err := s.AddDeliveries(ctx, ds); err != nil || n != 60 {
			t.Fatalf("add: %d %v", n, err)
		}
		var mu sync.Mutex
		var claimed []string
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					got, err := s.ClaimDeliveries(ctx, 3, t0, t0.Add(time.Minute))
					if err != nil {
						errs <- err
						return
					}
					if len(got) == 0 {
						return
					}
					mu.Lock()
					for _, d := range got {
						claimed = append(claimed, d.ID)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		sort.Strings(claimed)
		if len(claimed) != 60 {
			t.Fatalf("claimed %d, want 60", len(claimed))
		}
		for i := 1; i < len(claimed); i++ {
			if claimed[i] == claimed[i-1] {
				t.Fatalf("%s claimed twice", claimed[i])
			}
		}
	})
}
