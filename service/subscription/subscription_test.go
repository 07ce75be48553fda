package subscription_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/outbound"
	"github.com/halley-bpm/halley/service/outbox"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/subscription"
)

func TestCreateValidation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, nil)
		f.subscribe(subscription.CreateRequest{Event: "task.created", WebhookURL: "https://hooks.example.com/a"})
		bob := &model.Principal{TenantID: model.DefaultTenant, Username: "bob"}
		hook := "https://hooks.example.com/x"
		for _, tc := range []struct {
			name string
			p    *model.Principal
			req  subscription.CreateRequest
			kind string
			code string
		}{
			{"not an admin", bob, subscription.CreateRequest{Event: "task.created", WebhookURL: hook}, model.EFORBIDDEN, "admin_required"},
			{"no event", admin, subscription.CreateRequest{WebhookURL: hook}, model.EINVALID, "invalid_event"},
			{"unknown event", admin, subscription.CreateRequest{Event: "task.exploded", WebhookURL: hook}, model.EINVALID, "invalid_event"},
			{"no target", admin, subscription.CreateRequest{Event: "*"}, model.EINVALID, "invalid_target"},
			{"two targets", admin, subscription.CreateRequest{Event: "*", WebhookURL: hook, Plugin: "notify"}, model.EINVALID, "invalid_target"},
			{"ftp URL", admin, subscription.CreateRequest{Event: "*", WebhookURL: "ftp://example.com/x"}, model.EINVALID, "invalid_webhook_url"},
			{"javascript URL", admin, subscription.CreateRequest{Event: "*", WebhookURL: "javascript:alert(1)"}, model.EINVALID, "invalid_webhook_url"},
			{"relative URL", admin, subscription.CreateRequest{Event: "*", WebhookURL: "/hooks/x"}, model.EINVALID, "invalid_webhook_url"},
			{"no host", admin, subscription.CreateRequest{Event: "*", WebhookURL: "https:///x"}, model.EINVALID, "invalid_webhook_url"},
			{"port only", admin, subscription.CreateRequest{Event: "*", WebhookURL: "http://:8080/x"}, model.EINVALID, "invalid_webhook_url"},
			{"too long", admin, subscription.CreateRequest{Event: "*", WebhookURL: "https://example.com/" + strings.Repeat("a", 2030)}, model.EINVALID, "invalid_webhook_url"},
			{"bad plugin name", admin, subscription.CreateRequest{Event: "*", Plugin: "../etc"}, model.EINVALID, "invalid_plugin"},
			{"secret with a plugin", admin, subscription.CreateRequest{Event: "*", Plugin: "notify", Secret: "x"}, model.EINVALID, "invalid_secret"},
			{"huge secret", admin, subscription.CreateRequest{Event: "*", WebhookURL: hook, Secret: strings.Repeat("s", 257)}, model.EINVALID, "invalid_secret"},
			{"unknown template", admin, subscription.CreateRequest{Event: "*", WebhookURL: hook, Template: "nope"}, model.EUNPROCESSABLE, "unknown_template"},
			{"same again", admin, subscription.CreateRequest{Event: "task.created", WebhookURL: "https://hooks.example.com/a"}, model.ECONFLICT, "subscription_exists"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := f.svc.Create(context.Background(), tc.p, tc.req)
				var de *model.Error
				if err == nil || !model.IsKind(err, tc.kind) || !asError(err, &de) || de.Code != tc.code {
					t.Fatalf("got %v, want %s/%s", err, tc.kind, tc.code)
				}
			})
		}
		// Valid limits: exactly 2048 characters, a plugin, a template filter, "*".
		long := "https://example.com/" + strings.Repeat("a", 2048-len("https://example.com/"))
		f.subscribe(subscription.CreateRequest{Event: "*", WebhookURL: long})
		f.subscribe(subscription.CreateRequest{Event: "instance.completed", Plugin: "notify-erp", Template: "leave"})
		subs, _, err := f.svc.List(context.Background(), model.DefaultTenant, model.Page{Limit: 10})
		if err != nil || len(subs) != 3 {
			t.Fatalf("list: %d %v", len(subs), err)
		}
	})
}

