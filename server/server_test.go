package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/audit"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/engine/enginetest"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/notify"
	"github.com/halley-bpm/halley/service/rules"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/subprocess"
	"github.com/halley-bpm/halley/service/subscription"
	"github.com/halley-bpm/halley/service/template"
	"github.com/halley-bpm/halley/service/trigger"
)

type env struct {
	t        *testing.T
	url      string
	store    *store.Store
	admin    string // admin's token
	clock    *testClock
	engine   *engine.Engine
	triggers *trigger.Service
}

type resp struct {
	Status int
	Body   []byte
	Header http.Header
	JSON   map[string]any
}

func (r resp) code() string {
	e, _ := r.JSON["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func newEnv(t *testing.T, s *store.Store, mod func(*server.Deps)) *env {
	t.Helper()
	return newEnvWith(t, s, wiring{}, mod)
}

// wiring is what a test chooses about the services behind the server; the zero value is the plain env.
type wiring struct {
	// clock, when set, is the env's clock (a local executor built before the env reads it too).
	clock *testClock
	// engine, when set, replaces the engine's default options (the env's clock, a test callback key) and the
	// public URL http://halley.test with none; the template service runs on the same clock.
	engine *engine.Options
	// subs is the subscription service: the engine asks it which events are wanted, the server serves it.
	subs *subscription.Service
	// executor is the engine's local plugin executor (engine.NoExecutor when unset).
	executor engine.LocalExecutor
	// notify is the notification service: it wants the events it tells people of, and the server serves it.
	notify *notify.Service
}

// sinks want an event when one of them does (the composition root's eventSinks).
type sinks []engine.EventSink

func (s sinks) Wants(tenant, event, template string) bool {
	for _, x := range s {
		if x.Wants(tenant, event, template) {
			return true
		}
	}
	return false
}

// newEnvWith builds the services in the composition root's order (templates with the trigger publisher, the
// engine, the trigger service) and serves them; mod adjusts the server's Deps before it is built.
func newEnvWith(t *testing.T, s *store.Store, w wiring, mod func(*server.Deps)) *env {
	t.Helper()
	e := &env{t: t, store: s, clock: w.clock}
	if e.clock == nil {
		e.clock = &testClock{t: time.Now()}
	}
	ids := identity.New(s, identity.Options{Secret: []byte("test-secret-test-secret-test-secret"), TokenTTL: 24 * time.Hour,
		BcryptCost: bcrypt.MinCost, Clock: e.clock})
	if _, err := ids.Bootstrap(context.Background(), "admin-pw-1", false); err != nil {
		t.Fatal(err)
	}
	opts, publicURL := engine.Options{Clock: e.clock, CallbackKey: []byte("test-callback-key")}, "http://halley.test"
	if w.engine != nil {
		opts, publicURL = *w.engine, ""
	}
	sched := scheduler.NewMemory(scheduler.Options{Clock: opts.Clock}) // crontab fires are armed here; tests fire them with fireDue
	t.Cleanup(func() { sched.Close() })
	pub, err := trigger.NewPublisher(s, sched, trigger.Options{Clock: opts.Clock})
	if err != nil {
		t.Fatal(err)
	}
	tpl := template.New(s, template.Options{Clock: opts.Clock, Publishers: []template.Publisher{pub, subprocess.NewChecker(s)}})
	deps := enginetest.Deps(t, s, tpl, s)
	deps.URLs = server.NewURLs(publicURL) // the router's own: tests follow the callback and result URLs the engine hands out
	events := sinks{enginetest.NoEvents{}}
	if w.subs != nil {
		events = append(events, w.subs)
	}
	if w.notify != nil {
		deps.InStep = w.notify // as in the composition root: in the step, the outbox when it cannot
		s.OnUserChange(w.notify.UserChanged)
	}
	deps.Events = events
	if w.executor != nil {
		deps.Executor = w.executor
	}
	eng, err := engine.New(deps, opts)
	if err != nil {
		t.Fatal(err)
	}
	trg, err := trigger.New(trigger.Deps{Store: s, Templates: tpl, Engine: eng, Publisher: pub}, trigger.Options{Clock: opts.Clock})
	if err != nil {
		t.Fatal(err)
	}
	e.engine, e.triggers = eng, trg
	d := server.Deps{Identity: ids, Templates: tpl, Engine: eng, Triggers: trg, Plugins: s, Subscriptions: w.subs, Notify: w.notify, Idempotency: s,
		Rules: deps.Rules.(*rules.Service),
		Ready: map[string]server.Pinger{"database": s}, DBStats: s.Stats, BodyLimit: 4096,
		Audit: audit.New(s, audit.Options{Clock: opts.Clock, Logger: testkit.Quiet()})}
	if mod != nil {
		mod(&d)
	}
	srv, err := server.New(d)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	e.url = ts.URL
	r := e.do("POST", "/api/v1/auth/login", "", map[string]string{"username": "admin", "password": "admin-pw-1"}, nil)
	if r.Status != 200 {
		t.Fatalf("admin login: %d %s", r.Status, r.Body)
	}
	e.admin = r.JSON["token"].(string)
	return e
}

func (e *env) do(method, path, token string, body any, hdr map[string]string) resp {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, e.url+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	r := resp{Status: res.StatusCode, Body: b, Header: res.Header}
	_ = json.Unmarshal(b, &r.JSON) // a body that is not JSON is left empty: callers check the status
	return r
}

func (e *env) mkUser(name string, roles ...string) string {
	e.t.Helper()
	r := e.do("POST", "/api/v1/users", e.admin, map[string]any{"username": name, "password": "pw-" + name + "-123", "roles": roles,
		"password_change_required": false}, nil)
	if r.Status != 201 {
		e.t.Fatalf("create %s: %d %s", name, r.Status, r.Body)
	}
	r = e.do("POST", "/api/v1/auth/login", "", map[string]string{"username": name, "password": "pw-" + name + "-123"}, nil)
	return r.JSON["token"].(string)
}

// testClock is the test server's clock: tests move it with set and advance while the server reads it.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}
func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
func (c *testClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (c *testClock) NewTimer(d time.Duration) clock.Timer   { return clock.Real{}.NewTimer(d) }

// timerHandlers routes timers as the composition root does: the engine's kinds to it, crontab starts to triggers.
func timerHandlers(eng *engine.Engine, trg *trigger.Service) scheduler.Handlers {
	hs := scheduler.Handlers{model.TimerCrontab: trg}
	for _, k := range engine.TimerKinds {
		hs[k] = eng
	}
	return hs
}

// fireDue hands every pending timer due by the env's clock to the timers' handlers, as the scheduler's loop
// would, and returns how many it handed over.
func (e *env) fireDue() int {
	e.t.Helper()
	rows, err := e.store.PendingTimers(context.Background(), "", 10000)
	if err != nil {
		e.t.Fatal(err)
	}
	var due []scheduler.Due
	for _, r := range rows {
		if !r.DueAt.After(e.clock.Now()) {
			due = append(due, scheduler.Due{ID: r.ID, Due: r.DueAt, Attempt: 1})
		}
	}
	if len(due) == 0 {
		return 0
	}
	route, err := scheduler.Route(e.store, timerHandlers(e.engine, e.triggers))
	if err != nil {
		e.t.Fatal(err)
	}
	for i, err := range route(context.Background(), due) {
		if err != nil {
			e.t.Fatalf("timer %s: %v", due[i].ID, err)
		}
	}
	return len(due)
}

// assertError checks the API.md error shape: status, error.code, a message and a details object.
func assertError(t *testing.T, r resp, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	e, ok := r.JSON["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object: %s", r.Body)
	}
	if code != "" && e["code"] != code {
		t.Fatalf("error.code %v, want %s: %s", e["code"], code, r.Body)
	}
	if m, _ := e["message"].(string); m == "" {
		t.Fatalf("empty error.message: %s", r.Body)
	}
	if _, ok := e["details"].(map[string]any); !ok {
		t.Fatalf("error.details must be an object: %s", r.Body)
	}
}

func TestLoginAndTokens(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		assertError(t, e.do("POST", "/api/v1/auth/login", "", map[string]string{"username": "admin", "password": "nope"}, nil), 401, "invalid_credentials")
		assertError(t, e.do("POST", "/api/v1/auth/login", "", map[string]string{"username": "ghost", "password": "nope"}, nil), 401, "invalid_credentials")

		r := e.do("GET", "/api/v1/me", e.admin, nil, nil)
		if r.Status != 200 || r.JSON["username"] != "admin" || fmt.Sprint(r.JSON["roles"]) != "[admin]" || r.JSON["tenant"] != "default" {
			t.Fatalf("/me = %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("GET", "/api/v1/me", "", nil, nil), 401, "missing_token")
		assertError(t, e.do("GET", "/api/v1/me", "garbage.token.here", nil, nil), 401, "invalid_token")
		// A token signed with another secret is refused.
		other := identity.New(s, identity.Options{Secret: []byte("another-secret-another-secret-1234")})
		forged, _, _ := other.Issue(&model.User{TenantID: "default", Username: "admin", Roles: []string{"admin"}, AccountID: "forged-account"})
		assertError(t, e.do("GET", "/api/v1/me", forged, nil, nil), 401, "invalid_token")
		// Verified tokens are cached: a second use answers the same, and a token differing in one character is
		// verified afresh (and refused).
		if r := e.do("GET", "/api/v1/me", e.admin, nil, nil); r.Status != 200 || r.JSON["username"] != "admin" || fmt.Sprint(r.JSON["roles"]) != "[admin]" {
			t.Fatalf("/me again = %d %s", r.Status, r.Body)
		}
		i := len(e.admin) - 10 // inside the signature, away from the last character's padding bits
		flip := byte('A')
		if e.admin[i] == 'A' {
			flip = 'B'
		}
		assertError(t, e.do("GET", "/api/v1/me", e.admin[:i]+string(flip)+e.admin[i+1:], nil, nil), 401, "invalid_token")
		// Expiry: move the server's clock past the TTL (the cached token expires too).
		e.advance(25 * time.Hour)
		assertError(t, e.do("GET", "/api/v1/me", e.admin, nil, nil), 401, "token_expired")
	})
}

func TestAdminGuardAndAPITokens(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob := e.mkUser("bob")
		assertError(t, e.do("POST", "/api/v1/users", bob, map[string]any{"username": "eve", "password": "12345678"}, nil), 403, "admin_required")
		assertError(t, e.do("POST", "/api/v1/tokens", bob, map[string]any{"name": "x"}, nil), 403, "admin_required")
		if _, err := s.GetUser(context.Background(), "default", "eve"); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatal("a refused request must not create the user")
		}

		r := e.do("POST", "/api/v1/tokens", e.admin, map[string]any{"name": "erp", "roles": []string{"erp"}}, nil)
		tok, _ := r.JSON["token"].(string)
		if r.Status != 201 || !strings.HasPrefix(tok, "hly_") {
			t.Fatalf("create token: %d %s", r.Status, r.Body)
		}
		r = e.do("GET", "/api/v1/me", tok, nil, nil)
		if r.Status != 200 || r.JSON["username"] != "token:erp" || r.JSON["token"] != true {
			t.Fatalf("/me with API token: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("GET", "/api/v1/me", tok+"x", nil, nil), 401, "invalid_token")
		// Stored hashed: the plaintext is nowhere in the table.
		var n int64
		s.DB().Table("api_tokens").Where("token_hash = ?", tok).Count(&n)
		if n != 0 {
			t.Fatal("API token stored in plaintext")
		}
		assertError(t, e.do("POST", "/api/v1/tokens", e.admin, map[string]any{"name": ""}, nil), 400, "invalid_name")
	})
}

