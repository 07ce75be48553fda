package store_test

import (
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestListDelegationsReadsThemAll: more delegations than one page (1,000) are all listed, in start order, each
// once — the rules resolver applies every one of them — and the filters by user and end still hold.
func TestListDelegationsReadsThemAll(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		mkUser(t, s, "ann")
		mkUser(t, s, "bob")
		mkUser(t, s, "cid")
		at := time.Date(2027, 1, 4, 9, 0, 0, 0, time.UTC)
		const n = 1203
		for i := range n {
			from, to := "ann", "bob"
			switch i % 3 {
			case 1:
				from, to = "bob", "cid"
			case 2:
				from, to = "cid", "ann"
			}
			start := at.Add(time.Duration(i/3) * time.Hour) // three delegators start at the same time: ties by id
			d := &model.Delegation{TenantID: model.DefaultTenant, From: from, To: to, StartsAt: start, EndsAt: start.Add(time.Hour), CreatedBy: from}
			if err := s.CreateDelegation(ctx, d); err != nil {
				t.Fatal(i, err)
			}
		}
		all, err := s.ListDelegations(ctx, model.DefaultTenant, "", at)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != n {
			t.Fatalf("listed %d delegations, want %d", len(all), n)
		}
		seen := map[string]bool{}
		for i, d := range all {
			if seen[d.ID] {
				t.Fatalf("%s listed twice", d.ID)
			}
			seen[d.ID] = true
			if i > 0 && d.StartsAt.Before(all[i-1].StartsAt) {
				t.Fatalf("out of start order at %d", i)
			}
		}
		// ann delegates 401 times and receives 401 times.
		if mine, err := s.ListDelegations(ctx, model.DefaultTenant, "ann", at); err != nil || len(mine) != 802 {
			t.Fatalf("ann's: %d, %v", len(mine), err)
		}
		// Ending after hour 300: the windows starting at hours 300..400, three each.
		later, err := s.ListDelegations(ctx, model.DefaultTenant, "", at.Add(300*time.Hour))
		if err != nil || len(later) != 3*(n/3-300) {
			t.Fatalf("ending after hour 300: %d, %v", len(later), err)
		}
		none, err := s.ListDelegations(ctx, "other", "", at)
		if err != nil || none == nil || len(none) != 0 {
			t.Fatalf("another tenant's: %v, %v", none, err)
		}
	})
}