func asError(err error, de **model.Error) bool {
	e, ok := err.(*model.Error)
	*de = e
	return ok
}

func TestSecretNeverReturned(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, nil)
		sub := f.subscribe(subscription.CreateRequest{Event: "*", WebhookURL: "https://hooks.example.com/a", Secret: "top-secret-value"})
		got, err := f.svc.Get(context.Background(), model.DefaultTenant, sub.ID)
		if err != nil {
			t.Fatal(err)
		}
		list, _, _ := f.svc.List(context.Background(), model.DefaultTenant, model.Page{Limit: 10})
		for _, x := range []*model.Subscription{sub, got, list[0]} {
			b, _ := json.Marshal(x)
			if strings.Contains(string(b), "top-secret-value") || x.Secret != "" || !x.HasSecret || !strings.Contains(string(b), `"has_secret":true`) {
				t.Fatalf("secret leaks or has_secret missing: %s (Secret=%q)", b, x.Secret)
			}
		}
	})
}

func TestWants(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, nil)
		if f.svc.Wants(model.DefaultTenant, "task.created", "leave") {
			t.Fatal("no subscriptions: nothing is wanted")
		}
		a := f.subscribe(subscription.CreateRequest{Event: "task.created", WebhookURL: "https://a.example.com/"})
		b := f.subscribe(subscription.CreateRequest{Event: "instance.completed", Template: "leave", WebhookURL: "https://b.example.com/"})
		check := func(want bool, event, template string) {
			t.Helper()
			if got := f.svc.Wants(model.DefaultTenant, event, template); got != want {
				t.Fatalf("Wants(%s, %s) = %v, want %v", event, template, got, want)
			}
		}
		check(true, "task.created", "leave")
		check(true, "task.created", "expenses")
		check(true, "instance.completed", "leave")
		check(false, "instance.completed", "expenses") // the template filter
		check(false, "task.decided", "leave")
		if f.svc.Wants("other-tenant", "task.created", "leave") {
			t.Fatal("another tenant's subscription must not count")
		}

		// Another replica (a second service on the same store) subscribes to "*": this one sees it after a
		// refresh, as its periodic re-read does.
		replica := subscription.New(s, subscription.Options{Clock: f.clock, Logger: testkit.Quiet()})
		star, err := replica.Create(context.Background(), admin, subscription.CreateRequest{Event: "*", Template: "leave", WebhookURL: "https://c.example.com/"})
		if err != nil {
			t.Fatal(err)
		}
		check(false, "timer.fired", "leave")
		if err := f.svc.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		check(true, "timer.fired", "leave")
		check(false, "timer.fired", "expenses")

		// Deletions made here take effect at once.
		for _, id := range []string{a.ID, b.ID, star.ID} {
			if err := f.svc.Delete(context.Background(), admin, id); err != nil {
				t.Fatal(err)
			}
		}
		check(false, "task.created", "leave")
		check(false, "timer.fired", "leave")
		if err := f.svc.Delete(context.Background(), admin, a.ID); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("delete unknown: %v", err)
		}
	})
}

