package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

func TestMessageIDs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		now := time.Date(2026, 5, 1, 10, 0, 0, 123456789, time.UTC)
		stale := now.Add(-time.Minute)
		ans, claimed, err := s.ClaimMessageID(ctx, model.DefaultTenant, "m-1", now, stale)
		if err != nil || !claimed || ans != nil {
			t.Fatalf("first claim: %s %v %v", ans, claimed, err)
		}
		// While the first request runs: neither claimed nor answered.
		ans, claimed, err = s.ClaimMessageID(ctx, model.DefaultTenant, "m-1", now.Add(time.Second), stale.Add(time.Second))
		if err != nil || claimed || ans != nil {
			t.Fatalf("claim while in flight: %s %v %v", ans, claimed, err)
		}
		// Another tenant has its own ids.
		if _, claimed, _ := s.ClaimMessageID(ctx, "other", "m-1", now, stale); !claimed {
			t.Fatal("the id of another tenant was taken")
		}
		if err := s.FinishMessageID(ctx, model.DefaultTenant, "m-1", []byte(`{"resumed":1}`)); err != nil {
			t.Fatal(err)
		}
		ans, claimed, err = s.ClaimMessageID(ctx, model.DefaultTenant, "m-1", now.Add(time.Hour), now.Add(time.Hour-time.Minute))
		if err != nil || claimed || string(ans) != `{"resumed":1}` {
			t.Fatalf("replay: %s %v %v", ans, claimed, err)
		}

		// A claim left without an answer past the lease is taken over, by one request only.
		if _, claimed, _ := s.ClaimMessageID(ctx, model.DefaultTenant, "m-2", now, stale); !claimed {
			t.Fatal("m-2 not claimed")
		}
		later := now.Add(2 * time.Minute)
		_, first, err := s.ClaimMessageID(ctx, model.DefaultTenant, "m-2", later, later.Add(-time.Minute))
		if err != nil || !first {
			t.Fatalf("take-over: %v %v", first, err)
		}
		_, second, _ := s.ClaimMessageID(ctx, model.DefaultTenant, "m-2", later, later.Add(-time.Minute))
		if second {
			t.Fatal("a claim was taken over twice")
		}

		// Abandoning frees the id; an answered one is not abandoned.
		if err := s.AbandonMessageID(ctx, model.DefaultTenant, "m-2"); err != nil {
			t.Fatal(err)
		}
		if _, claimed, _ := s.ClaimMessageID(ctx, model.DefaultTenant, "m-2", later, stale); !claimed {
			t.Fatal("an abandoned id could not be claimed again")
		}
		if err := s.AbandonMessageID(ctx, model.DefaultTenant, "m-1"); err != nil {
			t.Fatal(err)
		}
		if ans, _, _ := s.ClaimMessageID(ctx, model.DefaultTenant, "m-1", later, stale); string(ans) != `{"resumed":1}` {
			t.Fatalf("an answered id was abandoned: %s", ans)
		}

		// Purge: ids recorded before the cut go, the others stay.
		n, err := s.PurgeMessageIDs(ctx, now.Add(time.Minute))
		if err != nil || n != 2 { // m-1 of both tenants; m-2 was re-claimed at `later`
			t.Fatalf("purged %d: %v", n, err)
		}
		if _, claimed, _ := s.ClaimMessageID(ctx, model.DefaultTenant, "m-1", later, stale); !claimed {
			t.Fatal("a purged id is still known")
		}
		if _, claimed, _ := s.ClaimMessageID(ctx, model.DefaultTenant, "m-2", later, stale); claimed {
			t.Fatal("a recent id was purged")
		}
	})
}

func TestMessageTriggers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for _, k := range []string{"b", "a"} {
			if err := s.SetMessageTrigger(ctx, model.DefaultTenant, k, 1, "order.paid"); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.SetMessageTrigger(ctx, model.DefaultTenant, "c", 1, "order.shipped"); err != nil {
			t.Fatal(err)
		}
		got, err := s.MessageTriggers(ctx, model.DefaultTenant, "order.paid")
		if err != nil || !slices.Equal(got, []model.MessageTrigger{{Key: "a", Version: 1}, {Key: "b", Version: 1}}) {
			t.Fatalf("triggers %v %v", got, err)
		}
		// A new version of b starts on another message; a newer version of a on none.
		if err := s.SetMessageTrigger(ctx, model.DefaultTenant, "b", 2, "order.shipped"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetMessageTrigger(ctx, model.DefaultTenant, "a", 3, ""); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.MessageTriggers(ctx, model.DefaultTenant, "order.paid"); len(got) != 0 {
			t.Fatalf("order.paid still starts %v", got)
		}
		got, _ = s.MessageTriggers(ctx, model.DefaultTenant, "order.shipped")
		if !slices.Equal(got, []model.MessageTrigger{{Key: "b", Version: 2}, {Key: "c", Version: 1}}) {
			t.Fatalf("order.shipped starts %v", got)
		}
	})
}
