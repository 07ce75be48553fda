package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/engine/enginetest"
	"github.com/halley-bpm/halley/service/outbound"
	"github.com/halley-bpm/halley/service/outbox"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/subscription"
)

// subsEnv is the test server with subscriptions wired as the composition root wires them.
func subsEnv(t *testing.T, s *store.Store) (*env, *subscription.Service, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Now().UTC())
	svc := subscription.New(s, subscription.Options{Clock: clk, Logger: testkit.Quiet(), Jitter: func() float64 { return 0 },
		Outbound: loopbackOutbound(t)})
	e := newEnvWith(t, s, wiring{subs: svc}, nil)
	return e, svc, clk
}

// loopbackOutbound is the outbound client of a deployment with HALLEY_OUTBOUND_ALLOW=127.0.0.1: the receivers of
// these tests are httptest servers on loopback, which the default refuses.
func loopbackOutbound(t *testing.T) *outbound.Client {
	t.Helper()
	allow, err := outbound.ParseAllow("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return outbound.New(outbound.Options{Allow: allow})
}

// hookReceiver records webhook requests and answers with the statuses of its script (the last repeats).
type hookReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	heads  []http.Header
	script []int
}

func newHookReceiver(t *testing.T, script ...int) *hookReceiver {
	t.Helper()
	h := &hookReceiver{script: script}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.bodies = append(h.bodies, b)
		h.heads = append(h.heads, r.Header.Clone())
		status := h.script[min(len(h.bodies), len(h.script))-1]
		h.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hookReceiver) got() ([][]byte, []http.Header) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]byte{}, h.bodies...), append([]http.Header{}, h.heads...)
}

