package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestPurgeNotifications: the notifications created before the cutoff go, in batches (there are more than one
// statement deletes), and the later ones stay; of the deliveries, the finished ones before the cutoff go and the
// pending ones stay whatever their age. A row whose id is older than its created_at (as ids of an earlier release
// or of a clock that went back can be) is kept until created_at passes the cutoff too.
func TestPurgeNotifications(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := t.Context()
		t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
		cutoff := t0.Add(24*time.Hour + 500*time.Microsecond) // not on a millisecond
		var ids model.TimeIDs
		var ns []*model.Notification
		add := func(user string, at time.Time) *model.Notification {
			n := &model.Notification{ID: ids.Next(at), TenantID: model.DefaultTenant, Username: user, Key: fmt.Sprintf("k-%d", len(ns)),
				Event: model.NotifyTaskCreated, InstanceID: "inst", TaskID: "task", Title: "leave", NodeName: "manager", Message: "m", Link: "/", At: at}
			ns = append(ns, n)
			return n
		}
		const old = 2500 // three purge statements' worth
		for i := range old {
			add(fmt.Sprintf("u%d", i%7), t0.Add(time.Duration(i)*time.Second))
		}
		edge := add("u1", cutoff.Add(-time.Microsecond)) // same millisecond as the cutoff: stays until the next purge
		later := add("u2", cutoff)
		// Stamped a day early but created after the cutoff: created_at decides.
		skewed := &model.Notification{ID: (&model.TimeIDs{}).Next(t0), TenantID: model.DefaultTenant, Username: "u3", Key: "skewed",
			Event: model.NotifyTaskCreated, Title: "leave", At: cutoff.Add(time.Hour)}
		ns = append(ns, skewed)
		if n, err := s.AddNotifications(ctx, ns); err != nil || n != len(ns) {
			t.Fatalf("add: %d %v", n, err)
		}
		delivery := func(id string, at time.Time, status string) *model.NotificationDelivery {
			d := &model.NotificationDelivery{ID: id, TenantID: model.DefaultTenant, Channel: "mail", Kind: model.ChannelSMTP, Recipient: "u1",
				Key: "d-" + id, Event: model.NotifyTaskCreated, Message: []byte("{}"), Status: status, CreatedAt: at}
			if status != model.DeliveryPending {
				d.FinishedAt = &at
			}
			return d
		}
		var dids model.TimeIDs // ids never go back: those of ids are past the cutoff by now
		ds := []*model.NotificationDelivery{
			delivery(dids.Next(t0), t0, model.DeliveryDelivered),
			delivery(dids.Next(t0.Add(time.Minute)), t0.Add(time.Minute), model.DeliveryFailed),
			delivery(dids.Next(t0.Add(2*time.Minute)), t0.Add(2*time.Minute), model.DeliveryPending),
			delivery(dids.Next(cutoff.Add(time.Minute)), cutoff.Add(time.Minute), model.DeliveryDelivered),
		}
		if _, err := s.AddNotificationDeliveries(ctx, ds); err != nil {
			t.Fatal(err)
		}

		n, err := s.PurgeNotifications(ctx, cutoff)
		if err != nil || n != old+2 {
			t.Fatalf("purge: %d %v, want %d (%d notifications, 2 finished deliveries)", n, err, old+2, old)
		}
		var left []string
		s.DB().Table("notifications").Order("id").Pluck("id", &left)
		want := []string{skewed.ID, edge.ID, later.ID}
		if fmt.Sprint(left) != fmt.Sprint(want) {
			t.Fatalf("notifications left %v, want %v (the skewed, the edge, the later)", left, want)
		}
		var dleft []string
		s.DB().Table("notification_deliveries").Order("id").Pluck("id", &dleft)
		if fmt.Sprint(dleft) != fmt.Sprint([]string{ds[2].ID, ds[3].ID}) {
			t.Fatalf("deliveries left %v, want the pending one and the later one", dleft)
		}

		// A day later everything but the pending delivery has aged out.
		if n, err := s.PurgeNotifications(ctx, cutoff.Add(25*time.Hour)); err != nil || n != 4 {
			t.Fatalf("second purge: %d %v, want 4", n, err)
		}
		var rows int64
		s.DB().Table("notifications").Count(&rows)
		if rows != 0 {
			t.Fatalf("%d notifications left", rows)
		}
		s.DB().Table("notification_deliveries").Count(&rows)
		if rows != 1 {
			t.Fatalf("%d deliveries left, want the pending one", rows)
		}
	})
}
