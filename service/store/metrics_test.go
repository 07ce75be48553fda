package store_test

import (
	"context"
	"testing"
	"time"

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
		counts, err := s.CountInstancesByStatus(ctx)
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