func TestUsersEndpoints(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		r := e.do("POST", "/api/v1/departments", e.admin, map[string]any{"name": "eng", "leader": "admin"}, nil)
		if r.Status != 201 || r.JSON["leader"] != "admin" {
			t.Fatalf("department: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("POST", "/api/v1/departments", e.admin, map[string]any{"name": "ops", "leader": "ghost"}, nil), 400, "unknown_leader")
		r = e.do("POST", "/api/v1/users", e.admin, map[string]any{"username": "carol", "password": "pw-carol-123", "display_name": "Carol",
			"roles": []string{"dba"}, "department": "eng", "manager": "admin"}, nil)
		if r.Status != 201 || r.JSON["display_name"] != "Carol" || r.JSON["password_hash"] != nil || strings.Contains(string(r.Body), "$2a$") {
			t.Fatalf("create user: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("POST", "/api/v1/users", e.admin, map[string]any{"username": "carol", "password": "pw-carol-123"}, nil), 409, "user_exists")
		assertError(t, e.do("POST", "/api/v1/users", e.admin, map[string]any{"username": "../x", "password": "pw-carol-123"}, nil), 400, "invalid_username")
		assertError(t, e.do("POST", "/api/v1/users", e.admin, map[string]any{"username": "dan", "password": "short"}, nil), 422, "weak_password")
		assertError(t, e.do("POST", "/api/v1/users", e.admin, map[string]any{"username": "dan", "password": "七个字符的密码"}, nil), 422, "weak_password")
		assertError(t, e.do("POST", "/api/v1/users", e.admin, map[string]any{"username": "dan", "password": "pw-dan-1234", "roles": []string{"Bad Role"}}, nil), 400, "invalid_role")
		r = e.do("GET", "/api/v1/users/carol", e.admin, nil, nil)
		if r.Status != 200 || r.JSON["department"] != "eng" {
			t.Fatalf("get user: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("GET", "/api/v1/users/ghost", e.admin, nil, nil), 404, "not_found")
		r = e.do("GET", "/api/v1/users?limit=1", e.admin, nil, nil)
		if r.Status != 200 || len(r.JSON["items"].([]any)) != 1 || r.JSON["next_cursor"] != "admin" {
			t.Fatalf("page: %s", r.Body)
		}
		r = e.do("GET", "/api/v1/users?limit=1&cursor=admin", e.admin, nil, nil)
		if items := r.JSON["items"].([]any); len(items) != 1 || items[0].(map[string]any)["username"] != "carol" {
			t.Fatalf("page 2: %s", r.Body)
		}
		assertError(t, e.do("GET", "/api/v1/users?limit=0", e.admin, nil, nil), 400, "invalid_limit")
		r = e.do("GET", "/api/v1/users?role=dba", e.admin, nil, nil)
		if items := r.JSON["items"].([]any); len(items) != 1 {
			t.Fatalf("role filter: %s", r.Body)
		}
	})
}

func TestBadInput(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		assertError(t, e.do("POST", "/api/v1/users", e.admin, "{broken", nil), 400, "malformed_json")
		assertError(t, e.do("POST", "/api/v1/users", e.admin, "", nil), 400, "empty_body")
		assertError(t, e.do("POST", "/api/v1/users", e.admin, `{"username":"x","password":"12345678"} {}`, nil), 400, "malformed_json")
		assertError(t, e.do("POST", "/api/v1/users", e.admin, `{"username":"x","password":"12345678","isAdmin":true}`, nil), 400, "unknown_field")
		assertError(t, e.do("POST", "/api/v1/users", e.admin, `{"username":5}`, nil), 400, "invalid_field")
		assertError(t, e.do("POST", "/api/v1/users", e.admin, `[1,2]`, nil), 400, "malformed_json")
		big := `{"username":"x","password":"` + strings.Repeat("a", 5000) + `"}`
		assertError(t, e.do("POST", "/api/v1/users", e.admin, big, nil), 413, "body_too_large")
		// Without Content-Length (chunked), the limit holds while reading.
		req, _ := http.NewRequest("POST", e.url+"/api/v1/users", io.MultiReader(strings.NewReader(big)))
		req.ContentLength = -1
		req.Header.Set("Authorization", "Bearer "+e.admin)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 413 {
			t.Fatalf("chunked oversize body: %d", res.StatusCode)
		}
		assertError(t, e.do("GET", "/api/v1/nope", e.admin, nil, nil), 404, "route_not_found")
		assertError(t, e.do("DELETE", "/api/v1/me", e.admin, nil, nil), 405, "method_not_allowed")
		if n, _ := s.CountUsers(context.Background()); n != 1 {
			t.Fatalf("bad input changed data: %d users", n)
		}
	})
}

func TestIdempotency(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		body := map[string]any{"username": "ida", "password": "pw-ida-1234"}
		key := map[string]string{"Idempotency-Key": "create-ida"}
		first := e.do("POST", "/api/v1/users", e.admin, body, key)
		if first.Status != 201 {
			t.Fatalf("first: %d %s", first.Status, first.Body)
		}
		second := e.do("POST", "/api/v1/users", e.admin, body, key)
		if second.Status != 201 || !bytes.Equal(first.Body, second.Body) || second.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %s (first %s)", second.Status, second.Body, first.Body)
		}
		if n, _ := s.CountUsers(context.Background()); n != 2 {
			t.Fatalf("%d users after replay, want 2 (admin, ida)", n)
		}
		assertError(t, e.do("POST", "/api/v1/users", e.admin, map[string]any{"username": "other", "password": "pw-ida-1234"}, key), 422, "idempotency_key_reused")

		// Many concurrent requests with one key create exactly one user; the rest replay or are told to retry.
		var wg sync.WaitGroup
		codes := make(chan int, 20)
		body2 := map[string]any{"username": "race", "password": "pw-race-1234"}
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes <- e.do("POST", "/api/v1/users", e.admin, body2, map[string]string{"Idempotency-Key": "race"}).Status
			}()
		}
		wg.Wait()
		close(codes)
		for c := range codes {
			if c != 201 && c != 409 {
				t.Fatalf("concurrent idempotent request got %d", c)
			}
		}
		if _, err := s.GetUser(context.Background(), "default", "race"); err != nil {
			t.Fatal(err)
		}
		if n, _ := s.CountUsers(context.Background()); n != 3 {
			t.Fatalf("%d users, want 3", n)
		}
	})
}

