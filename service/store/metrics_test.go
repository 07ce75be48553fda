package store_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// The query gauges' reads: instances of every tenant by status, and the outbox's size and oldest row, which
// shrink as the dispatcher takes rows.
func TestMetricsQueries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		n, oldest, err := s.OutboxBacklog(ctx)
		if err != nil || n != 0 || !oldest.IsZero() {
			t.Fatalf("empty outbox: %d %v %v", n, oldest, err)
		}
		t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
		for i, c := range []struct {
			id, tenant string
			status     model.InstanceStatus
		}{{"m1", "default", model.StatusRunning}, {"m2", "default", model.StatusRunning}, {"m3", "acme", model.StatusRunning},
			{"m4", "default", model.StatusFailed}, {"m5", "acme", model.StatusCompleted}} {
			at := t0.Add(time.Duration(i) * time.Minute)
			s.SetNow(func() time.Time { return at }) // the outbox row's created_at
			inst := &model.Instance{ID: c.id, TenantID: c.tenant, Template: "metrics", Version: 1, Status: c.status, CreatedAt: at, UpdatedAt: at}
			if c.status.Ended() {
				inst.EndedAt = &at
			}
			w := &model.Work{Instance: inst, Outbox: []model.OutboxItem{{TenantID: c.tenant, Kind: model.OutboxEvent, Ref: c.id, Payload: []byte(`{}`), CreatedAt: at}}}
			if err := s.CreateInstance(ctx, w); err != nil {
				t.Fatal(err)
			}
		}
		counts, err := s.CountInstancesByStatus(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[model.InstanceStatus]int64{model.StatusRunning: 3, model.StatusFailed: 1, model.StatusCompleted: 1}
		if len(counts) != len(want) {
			t.Fatalf("counts %v, want %v", counts, want)
		}
		for st, n := range want {
			if counts[st] != n {
				t.Fatalf("counts %v, want %v", counts, want)
			}
		}
		n, oldest, err = s.OutboxBacklog(ctx)
		if err != nil || n != 5 || !oldest.Equal(t0) {
			t.Fatalf("outbox backlog %d, oldest %v, %v; want 5 rows, oldest %v", n, oldest, err, t0)
		}
		if _, err := s.DispatchOutbox(ctx, 2, func(context.Context, []model.OutboxItem) error { return nil }); err != nil {
			t.Fatal(err)
		}
		n, oldest, err = s.OutboxBacklog(ctx)
		if err != nil || n != 3 || !oldest.Equal(t0.Add(2*time.Minute)) {
			t.Fatalf("after dispatching 2: %d rows, oldest %v, %v", n, oldest, err)
		}
	})
}

// TestCountInstancesInPages: the count of the instances by status goes a page of the status index at a time, the
// cursor carried across tenants and statuses, pace called between pages and its error ending the pass; the sums are
// those of one GROUP BY over the whole table, whatever the page size.
func TestCountInstancesInPages(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
		statuses := []model.InstanceStatus{model.StatusRunning, model.StatusCompleted, model.StatusFailed, model.StatusRunning, model.StatusWithdrawn}
		for i := range 47 {
			st := statuses[(i*7)%len(statuses)]
			inst := &model.Instance{ID: fmt.Sprintf("c%03d", (i*31)%47), TenantID: []string{"acme", "default", "zeta"}[i%3], Template: "metrics",
				Version: 1, Status: st, CreatedAt: at, UpdatedAt: at}
			if st.Ended() {
				inst.EndedAt = &at
			}
			if err := s.CreateInstance(ctx, &model.Work{Instance: inst}); err != nil {
				t.Fatal(err)
			}
		}
		var truth []struct {
			Status string
			N      int64
		}
		if err := s.DB().Raw("SELECT status, COUNT(*) AS n FROM instances GROUP BY status").Scan(&truth).Error; err != nil {
			t.Fatal(err)
		}
		want := map[model.InstanceStatus]int64{}
		for _, r := range truth {
			want[model.InstanceStatus(r.Status)] = r.N
		}
		for _, page := range []int{1, 2, 5, 16, 47, 100} {
			store.SetCountPage(t, page)
			paced := 0
			got, err := s.CountInstancesByStatus(ctx, func(context.Context) error { paced++; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, want) {
				t.Errorf("pages of %d: %v, want %v", page, got, want)
			}
			if full := 47 / page; paced != full { // after every full page; the last, short or empty, ends the pass
				t.Errorf("pages of %d: paced %d times, want %d", page, paced, full)
			}
		}
		store.SetCountPage(t, 10)
		stop := errors.New("stop")
		paced := 0
		if _, err := s.CountInstancesByStatus(ctx, func(context.Context) error { paced++; return stop }); !errors.Is(err, stop) || paced != 1 {
			t.Fatalf("a pace that fails: %v after %d pages, want it returned after the first", err, paced)
		}
	})
}

// TestCountInstancesPagesReadTheirRange: on MySQL a page of the count in the middle of the index reads a page of
// entries from its cursor on (EXPLAIN: a range of idx_instances_status), not the entries before it.
func TestCountInstancesPagesReadTheirRange(t *testing.T) {
	s := storetest.Open(t, store.MySQL)
	seed(t, s, "instances", 20000, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) // 5 statuses, ids inst-00000…
	if err := s.DB().Exec("ANALYZE TABLE instances").Error; err != nil {
		t.Fatal(err)
	}
	q := store.CountInstancesSQL(store.MySQL)
	args := []any{model.DefaultTenant, model.DefaultTenant, "completed", model.DefaultTenant, "completed", "inst-10000", 500}
	var plan []struct {
		Table string
		Type  string
		Key   *string
	}
	if err := s.DB().Raw("EXPLAIN "+q, args...).Scan(&plan).Error; err != nil {
		t.Fatal(err)
	}
	read := false
	for _, p := range plan { // the outer query reads the page (<derived2>), the page reads instances
		if p.Table == "instances" {
			read = true
			if p.Type != "range" || p.Key == nil || *p.Key != "idx_instances_status" {
				t.Errorf("instances read by %q through %v, want a range of idx_instances_status\n  %s", p.Type, p.Key, q)
			}
		}
	}
	if !read {
		t.Errorf("no step of the plan %+v reads instances", plan)
	}
	var entries int64
	err := s.DB().Connection(func(tx *gorm.DB) error {
		if err := tx.Exec("FLUSH STATUS").Error; err != nil {
			return err
		}
		var rows []struct {
			Status string
			N      int64
			Last   string
		}
		if err := tx.Raw(q, args...).Scan(&rows).Error; err != nil {
			return err
		}
		// completed after inst-10000 (2,000 of them: every fifth id), then the next status in the index's order.
		if len(rows) == 0 || rows[0].Status != "completed" || rows[0].Last <= "inst-10000" {
			t.Errorf("page %+v, want completed instances after inst-10000 first", rows)
		}
		var n int64
		for _, r := range rows {
			n += r.N
		}
		if n != 500 {
			t.Errorf("page of %d entries, want 500", n)
		}
		var err error
		entries, err = entriesRead(tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if entries > 1000 {
		t.Errorf("a page of 500 read %d index entries", entries)
	}
	t.Logf("read %d index entries", entries)
}