// newDispatcher is an outbox dispatcher of the handlers, for a test to run by hand (dispatch).
func newDispatcher(t *testing.T, s *store.Store, hs outbox.Handlers, opts outbox.Options) *outbox.Dispatcher {
	t.Helper()
	d, err := outbox.New(s, hs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// dispatch runs one outbox batch. On SQLite the dispatch holds the write lock while the event handler writes the
// deliveries, which works only inside the dispatch's own transaction (handed to handlers in the context); the
// deadline turns a missing hand-over into a quick, clear failure instead of a long lock wait.
func dispatch(t *testing.T, d *outbox.Dispatcher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.DispatchOnce(ctx); err != nil {
		t.Fatalf("dispatch (does DispatchOutbox hand its transaction to the handlers through the context?): %v", err)
	}
}

func TestSubscriptionsCRUDAndValidation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e, _, clk := subsEnv(t, s)
		e.publish("leave", []any{start(M{"kind": "manual"}), M{"id": "end", "type": "end"}}, []any{edge("start", "end")})

		r := e.do("POST", "/api/v1/subscriptions", e.admin, M{"event": "task.created", "template": "leave", "webhook_url": "https://hooks.example.com/a", "secret": "s3cr3t-value"}, nil)
		if r.Status != 201 || r.JSON["id"] == "" || r.JSON["event"] != "task.created" || r.JSON["template"] != "leave" || r.JSON["webhook_url"] != "https://hooks.example.com/a" ||
			r.JSON["has_secret"] != true || r.JSON["created_by"] != "admin" || r.JSON["created_at"] == nil {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		a := r.JSON["id"].(string)
		clk.Advance(time.Second) // listed oldest first
		r = e.do("POST", "/api/v1/subscriptions", e.admin, M{"event": "*", "plugin": "notify-erp"}, nil)
		if r.Status != 201 || r.JSON["plugin"] != "notify-erp" || r.JSON["has_secret"] != false || r.JSON["webhook_url"] != nil {
			t.Fatalf("create plugin subscription: %d %s", r.Status, r.Body)
		}
		b := r.JSON["id"].(string)

		long := "https://example.com/" + strings.Repeat("p", 2040)
		for _, tc := range []struct {
			name   string
			body   any
			status int
			code   string
		}{
			{"malformed", `{"event":`, 400, "malformed_json"},
			{"unknown field", M{"event": "*", "webhook_url": "https://x.example.com", "url": "x"}, 400, "unknown_field"},
			{"no event", M{"webhook_url": "https://x.example.com"}, 400, "invalid_event"},
			{"unknown event", M{"event": "task.exploded", "webhook_url": "https://x.example.com"}, 400, "invalid_event"},
			{"no target", M{"event": "*"}, 400, "invalid_target"},
			{"both targets", M{"event": "*", "plugin": "p", "webhook_url": "https://x.example.com"}, 400, "invalid_target"},
			{"file URL", M{"event": "*", "webhook_url": "file:///etc/passwd"}, 400, "invalid_webhook_url"},
			{"no host", M{"event": "*", "webhook_url": "http://"}, 400, "invalid_webhook_url"},
			{"too long", M{"event": "*", "webhook_url": long}, 400, "invalid_webhook_url"},
			{"bad plugin", M{"event": "*", "plugin": "Bad Name"}, 400, "invalid_plugin"},
			{"secret for a plugin", M{"event": "*", "plugin": "p", "secret": "x"}, 400, "invalid_secret"},
			{"unknown template", M{"event": "*", "template": "nope", "webhook_url": "https://x.example.com"}, 422, "unknown_template"},
			{"duplicate", M{"event": "task.created", "template": "leave", "webhook_url": "https://hooks.example.com/a"}, 409, "subscription_exists"},
			// The outbound guard (this deployment allows 127.0.0.1 only, for its test receivers).
			{"cloud metadata", M{"event": "*", "webhook_url": "http://169.254.169.254/latest/meta-data/"}, 422, "address_not_allowed"},
			{"private", M{"event": "*", "webhook_url": "https://10.1.2.3/hook"}, 422, "address_not_allowed"},
			{"CGNAT", M{"event": "*", "webhook_url": "https://100.64.1.1/hook"}, 422, "address_not_allowed"},
			{"IPv6 loopback", M{"event": "*", "webhook_url": "http://[::1]:8080/hook"}, 422, "address_not_allowed"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				assertError(t, e.do("POST", "/api/v1/subscriptions", e.admin, tc.body, nil), tc.status, tc.code)
			})
		}

		r = e.do("GET", "/api/v1/subscriptions?limit=1", e.admin, nil, nil)
		items, _ := r.JSON["items"].([]any)
		if r.Status != 200 || len(items) != 1 || items[0].(M)["id"] != a || r.JSON["next_cursor"] == "" {
			t.Fatalf("list page 1: %s", r.Body)
		}
		r = e.do("GET", "/api/v1/subscriptions?limit=1&cursor="+r.JSON["next_cursor"].(string), e.admin, nil, nil)
		if items := r.JSON["items"].([]any); len(items) != 1 || items[0].(M)["id"] != b || r.JSON["next_cursor"] != "" {
			t.Fatalf("list page 2: %s", r.Body)
		}
		r = e.do("GET", "/api/v1/subscriptions", e.admin, nil, nil)
		if strings.Contains(string(r.Body), "s3cr3t-value") || strings.Contains(string(r.Body), `"secret"`) {
			t.Fatalf("the secret leaks: %s", r.Body)
		}
		if r = e.do("GET", "/api/v1/subscriptions/"+a, e.admin, nil, nil); r.Status != 200 || r.JSON["has_secret"] != true || strings.Contains(string(r.Body), "s3cr3t") {
			t.Fatalf("get: %s", r.Body)
		}

		if r = e.do("DELETE", "/api/v1/subscriptions/"+a, e.admin, nil, nil); r.Status != 204 || len(r.Body) != 0 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("DELETE", "/api/v1/subscriptions/"+a, e.admin, nil, nil), 404, "not_found")
		assertError(t, e.do("GET", "/api/v1/subscriptions/"+a, e.admin, nil, nil), 404, "not_found")
		assertError(t, e.do("GET", "/api/v1/subscriptions/"+a+"/deliveries", e.admin, nil, nil), 404, "not_found")
		assertError(t, e.do("GET", "/api/v1/subscriptions/"+b+"/deliveries?limit=0", e.admin, nil, nil), 400, "invalid_limit")
		if r = e.do("GET", "/api/v1/subscriptions", e.admin, nil, nil); len(r.JSON["items"].([]any)) != 1 {
			t.Fatalf("after delete: %s", r.Body)
		}

		// Non-admins may do none of it.
		bob := e.mkUser("bob")
		for _, rq := range []struct{ method, path string }{
			{"POST", "/api/v1/subscriptions"}, {"GET", "/api/v1/subscriptions"}, {"GET", "/api/v1/subscriptions/" + b},
			{"DELETE", "/api/v1/subscriptions/" + b}, {"GET", "/api/v1/subscriptions/" + b + "/deliveries"},
		} {
			var body any
			if rq.method == "POST" {
				body = M{"event": "*", "webhook_url": "https://evil.example.com"}
			}
			assertError(t, e.do(rq.method, rq.path, bob, body, nil), 403, "admin_required")
		}
		assertError(t, e.do("GET", "/api/v1/subscriptions", "", nil, nil), 401, "missing_token")
		if r = e.do("GET", "/api/v1/subscriptions/"+b, e.admin, nil, nil); r.Status != 200 {
			t.Fatal("a refused delete must not delete")
		}
	})
}