type downPinger struct{}

func (downPinger) Ping(context.Context) error { return errors.New("connection refused") }

func TestOperations(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	e := newEnv(t, s, nil)
	r := e.do("GET", "/healthz", "", nil, nil)
	if r.Status != 200 {
		t.Fatalf("healthz %d", r.Status)
	}
	r = e.do("GET", "/readyz", "", nil, nil)
	if r.Status != 200 || r.JSON["checks"].(map[string]any)["database"] != "ok" {
		t.Fatalf("readyz %d %s", r.Status, r.Body)
	}
	r = e.do("GET", "/metrics", "", nil, nil)
	for _, want := range []string{`halley_http_requests_total{method="GET",route="/readyz",status="200"} 1`, "halley_http_request_duration_seconds_bucket", "halley_db_open_connections"} {
		if !strings.Contains(string(r.Body), want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
	down := newEnv(t, s, func(d *server.Deps) { d.Ready["redis"] = downPinger{} })
	r = down.do("GET", "/readyz", "", nil, nil)
	if r.Status != 503 || !strings.Contains(string(r.Body), "connection refused") {
		t.Fatalf("readyz with redis down: %d %s", r.Status, r.Body)
	}
	if r.Header.Get("X-Request-ID") == "" {
		t.Fatal("no request id")
	}
}

var ctx0 = context.Background()

// TestNewNamesTheMissingDependency: the server's required dependencies are checked when it is built; a missing
// one is an error naming it, not a nil dereferenced by the first request that needs it.
func TestNewNamesTheMissingDependency(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	var full server.Deps
	newEnv(t, s, func(d *server.Deps) { full = *d })
	if _, err := server.New(full); err != nil {
		t.Fatalf("complete deps: %v", err)
	}
	for name, drop := range map[string]func(*server.Deps){
		"Identity":    func(d *server.Deps) { d.Identity = nil },
		"Templates":   func(d *server.Deps) { d.Templates = nil },
		"Engine":      func(d *server.Deps) { d.Engine = nil },
		"Triggers":    func(d *server.Deps) { d.Triggers = nil },
		"Plugins":     func(d *server.Deps) { d.Plugins = nil },
		"Idempotency": func(d *server.Deps) { d.Idempotency = nil },
		"Audit":       func(d *server.Deps) { d.Audit = nil },
	} {
		d := full
		drop(&d)
		if srv, err := server.New(d); err == nil || srv != nil || !strings.Contains(err.Error(), name) {
			t.Errorf("without %s: New = %v, %v; want an error naming it", name, srv, err)
		}
	}
}
