package notify_test

import (
	"context"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/notify"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// take hands one task.created event for assignee to svc as the engine does in a step.
func take(svc *notify.Service, assignee string, n int) (*model.Work, bool) {
	w := &model.Work{}
	task := &model.Task{ID: "i1.t" + string(rune('0'+n)), NodeID: "lead", NodeName: "Lead", Assignee: assignee, Status: model.TaskPending, Kind: model.TaskKindApproval}
	ok := svc.Take(w, &model.StepEvent{Key: "i1.1." + string(rune('0'+n)), Name: "task.created", At: t0, TenantID: model.DefaultTenant, InstanceID: "i1",
		Template: "leave", Title: "Leave", Initiator: "alice", NodeID: "lead", Task: task})
	return w, ok
}

// waitTaken retries take until the cache's background load let it through (the load runs on its own goroutine).
func waitTaken(t *testing.T, svc *notify.Service, assignee string) *model.Work {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for n := 1; ; n++ {
		if w, ok := take(svc, assignee, n%10); ok {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache never loaded")
		}
		time.Sleep(5 * time.Millisecond) // a real goroutine reads the database: nothing to fake
	}
}

// TestInStepCache: an event whose users and settings are not cached is not taken (the outbox carries it) and has
// them loaded; once loaded it is rendered in the step — in the recipient's language, with the tenant's channels,
// nobody for a disabled user; entries expire after the TTL; a change through this process (UserChanged, the
// settings and channels API) is seen by the next event; a delivery written for a channel deleted meanwhile fails.
func TestInStepCache(t *testing.T) {
	storetest.Each(t, func(t *testing.T, st *store.Store) {
		f := newFixture(t, st, "127.0.0.1", func(_ *notify.Deps, o *notify.Options) { o.CacheTTL = time.Minute })
		st.OnUserChange(f.svc.UserChanged)
		f.user(&model.User{Username: "alice"})
		f.user(&model.User{Username: "bob", Language: "en"})
		f.user(&model.User{Username: "dave", Disabled: true})
		hook := f.channel("hook", "webhook", map[string]any{"url": "http://127.0.0.1:9/in", "secret": "s3cret-s3cret"})
		f.settings(&model.NotificationSettings{Events: map[string][]string{model.NotifyTaskCreated: {hook.Name}}})

		if _, ok := take(f.svc, "bob", 1); ok {
			t.Fatal("taken with an empty cache")
		}
		w := waitTaken(t, f.svc, "bob")
		if len(w.Notifications) != 1 || w.Notifications[0].Username != "bob" || w.Notifications[0].Message != "Approval needed: Leave" ||
			len(w.NotificationDeliveries) != 1 || w.NotificationDeliveries[0].Channel != "hook" || w.NotificationDeliveries[0].Status != model.DeliveryPending {
			t.Fatalf("rendered in the step: %+v %+v", w.Notifications, w.NotificationDeliveries)
		}
		if w := waitTaken(t, f.svc, "dave"); len(w.Notifications)+len(w.NotificationDeliveries) != 0 {
			t.Fatalf("a disabled user was notified: %+v", w.Notifications)
		}

		// A change through this process: the next event misses and then renders the new language.
		if _, err := st.UpdateUser(context.Background(), model.DefaultTenant, "bob", func(u *model.User) error { u.Language = "zh-CN"; return nil }); err != nil {
			t.Fatal(err)
		}
		if _, ok := take(f.svc, "bob", 2); ok {
			t.Fatal("a changed user was still cached")
		}
		if w := waitTaken(t, f.svc, "bob"); w.Notifications[0].Message != "待审批：Leave" {
			t.Fatalf("after the change: %q", w.Notifications[0].Message)
		}

		// The settings changed through the API: no channel any more.
		f.settings(&model.NotificationSettings{})
		if _, ok := take(f.svc, "bob", 3); ok {
			t.Fatal("changed settings were still cached")
		}
		if w := waitTaken(t, f.svc, "bob"); len(w.NotificationDeliveries) != 0 {
			t.Fatalf("deliveries after the settings dropped the channel: %+v", w.NotificationDeliveries)
		}

		// Past the TTL nothing is used.
		f.clk.Advance(time.Minute)
		if _, ok := take(f.svc, "bob", 4); ok {
			t.Fatal("taken past the TTL")
		}
		waitTaken(t, f.svc, "bob")

		// A delivery a step wrote for a channel deleted since its cache was read fails instead of waiting forever.
		f.settings(&model.NotificationSettings{Events: map[string][]string{model.NotifyTaskCreated: {hook.Name}}})
		w = waitTaken(t, f.svc, "bob")
		if err := f.svc.DeleteChannel(context.Background(), admin, hook.Name); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AddNotificationDeliveries(context.Background(), w.NotificationDeliveries); err != nil {
			t.Fatal(err)
		}
		f.deliver()
		if got := f.deliveries(model.DeliveryFailed); len(got) != 1 || got[0].LastError != "the channel was deleted" {
			t.Fatalf("a delivery to a deleted channel: %+v", got)
		}
		if got := f.deliveries(model.DeliveryPending); len(got) != 0 {
			t.Fatalf("still pending: %+v", got)
		}
	})
}