// TestWebhookEndToEnd: an instance runs through the engine, its events go through the outbox to the delivery
// loop, a receiver that fails twice gets them signed, and the delivery log says what happened.
func TestWebhookEndToEnd(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e, svc, clk := subsEnv(t, s)
		bob := e.mkUser("bob")
		e.publish("leave", []any{start(M{"kind": "manual"}), M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}}, M{"id": "end", "type": "end"}},
			[]any{edge("start", "lead"), edge("lead", "end")})
		flaky := newHookReceiver(t, 500, 500, 200)
		steady := newHookReceiver(t, 200)
		r := e.do("POST", "/api/v1/subscriptions", e.admin, M{"event": "task.created", "template": "leave", "webhook_url": flaky.URL + "/hook", "secret": "hmac-key-1"}, nil)
		if r.Status != 201 {
			t.Fatalf("subscribe: %s", r.Body)
		}
		flakyID := r.JSON["id"].(string)
		r = e.do("POST", "/api/v1/subscriptions", e.admin, M{"event": "instance.completed", "webhook_url": steady.URL}, nil)
		steadyID := r.JSON["id"].(string)

		r = e.do("POST", "/api/v1/instances", bob, M{"template": "leave"}, nil)
		if r.Status != 201 {
			t.Fatalf("start: %s", r.Body)
		}
		inst := r.JSON["id"].(string)
		task := e.do("GET", "/api/v1/tasks", bob, nil, nil).JSON["items"].([]any)[0].(M)["id"].(string)
		if r = e.do("POST", "/api/v1/tasks/"+task+"/approve", bob, M{}, nil); r.Status != 200 {
			t.Fatalf("approve: %s", r.Body)
		}
		// Only the wanted events reached the outbox: task.created and instance.completed.
		var kinds []string
		s.DB().Table("outbox").Where("kind = ?", model.OutboxEvent).Order("seq").Pluck("ref", &kinds)
		if strings.Join(kinds, ",") != "task.created,instance.completed" {
			t.Fatalf("event outbox rows: %v", kinds)
		}
		ignore := func(context.Context, []model.OutboxItem) error { return nil }
		d := newDispatcher(t, s, outbox.Handlers{model.OutboxEvent: svc.OutboxHandler(), model.OutboxTimerArm: ignore, model.OutboxTimerCancel: ignore},
			outbox.Options{Logger: testkit.Quiet()})
		dispatch(t, d)

		deliver := func() {
			t.Helper()
			if _, err := svc.DeliverOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		deliver() // flaky: 500; steady: 200
		clk.Advance(4 * time.Second)
		deliver() // too early for flaky's retry (5 s)
		if bodies, _ := flaky.got(); len(bodies) != 1 {
			t.Fatalf("retried before the back-off: %d requests", len(bodies))
		}
		clk.Advance(time.Second)
		deliver() // flaky: 500 again; next in 30 s
		clk.Advance(30 * time.Second)
		deliver() // flaky: 200

		bodies, heads := flaky.got()
		if len(bodies) != 3 {
			t.Fatalf("flaky receiver got %d requests, want 3", len(bodies))
		}
		var body struct {
			Event    string `json:"event"`
			Instance struct {
				ID       string `json:"id"`
				Template string `json:"template"`
			} `json:"instance"`
			NodeID string `json:"node_id"`
			Task   struct {
				ID       string `json:"id"`
				Assignee string `json:"assignee"`
			} `json:"task"`
		}
		if err := json.Unmarshal(bodies[2], &body); err != nil {
			t.Fatal(err)
		}
		if body.Event != "task.created" || body.Instance.ID != inst || body.Instance.Template != "leave" || body.NodeID != "lead" || body.Task.ID != task || body.Task.Assignee != "bob" {
			t.Fatalf("body: %s", bodies[2])
		}
		m := hmac.New(sha256.New, []byte("hmac-key-1"))
		m.Write(bodies[2])
		if heads[2].Get("X-Halley-Signature") != "sha256="+hex.EncodeToString(m.Sum(nil)) || heads[2].Get("X-Halley-Event") != "task.created" {
			t.Fatalf("headers: %v", heads[2])
		}
		if sb, sh := steady.got(); len(sb) != 1 || sh[0].Get("X-Halley-Signature") != "" || !strings.Contains(string(sb[0]), `"status":"completed"`) {
			t.Fatalf("steady receiver: %d %s", len(sb), sb)
		}

		r = e.do("GET", "/api/v1/subscriptions/"+flakyID+"/deliveries", e.admin, nil, nil)
		items := r.JSON["items"].([]any)
		if r.Status != 200 || len(items) != 1 {
			t.Fatalf("delivery log: %s", r.Body)
		}
		dl := items[0].(M)
		if dl["status"] != "delivered" || dl["attempts"] != float64(3) || dl["status_code"] != float64(200) || dl["last_error"] != "" ||
			dl["event"] != "task.created" || dl["instance_id"] != inst || dl["finished_at"] == nil || dl["last_attempt_at"] == nil || dl["id"] != heads[0].Get("X-Halley-Delivery") {
			t.Fatalf("delivery log entry: %s", r.Body)
		}
		r = e.do("GET", "/api/v1/subscriptions/"+steadyID+"/deliveries", e.admin, nil, nil)
		if items := r.JSON["items"].([]any); len(items) != 1 || items[0].(M)["status"] != "delivered" || items[0].(M)["attempts"] != float64(1) {
			t.Fatalf("steady log: %s", r.Body)
		}
	})
}