func TestHandleEventsCreatesOneDeliveryPerMatchingSubscription(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, nil)
		created := f.subscribe(subscription.CreateRequest{Event: "task.created", WebhookURL: "https://a.example.com/"})
		any := f.subscribe(subscription.CreateRequest{Event: "*", Template: "leave", WebhookURL: "https://b.example.com/"})
		plugin := f.subscribe(subscription.CreateRequest{Event: "task.created", Plugin: "notify"})
		other := f.subscribe(subscription.CreateRequest{Event: "instance.completed", WebhookURL: "https://c.example.com/"})

		task := &model.Task{ID: "t-1", InstanceID: "inst-1", NodeID: "lead", Assignee: "bob", Status: model.TaskPending}
		items := []model.OutboxItem{f.event("task.created", "leave", task), f.event("node.activated", "leave", nil), f.event("task.created", "expenses", task)}
		f.handle(items...)
		f.handle(items...) // re-dispatched after a crash: nothing new

		counts := map[string]int{}
		for _, sub := range []*model.Subscription{created, any, plugin, other} {
			counts[sub.ID] = len(f.deliveries(sub.ID))
		}
		// created: both task.created events; any: the two events of "leave"; plugin: both task.created; other: none.
		if counts[created.ID] != 2 || counts[any.ID] != 2 || counts[plugin.ID] != 2 || counts[other.ID] != 0 {
			t.Fatalf("deliveries per subscription: created=%d any=%d plugin=%d other=%d", counts[created.ID], counts[any.ID], counts[plugin.ID], counts[other.ID])
		}
		for _, d := range f.deliveries(plugin.ID) {
			if d.Status != model.DeliverySkipped || d.LastError != subscription.PluginNotWired || d.Attempts != 0 {
				t.Fatalf("plugin delivery: %+v", d)
			}
		}
		for _, d := range f.deliveries(created.ID) {
			if d.Status != model.DeliveryPending || d.Event != "task.created" || d.InstanceID != "inst-1" || d.NextAttemptAt == nil {
				t.Fatalf("webhook delivery: %+v", d)
			}
		}
	})
}

// TestThroughTheOutboxDispatcher runs the handler as production does: inside the dispatcher's transaction, on
// outbox rows committed by an instance transaction.
func TestThroughTheOutboxDispatcher(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, nil)
		sub := f.subscribe(subscription.CreateRequest{Event: "*", WebhookURL: "https://a.example.com/"})
		w := &model.Work{Instance: &model.Instance{ID: "inst-1", TenantID: model.DefaultTenant, Template: "leave", Version: 1, Status: model.StatusRunning,
			Context: []byte("{}"), CreatedAt: t0, UpdatedAt: t0}}
		for _, ev := range []string{"instance.started", "node.activated", "task.created"} {
			it := f.event(ev, "leave", nil)
			w.Outbox = append(w.Outbox, model.OutboxItem{TenantID: it.TenantID, Kind: it.Kind, Ref: it.Ref, Payload: it.Payload})
		}
		if err := s.CreateInstance(context.Background(), w); err != nil {
			t.Fatal(err)
		}
		d, err := outbox.New(s, outbox.Handlers{model.OutboxEvent: f.svc.OutboxHandler()}, outbox.Options{Logger: testkit.Quiet()})
		if err != nil {
			t.Fatal(err)
		}
		// On SQLite the dispatch holds the write lock while the handler runs: the handler can only write inside
		// the dispatch's own transaction, which DispatchOutbox hands over in the context. Without that, the
		// insert waits for a lock that is never released; the deadline turns the hang into a clear failure.
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if n, err := d.DispatchOnce(dctx); err != nil || n != 3 {
			t.Fatalf("dispatch: %d %v (does DispatchOutbox hand its transaction to the handlers through the context?)", n, err)
		}
		if n, err := d.DispatchOnce(context.Background()); err != nil || n != 0 {
			t.Fatalf("second dispatch: %d %v", n, err)
		}
		ds := f.deliveries(sub.ID)
		if len(ds) != 3 {
			t.Fatalf("%d deliveries, want 3", len(ds))
		}
	})
}

func TestDeliverySignedAndShaped(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, nil)
		rcv := newReceiver(t, 204)
		signed := f.subscribe(subscription.CreateRequest{Event: "task.created", WebhookURL: rcv.URL + "/hook?k=v", Secret: "shh-its-a-secret"})
		unsigned := f.subscribe(subscription.CreateRequest{Event: "task.created", WebhookURL: rcv.URL + "/plain"})
		task := &model.Task{ID: "t-1", InstanceID: "inst-1", NodeID: "lead", Assignee: "bob", Status: model.TaskPending}
		f.handle(f.event("task.created", "leave", task))
		if n := f.deliverOnce(); n != 2 {
			t.Fatalf("delivered %d, want 2", n)
		}
		if rcv.count() != 2 {
			t.Fatalf("receiver got %d requests", rcv.count())
		}
		for i := range 2 {
			r := rcv.request(i)
			sig := r.Header.Get("X-Halley-Signature")
			if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Halley-Event") != "task.created" || r.Header.Get("X-Halley-Delivery") == "" {
				t.Fatalf("headers: %v", r.Header)
			}
			var body struct {
				Event    string    `json:"event"`
				At       time.Time `json:"at"`
				Instance struct {
					ID, Template, Status string
				} `json:"instance"`
				NodeID string      `json:"node_id"`
				Task   *model.Task `json:"task"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
			if body.Event != "task.created" || !body.At.Equal(t0) || body.Instance.ID != "inst-1" || body.Instance.Template != "leave" ||
				body.Instance.Status != "running" || body.NodeID != "lead" || body.Task == nil || body.Task.Assignee != "bob" {
				t.Fatalf("body: %s", r.Body)
			}
			if sig == "" {
				continue // the unsigned subscription
			}
			m := hmac.New(sha256.New, []byte("shh-its-a-secret"))
			m.Write(r.Body)
			if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); sig != want {
				t.Fatalf("signature %s, want %s", sig, want)
			}
		}
		if a, b := rcv.request(0).Header.Get("X-Halley-Signature"), rcv.request(1).Header.Get("X-Halley-Signature"); (a == "") == (b == "") {
			t.Fatalf("exactly one request must be signed: %q %q", a, b)
		}
		for _, sub := range []*model.Subscription{signed, unsigned} {
			ds := f.deliveries(sub.ID)
			if len(ds) != 1 || ds[0].Status != model.DeliveryDelivered || ds[0].Attempts != 1 || ds[0].StatusCode != 204 || ds[0].LastError != "" || ds[0].FinishedAt == nil {
				t.Fatalf("delivery log: %+v", ds[0])
			}
		}
		if n := f.deliverOnce(); n != 0 {
			t.Fatalf("delivered again: %d", n)
		}
	})
}

func TestRetryWithBackoffThenSuccess(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, nil) // jitter 0.5: each wait is 1.125 × the schedule's
		rcv := newReceiver(t, 500, 502, 200)
		sub := f.subscribe(subscription.CreateRequest{Event: "*", WebhookURL: rcv.URL})
		f.handle(f.event("instance.started", "leave", nil))

		f.deliverOnce()
		ds := f.deliveries(sub.ID)
		if rcv.count() != 1 || ds[0].Status != model.DeliveryPending || ds[0].Attempts != 1 || ds[0].StatusCode != 500 ||
			!strings.HasPrefix(ds[0].LastError, "HTTP 500: answer from the receiver") || !ds[0].NextAttemptAt.Equal(t0.Add(5625*time.Millisecond)) {
			t.Fatalf("after attempt 1: %+v (next %v)", ds[0], ds[0].NextAttemptAt)
		}
		steps := []struct {
			advance time.Duration
			want    int // requests the receiver has seen afterwards
		}{
			{5 * time.Second, 1},        // 5 s < 5.625 s: too early
			{time.Second, 2},            // attempt 2 (502), next wait 30 s × 1.125 = 33.75 s
			{33 * time.Second, 2},       // too early
			{750 * time.Millisecond, 3}, // attempt 3 (200)
			{time.Hour, 3},              // delivered: never again
		}
		for i, st := range steps {
			f.clock.Advance(st.advance)
			f.deliverOnce()
			if rcv.count() != st.want {
				t.Fatalf("step %d: receiver saw %d requests, want %d", i, rcv.count(), st.want)
			}
		}
		ds = f.deliveries(sub.ID)
		if ds[0].Status != model.DeliveryDelivered || ds[0].Attempts != 3 || ds[0].StatusCode != 200 || ds[0].LastError != "" {
			t.Fatalf("final: %+v", ds[0])
		}
		// Every attempt sent the same bytes and the same delivery id.
		for i := 1; i < 3; i++ {
			if string(rcv.request(i).Body) != string(rcv.request(0).Body) || rcv.request(i).Header.Get("X-Halley-Delivery") != ds[0].ID {
				t.Fatalf("attempt %d differs", i+1)
			}
		}
	})
}

func TestGiveUpAfterMaxAttempts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, nil)
		rcv := newReceiver(t, 503)
		sub := f.subscribe(subscription.CreateRequest{Event: "*", WebhookURL: rcv.URL})
		f.handle(f.event("instance.failed", "leave", nil))
		for i := 1; i <= 8; i++ {
			if n := f.deliverOnce(); n != 1 {
				t.Fatalf("attempt %d: claimed %d", i, n)
			}
			ds := f.deliveries(sub.ID)
			if ds[0].Attempts != i {
				t.Fatalf("attempts %d, want %d", ds[0].Attempts, i)
			}
			f.clock.Advance(8 * time.Hour) // past the longest wait
		}
		if n := f.deliverOnce(); n != 0 || rcv.count() != 8 {
			t.Fatalf("after giving up: claimed %d, receiver saw %d", n, rcv.count())
		}
		ds := f.deliveries(sub.ID)
		if ds[0].Status != model.DeliveryFailed || ds[0].Attempts != 8 || ds[0].StatusCode != 503 || ds[0].FinishedAt == nil || ds[0].NextAttemptAt != nil {
			t.Fatalf("final: %+v", ds[0])
		}
	})
}

func TestLeaseRescue(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, func(o *subscription.Options) { o.Lease = time.Minute })
		rcv := newReceiver(t, 200)
		sub := f.subscribe(subscription.CreateRequest{Event: "*", WebhookURL: rcv.URL})
		f.handle(f.event("instance.started", "leave", nil))
		// A replica claims the delivery and dies before recording anything.
		if ds, err := s.ClaimDeliveries(context.Background(), 10, f.clock.Now(), f.clock.Now().Add(time.Minute)); err != nil || len(ds) != 1 {
			t.Fatalf("claim: %d %v", len(ds), err)
		}
		f.clock.Advance(59 * time.Second)
		if n := f.deliverOnce(); n != 0 {
			t.Fatal("claimed during another worker's lease")
		}
		f.clock.Advance(time.Second)
		if n := f.deliverOnce(); n != 1 || rcv.count() != 1 {
			t.Fatalf("rescue: claimed %d, receiver saw %d", n, rcv.count())
		}
		if ds := f.deliveries(sub.ID); ds[0].Status != model.DeliveryDelivered || ds[0].Attempts != 2 {
			t.Fatalf("rescued delivery: %+v", ds[0])
		}
	})
}

func TestRedirectsTimeoutsAndLargeAnswers(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	f := newFixture(t, s, func(o *subscription.Options) { o.Timeout = 300 * time.Millisecond })
	ok := newReceiver(t, 200)
	mux := http.NewServeMux()
	mux.HandleFunc("/to-ftp", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "ftp://files.example.com/x", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/to-ok", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, ok.URL+"/landed", http.StatusPermanentRedirect)
	})
	stop := make(chan struct{})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server notices the client hanging up only once the body is read
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		chunk := []byte(strings.Repeat("x", 1<<16))
		for range 64 { // 4 MiB, of which at most 64 KiB are read
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // runs first

	subs := map[string]*model.Subscription{}
	for _, p := range []string{"/to-ftp", "/to-ok", "/slow", "/huge"} {
		subs[p] = f.subscribe(subscription.CreateRequest{Event: "*", WebhookURL: srv.URL + p})
	}
	f.handle(f.event("instance.started", "leave", nil))
	if n := f.deliverOnce(); n != 4 {
		t.Fatalf("claimed %d", n)
	}
	get := func(p string) *model.Delivery { return f.deliveries(subs[p].ID)[0] }
	if d := get("/to-ftp"); d.Status != model.DeliveryPending || d.StatusCode != 307 || !strings.Contains(d.LastError, `refusing a redirect to a "ftp" URL`) {
		t.Fatalf("redirect to ftp: %+v", d)
	}
	if d := get("/to-ok"); d.Status != model.DeliveryDelivered || ok.count() != 1 || string(ok.request(0).Body) == "" {
		t.Fatalf("redirect to http: %+v (receiver saw %d)", d, ok.count())
	}
	if d := get("/slow"); d.Status != model.DeliveryPending || d.StatusCode != 0 || !strings.Contains(d.LastError, "no answer within 300ms") {
		t.Fatalf("timeout: %+v", d)
	}
	if d := get("/huge"); d.StatusCode != 500 || len(d.LastError) > 300 || !strings.HasPrefix(d.LastError, "HTTP 500: xxx") {
		t.Fatalf("large answer: %d bytes of error", len(d.LastError))
	}
	for _, d := range []*model.Delivery{get("/to-ftp"), get("/slow")} {
		if strings.Contains(d.LastError, "/to-ftp") || strings.Contains(d.LastError, "/slow") {
			t.Fatalf("error names the URL's path (it may be a credential): %s", d.LastError)
		}
	}
}

func TestSealedSecrets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		key := []byte("halley-secret-for-tests")
		f := newFixture(t, s, func(o *subscription.Options) { o.SecretKey = key })
		rcv := newReceiver(t, 200)
		sub := f.subscribe(subscription.CreateRequest{Event: "*", WebhookURL: rcv.URL, Secret: "plain-secret-123"})
		var stored string
		s.DB().Table("subscriptions").Select("secret").Where("id = ?", sub.ID).Scan(&stored)
		if !strings.HasPrefix(stored, "sealed:v1:") || strings.Contains(stored, "plain-secret-123") {
			t.Fatalf("secret stored as %q", stored)
		}
		f.handle(f.event("instance.started", "leave", nil))
		f.deliverOnce()
		r := rcv.request(0)
		m := hmac.New(sha256.New, []byte("plain-secret-123"))
		m.Write(r.Body)
		if r.Header.Get("X-Halley-Signature") != "sha256="+hex.EncodeToString(m.Sum(nil)) {
			t.Fatal("sealed secret did not sign with the plain secret")
		}

		// A replica with another key cannot sign: the attempt fails without sending, and says why.
		other := subscription.New(s, subscription.Options{Clock: f.clock, Logger: testkit.Quiet(), SecretKey: []byte("another key")})
		f.clock.Advance(time.Second) // so that the log's newest entry is this one
		f.handle(f.event("instance.completed", "leave", nil))
		if n, err := other.DeliverOnce(context.Background()); err != nil || n != 1 {
			t.Fatalf("deliver: %d %v", n, err)
		}
		ds := f.deliveries(sub.ID)
		if rcv.count() != 1 || ds[0].Event != "instance.completed" || ds[0].Status != model.DeliveryPending || !strings.Contains(ds[0].LastError, "unable to sign") || strings.Contains(ds[0].LastError, "plain-secret") {
			t.Fatalf("wrong key: receiver saw %d, delivery %+v", rcv.count(), ds[0])
		}
	})
}

func TestDeleteDropsPendingDeliveries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		f := newFixture(t, s, nil)
		rcv := newReceiver(t, 200)
		sub := f.subscribe(subscription.CreateRequest{Event: "*", WebhookURL: rcv.URL})
		f.handle(f.event("instance.started", "leave", nil))
		if err := f.svc.Delete(context.Background(), admin, sub.ID); err != nil {
			t.Fatal(err)
		}
		if n := f.deliverOnce(); n != 0 || rcv.count() != 0 {
			t.Fatalf("delivered for a deleted subscription: %d", n)
		}
		if _, _, err := f.svc.Deliveries(context.Background(), model.DefaultTenant, sub.ID, model.Page{Limit: 10}); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("deliveries of a deleted subscription: %v", err)
		}
	})
}

// TestRun: the loop delivers as soon as the outbox handler adds deliveries (no poll wait), and stops with ctx.
func TestRun(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	attempts := make(chan model.DeliveryResult, 10)
	f := newFixture(t, s, func(o *subscription.Options) { o.OnAttempt = func(r model.DeliveryResult) { attempts <- r } })
	rcv := newReceiver(t, 200)
	sub := f.subscribe(subscription.CreateRequest{Event: "*", WebhookURL: rcv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.svc.Run(ctx) }()
	f.handle(f.event("instance.started", "leave", nil))
	select {
	case r := <-attempts:
		if r.Status != model.DeliveryDelivered {
			t.Fatalf("attempt: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not deliver")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
	if ds := f.deliveries(sub.ID); ds[0].Status != model.DeliveryDelivered {
		t.Fatalf("delivery: %+v", ds[0])
	}
}

// BenchmarkWants: the engine asks on every event of every instance, inside its transactions.
func BenchmarkWants(b *testing.B) {
	s, err := store.Open(context.Background(), store.Config{URL: "sqlite://" + filepath.Join(b.TempDir(), "halley.db"), Logger: testkit.Quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	svc := subscription.New(s, subscription.Options{Logger: testkit.Quiet()})
	b.Run("none", func(b *testing.B) {
		for b.Loop() {
			svc.Wants(model.DefaultTenant, "task.created", "leave")
		}
	})
	for i, ev := range model.Events {
		if _, err := svc.Create(context.Background(), admin, subscription.CreateRequest{Event: ev, WebhookURL: "https://h.example.com/" + strconv.Itoa(i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("miss", func(b *testing.B) {
		for b.Loop() {
			svc.Wants("other", "task.created", "leave")
		}
	})
	b.Run("hit", func(b *testing.B) {
		for b.Loop() {
			svc.Wants(model.DefaultTenant, "task.reminder", "leave")
		}
	})
}

// tableResolver answers from a table; a name with several answers gives the next one on each lookup (the last
// repeats), which is how DNS rebinding looks from Halley.
type tableResolver struct {
	mu    sync.Mutex
	table map[string][]string
	calls map[string]int
}

func (r *tableResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	answers, ok := r.table[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(r.calls[host], len(answers)-1)
	r.calls[host]++
	return []netip.Addr{netip.MustParseAddr(answers[i])}, nil
}

func TestWebhookAddressGuard(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rec := newReceiver(t, 200)
		_, port, _ := net.SplitHostPort(rec.Listener.Addr().String())
		res := &tableResolver{calls: map[string]int{}, table: map[string][]string{
			"loop.example.test":   {"127.0.0.1"},
			"rebind.example.test": {"93.184.216.34", "127.0.0.1"},
		}}
		// The default guard: no HALLEY_OUTBOUND_ALLOW.
		f := newFixture(t, s, func(o *subscription.Options) { o.Outbound = outbound.New(outbound.Options{Resolver: res}) })
		ctx := context.Background()

		for _, u := range []string{"http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:" + port + "/hook",
			"http://[::1]:" + port + "/hook", "http://loop.example.test:" + port + "/hook", "https://10.0.0.8/hook"} {
			_, err := f.svc.Create(ctx, admin, subscription.CreateRequest{Event: "*", WebhookURL: u})
			var me *model.Error
			if !errors.As(err, &me) || me.Kind != model.EUNPROCESSABLE || me.Code != "address_not_allowed" {
				t.Errorf("subscribe %s: %v, want 422 address_not_allowed", u, err)
			}
		}
		if subs, _, err := f.svc.List(ctx, model.DefaultTenant, model.Page{Limit: 10}); err != nil || len(subs) != 0 {
			t.Fatalf("refused subscriptions were stored: %d %v", len(subs), err)
		}

		// A name that was public when subscribed and is loopback when delivered: refused at connect time.
		sub := f.subscribe(subscription.CreateRequest{Event: "*", WebhookURL: "http://rebind.example.test:" + port + "/hook"})
		f.handle(f.event("instance.completed", "leave", nil))
		if n := f.deliverOnce(); n != 1 {
			t.Fatalf("claimed %d", n)
		}
		d := f.deliveries(sub.ID)[0]
		if d.Status != model.DeliveryPending || d.StatusCode != 0 || !strings.Contains(d.LastError, "127.0.0.1") ||
			!strings.Contains(d.LastError, "HALLEY_OUTBOUND_ALLOW") {
			t.Fatalf("delivery %+v, want a pending attempt refused for 127.0.0.1", d)
		}
		if rec.count() != 0 {
			t.Fatalf("the loopback receiver got %d requests", rec.count())
		}
	})
}