func TestDeliveryLogShowsFailures(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e, svc, clk := subsEnv(t, s)
		e.publish("leave", []any{start(M{"kind": "manual"}), M{"id": "end", "type": "end"}}, []any{edge("start", "end")})
		down := newHookReceiver(t, 503)
		r := e.do("POST", "/api/v1/subscriptions", e.admin, M{"event": "instance.started", "webhook_url": down.URL}, nil)
		id := r.JSON["id"].(string)
		e.do("POST", "/api/v1/instances", e.admin, M{"template": "leave"}, nil)
		d := newDispatcher(t, s, outbox.Handlers{model.OutboxEvent: svc.OutboxHandler()},
			outbox.Options{Logger: testkit.Quiet()})
		dispatch(t, d)
		for range 8 {
			if n, err := svc.DeliverOnce(context.Background()); err != nil || n != 1 {
				t.Fatalf("deliver: %d %v", n, err)
			}
			clk.Advance(7 * time.Hour)
		}
		r = e.do("GET", "/api/v1/subscriptions/"+id+"/deliveries", e.admin, nil, nil)
		dl := r.JSON["items"].([]any)[0].(M)
		if dl["status"] != "failed" || dl["attempts"] != float64(8) || dl["status_code"] != float64(503) || !strings.HasPrefix(dl["last_error"].(string), "HTTP 503") ||
			dl["next_attempt_at"] != nil {
			t.Fatalf("failed delivery: %s", r.Body)
		}
	})
}

// TestPluginSubscription: an admin subscribes a plugin to an event; the delivery queues a plugin run with the
// event as its context, the executor runs it (a real child process), and its result changes no instance.
func TestPluginSubscription(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rec := newRuns()
		clk := clock.NewFake(time.Now().UTC())
		eventPlugins, err := engine.NewEventPlugins(s, enginetest.Nobody{}) // the executor polls: no wake-up needed
		if err != nil {
			t.Fatal(err)
		}
		svc := subscription.New(s, subscription.Options{Clock: clk, Logger: testkit.Quiet(), Jitter: func() float64 { return 0 }, Plugins: s, PluginRuns: eventPlugins,
			Outbound: loopbackOutbound(t)})
		e := newEnvWith(t, s, wiring{subs: svc}, withPlugins(t, rec))
		marker := filepath.Join(t.TempDir(), "events")
		e.upload("audit", "python", "5s", []byte(fmt.Sprintf(`import json, sys
d = json.load(sys.stdin)
open(%q, "a").write(d["phase"] + " " + d["context"]["event"] + " " + d["context"]["instance"]["id"] + "\n")
print("{}")
`, marker)), e.admin)
		if r := e.do("POST", "/api/v1/subscriptions", e.admin, M{"event": "instance.completed", "plugin": "audit"}, nil); r.Status != 201 {
			t.Fatalf("subscribe: %s", r.Body)
		}
		assertError(t, e.do("POST", "/api/v1/subscriptions", e.admin, M{"event": "instance.completed", "plugin": "nope"}, nil), 422, "")
		e.publish("quick", []any{start(M{"kind": "manual"}), M{"id": "end", "type": "end"}}, []any{edge("start", "end")})
		inst := e.do("POST", "/api/v1/instances", e.admin, M{"template": "quick"}, nil).JSON["id"].(string)
		d := newDispatcher(t, s, outbox.Handlers{model.OutboxEvent: svc.OutboxHandler()}, outbox.Options{Logger: testkit.Quiet()})
		dispatch(t, d)
		if _, err := svc.DeliverOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		rec.wait(t, 1)
		b, _ := os.ReadFile(marker)
		if string(b) != "event instance.completed "+inst+"\n" {
			t.Fatalf("the plugin saw %q", b)
		}
		runs := e.do("GET", "/api/v1/plugins/audit/runs", e.admin, nil, nil).JSON["items"].([]any)
		if len(runs) != 1 || runs[0].(M)["status"] != "succeeded" || runs[0].(M)["phase"] != "event" {
			t.Fatalf("runs: %v", runs)
		}
		if st := e.instance(inst).JSON["status"]; st != "completed" {
			t.Fatalf("instance: %v", st)
		}
	})
}
