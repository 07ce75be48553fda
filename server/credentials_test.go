package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/crypto/bcrypt"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/ratelimit"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/subscription"
)

// TestDeleteUserHTTP: DELETE /users/{username} is 204; the user's instances and history keep the name; their
// token stops at once; the last enabled admin cannot be deleted (409), nor can admins delete themselves (422).
func TestDeleteUserHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob := e.mkUser("bob")
		e.mkUser("carol")
		e.publish("leave", []any{start(M{"kind": "manual"}), M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"carol"}}},
			M{"id": "end", "type": "end"}}, []any{edge("start", "lead"), edge("lead", "end")})
		r := e.do("POST", "/api/v1/instances", bob, M{"template": "leave"}, nil)
		if r.Status != 201 {
			t.Fatal(r.Status, string(r.Body))
		}
		id := r.JSON["id"].(string)
		assertError(t, e.do("DELETE", "/api/v1/users/carol", bob, nil, nil), 403, "admin_required")
		if r := e.do("DELETE", "/api/v1/users/bob", e.admin, nil, nil); r.Status != 204 || len(r.Body) != 0 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("GET", "/api/v1/me", bob, nil, nil), 401, "invalid_token")
		assertError(t, e.do("GET", "/api/v1/users/bob", e.admin, nil, nil), 404, "")
		assertError(t, e.do("DELETE", "/api/v1/users/bob", e.admin, nil, nil), 404, "")
		assertError(t, e.login("bob", "pw-bob-123"), 401, "invalid_credentials")
		if in := e.instance(id); in.JSON["initiator"] != "bob" {
			t.Fatalf("the instance keeps its initiator's name: %s", in.Body)
		}
		if h := e.do("GET", "/api/v1/instances/"+id+"/history", e.admin, nil, nil); !strings.Contains(string(h.Body), `"actor":"bob"`) {
			t.Fatalf("the history keeps the name: %s", h.Body)
		}
		// Admins: not oneself; not the last enabled one (here through a token of carol's, who is that admin).
		assertError(t, e.do("DELETE", "/api/v1/users/admin", e.admin, nil, nil), 422, "cannot_delete_self")
		e.do("PATCH", "/api/v1/users/carol", e.admin, M{"roles": []string{"admin"}}, nil)
		carol := e.token("carol", "pw-carol-123")
		tok := e.do("POST", "/api/v1/tokens", carol, M{"name": "ops", "roles": []string{"admin"}}, nil).JSON["token"].(string)
		if r := e.do("DELETE", "/api/v1/users/admin", carol, nil, nil); r.Status != 204 {
			t.Fatalf("carol deletes admin: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("DELETE", "/api/v1/users/carol", tok, nil, nil), 409, "last_admin")
		if _, err := s.GetUser(ctx0, "default", "carol"); err != nil {
			t.Fatalf("the last admin: %v", err)
		}
	})
}

// TestTokensHTTP: POST /tokens answers {"id","token",...} once (no-store), two tokens named erp are two tokens
// (ids, their own idempotency keys), GET /tokens lists them without values, DELETE /tokens/{id} stops one at
// once; expires_at.
func TestTokensHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		bob := e.mkUser("bob")
		mk := func(body M) resp {
			t.Helper()
			r := e.do("POST", "/api/v1/tokens", e.admin, body, nil)
			if r.Status != 201 {
				t.Fatalf("create token: %d %s", r.Status, r.Body)
			}
			return r
		}
		r1 := mk(M{"name": "erp", "roles": []string{"erp"}})
		r2 := mk(M{"name": "erp"})
		if r1.Header.Get("Cache-Control") != "no-store" || r1.JSON["id"] == r2.JSON["id"] || r1.JSON["owner"] != "admin" ||
			!strings.HasPrefix(r1.JSON["token"].(string), "hly_") || r1.JSON["expires_at"] != nil {
			t.Fatalf("two tokens named erp: %s / %s", r1.Body, r2.Body)
		}
		tok1, tok2 := r1.JSON["token"].(string), r2.JSON["token"].(string)
		for _, c := range []struct {
			body M
			code string
		}{
			{M{"name": "old", "expires_at": "2001-01-01T00:00:00Z"}, "invalid_expires_at"},
			{M{"name": "x", "expires_at": "tomorrow"}, ""},
			{M{"name": ""}, "invalid_name"},
			{M{"name": "a\u0000b"}, "invalid_name"},
			{M{"name": "x", "roles": []string{"Not A Role"}}, "invalid_role"},
			{M{"name": "x", "token": "mine"}, "unknown_field"},
		} {
			assertError(t, e.do("POST", "/api/v1/tokens", e.admin, c.body, nil), 400, c.code)
		}
		exp := e.clock.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
		r3 := mk(M{"name": "temp", "expires_at": exp.Format(time.RFC3339)})
		if r3.JSON["expires_at"] != exp.Format(time.RFC3339) {
			t.Fatalf("expires_at: %s", r3.Body)
		}
		// The list: every token, no value or hash, paginated.
		var ids []string
		cursor := ""
		for {
			r := e.do("GET", "/api/v1/tokens?limit=2&cursor="+cursor, e.admin, nil, nil)
			if r.Status != 200 || strings.Contains(string(r.Body), "hly_") || strings.Contains(string(r.Body), "hash") {
				t.Fatalf("list: %d %s", r.Status, r.Body)
			}
			for _, it := range r.JSON["items"].([]any) {
				ids = append(ids, it.(M)["id"].(string)+"/"+it.(M)["name"].(string)+"/"+it.(M)["owner"].(string))
			}
			if cursor, _ = r.JSON["next_cursor"].(string); cursor == "" {
				break
			}
		}
		if len(ids) != 3 || !strings.HasSuffix(ids[0], "/erp/admin") || !strings.HasSuffix(ids[2], "/temp/admin") {
			t.Fatalf("tokens: %v", ids)
		}
		assertError(t, e.do("GET", "/api/v1/tokens", bob, nil, nil), 403, "admin_required")
		// Each token is its own principal for idempotency keys: the same key from both starts two instances.
		e.publish("api", []any{start(M{"kind": "manual"}), M{"id": "end", "type": "end"}}, []any{edge("start", "end")})
		a := e.do("POST", "/api/v1/instances", tok1, M{"template": "api"}, map[string]string{"Idempotency-Key": "order-1"})
		b := e.do("POST", "/api/v1/instances", tok2, M{"template": "api"}, map[string]string{"Idempotency-Key": "order-1"})
		if a.Status != 201 || b.Status != 201 || a.JSON["id"] == b.JSON["id"] || a.JSON["initiator"] != "token:erp" {
			t.Fatalf("one key, two tokens: %s / %s", a.Body, b.Body)
		}
		// Delete: the next request with it fails; its namesake works.
		id1 := r1.JSON["id"].(string)
		assertError(t, e.do("DELETE", "/api/v1/tokens/"+id1, bob, nil, nil), 403, "admin_required")
		if r := e.do("DELETE", "/api/v1/tokens/"+id1, e.admin, nil, nil); r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("GET", "/api/v1/me", tok1, nil, nil), 401, "invalid_token")
		assertError(t, e.do("DELETE", "/api/v1/tokens/"+id1, e.admin, nil, nil), 404, "")
		if r := e.do("GET", "/api/v1/me", tok2, nil, nil); r.Status != 200 || r.JSON["username"] != "token:erp" {
			t.Fatalf("the other erp: %d %s", r.Status, r.Body)
		}
		// Expiry on the server's clock.
		tok3 := r3.JSON["token"].(string)
		if r := e.do("GET", "/api/v1/me", tok3, nil, nil); r.Status != 200 {
			t.Fatal(r.Status, string(r.Body))
		}
		e.advance(49 * time.Hour)
		assertError(t, e.do("GET", "/api/v1/me", tok3, nil, nil), 401, "token_expired")
	})
}

type auditItem struct {
	ID         int64           `json:"id"`
	At         time.Time       `json:"at"`
	Actor      string          `json:"actor"`
	ActorToken string          `json:"actor_token"`
	Action     string          `json:"action"`
	Target     string          `json:"target"`
	Before     json.RawMessage `json:"before"`
	After      json.RawMessage `json:"after"`
	Reason     string          `json:"reason"`
	IP         string          `json:"ip"`
	RequestID  string          `json:"request_id"`
}

func (e *env) audit(query string) ([]auditItem, resp) {
	e.t.Helper()
	var out []auditItem
	cursor := ""
	for {
		r := e.do("GET", "/api/v1/audit?limit=5&"+query+"&cursor="+cursor, e.admin, nil, nil)
		if r.Status != 200 {
			return nil, r
		}
		var page struct {
			Items      []auditItem `json:"items"`
			NextCursor string      `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, page.Items...)
		if page.NextCursor == "" {
			return out, r
		}
		cursor = page.NextCursor
	}
}

// TestAuditHTTP: every admin change, jump and terminate is in GET /audit, newest first, with actor, target,
// before/after where they apply and never a secret; refused changes leave nothing; filters; admins only; no
// route changes or deletes an entry.
func TestAuditHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		subs := subscription.New(s, subscription.Options{Logger: testkit.Quiet(), SecretKey: []byte("subscription-key-subscription-key")})
		e := newEnvWith(t, s, wiring{subs: subs}, withPlugins(t, nil))
		bob := e.mkUser("bob")
		do := func(method, path string, body any, want int) resp {
			t.Helper()
			r := e.do(method, path, e.admin, body, map[string]string{"X-Request-ID": "req-" + strconv.Itoa(want)})
			if r.Status != want {
				t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
			}
			return r
		}
		def := M{"nodes": []any{start(M{"kind": "sync-api", "module": "hr", "function": "leave", "login_verification": "token", "header_token": "s3cret-token"}),
			M{"id": "end", "type": "end"}}, "edges": []any{edge("start", "end")}}
		do("POST", "/api/v1/templates", M{"key": "hook", "name": "Hook", "definition": def}, 201)
		def2 := M{"nodes": []any{start(M{"kind": "manual"}), M{"id": "lead", "type": "approval", "approvers": M{"users": []string{"bob"}}},
			M{"id": "other", "type": "approval", "approvers": M{"users": []string{"bob"}}}, M{"id": "end", "type": "end"}},
			"edges": []any{edge("start", "lead"), edge("lead", "other"), edge("other", "end")}}
		do("PUT", "/api/v1/templates/hook/draft", M{"definition": def2}, 200)
		do("POST", "/api/v1/templates/hook/publish", nil, 201)
		if r := e.upload("echo", "python", "", []byte("print('{}')"), e.admin); r.Status != 201 {
			t.Fatal(r.Status, string(r.Body))
		}
		do("POST", "/api/v1/users", M{"username": "carol", "password": "carol-secret-pw", "display_name": "Carol"}, 201)
		assertError(t, e.do("PATCH", "/api/v1/users/carol", e.admin, M{"email": "nope"}, nil), 400, "invalid_email") // refused: not recorded
		do("PATCH", "/api/v1/users/carol", M{"roles": []string{"ops"}, "email": "carol@example.com"}, 200)
		do("POST", "/api/v1/users/carol/password", M{"new_password": "reset-by-admin"}, 204)
		do("DELETE", "/api/v1/users/carol", nil, 204)
		tk := do("POST", "/api/v1/tokens", M{"name": "erp", "roles": []string{"admin"}}, 201)
		token, tokenID := tk.JSON["token"].(string), tk.JSON["id"].(string)
		do("POST", "/api/v1/departments", M{"name": "eng"}, 201)
		sub := do("POST", "/api/v1/subscriptions", M{"event": "task.created", "webhook_url": "https://example.com/hook", "secret": "whsec-very-secret"}, 201)
		do("DELETE", "/api/v1/subscriptions/"+sub.JSON["id"].(string), nil, 204)
		inst := e.do("POST", "/api/v1/instances", bob, M{"template": "hook"}, nil)
		id := inst.JSON["id"].(string)
		do("POST", "/api/v1/instances/"+id+"/jump", M{"to": "other", "reason": "skip the lead"}, 200)
		r := e.do("POST", "/api/v1/instances/"+id+"/terminate", token, M{"reason": "duplicate"}, nil) // by the token
		if r.Status != 200 {
			t.Fatal(r.Status, string(r.Body))
		}
		do("DELETE", "/api/v1/tokens/"+tokenID, nil, 204)
		inst2 := e.do("POST", "/api/v1/instances", bob, M{"template": "hook"}, nil)
		if r := e.do("POST", "/api/v1/instances/"+inst2.JSON["id"].(string)+"/terminate", bob, M{"reason": "mine"}, nil); r.Status != 200 {
			t.Fatal(r.Status, string(r.Body))
		}
		if r := e.do("POST", "/api/v1/me/password", bob, M{"old_password": "pw-bob-123", "new_password": "bob-new-password"}, nil); r.Status != 204 {
			t.Fatal(r.Status, string(r.Body))
		}

		items, raw := e.audit("")
		var got []string
		for _, it := range items {
			got = append(got, it.Action+" "+it.Target+" "+it.Actor)
		}
		want := []string{
			"user.password_change bob bob",
			"instance.terminate " + inst2.JSON["id"].(string) + " bob",
			"token.delete " + tokenID + " admin",
			"instance.terminate " + id + " token:erp",
			"instance.jump " + id + " admin",
			"subscription.delete " + sub.JSON["id"].(string) + " admin",
			"subscription.create " + sub.JSON["id"].(string) + " admin",
			"department.create eng admin",
			"token.create erp admin",
			"user.delete carol admin",
			"user.password_reset carol admin",
			"user.update carol admin",
			"user.create carol admin",
			"plugin.upload echo admin",
			"template.publish hook admin",
			"template.draft_save hook admin",
			"template.create hook admin",
			"user.create bob admin", // e.mkUser made bob through the API first
		}
		if !slices.Equal(got, want) {
			t.Fatalf("the audit log, newest first:\n got %q\nwant %q", got, want)
		}
		all := string(raw.Body)
		for _, it := range items {
			all += string(it.Before) + string(it.After)
		}
		for _, secret := range []string{"s3cret-token", "sha256:", "whsec-very-secret", "sealed:", token, "$2a$", "carol-secret-pw", "reset-by-admin", "password_hash"} {
			if strings.Contains(all, secret) {
				t.Fatalf("a secret (%q) in the audit log: %s", secret, all)
			}
		}
		byAction := map[string]auditItem{}
		for _, it := range items {
			if _, ok := byAction[it.Action]; !ok {
				byAction[it.Action] = it
			}
		}
		has := func(action, part, in string) {
			t.Helper()
			it := byAction[action]
			doc := string(it.Before)
			if in == "after" {
				doc = string(it.After)
			}
			if !strings.Contains(doc, part) {
				t.Fatalf("%s %s: want %s in %s", action, in, part, doc)
			}
		}
		has("template.create", `"header_token":"***"`, "after")
		has("template.draft_save", `"header_token":"***"`, "before")
		has("template.draft_save", `"id":"other"`, "after")
		has("template.publish", `"latest_version":1`, "after")
		has("plugin.upload", `"sha256":"`, "after")
		has("user.update", `"roles":[]`, "before")
		has("user.update", `"email":"carol@example.com"`, "after")
		has("user.password_reset", `"password_change_required":true`, "after")
		has("user.delete", `"username":"carol"`, "before")
		has("token.create", `"owner":"admin"`, "after")
		has("subscription.create", `"secret":"***"`, "after")
		has("subscription.delete", `"webhook_url":"https://example.com/hook"`, "before")
		has("instance.jump", `"active_nodes":["lead"]`, "before")
		has("instance.jump", `"active_nodes":["other"]`, "after")
		has("instance.terminate", `"status":"terminated"`, "after")
		if it := byAction["instance.jump"]; it.Reason != "skip the lead" || it.RequestID != "req-200" || it.IP != "127.0.0.1" {
			t.Fatalf("jump entry: %+v", it)
		}
		for _, it := range items {
			if it.Action == "instance.terminate" && it.Actor == "token:erp" && (it.ActorToken != tokenID || it.Reason != "duplicate") {
				t.Fatalf("terminate by a token: %+v", it)
			}
			if it.At.IsZero() || it.ID == 0 {
				t.Fatalf("entry without time or id: %+v", it)
			}
		}
		if string(byAction["user.delete"].After) != "null" || string(byAction["user.create"].Before) != "null" {
			t.Fatalf("a delete has no after, a create no before: %s %s", byAction["user.delete"].After, byAction["user.create"].Before)
		}

		// Filters.
		if got, _ := e.audit("actor=bob"); len(got) != 2 {
			t.Fatalf("actor=bob: %+v", got)
		}
		if got, _ := e.audit("action=user.*"); len(got) != 6 {
			t.Fatalf("action=user.*: %d", len(got))
		}
		if got, _ := e.audit("action=instance.terminate&actor=token:erp"); len(got) != 1 {
			t.Fatalf("terminates by the token: %+v", got)
		}
		now := e.clock.Now().UTC()
		if got, _ := e.audit("from=" + now.Add(time.Second).Format(time.RFC3339Nano)); len(got) != 0 {
			t.Fatalf("from the future: %+v", got)
		}
		if got, _ := e.audit("to=" + now.Add(-time.Hour).Format(time.RFC3339Nano)); len(got) != 0 {
			t.Fatalf("to an hour ago: %+v", got)
		}
		_, bad := e.audit("from=yesterday")
		assertError(t, bad, 400, "invalid_from")
		_, bad = e.audit("from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z")
		assertError(t, bad, 400, "invalid_range")
		// Admins only; append-only: no route updates or deletes entries.
		assertError(t, e.do("GET", "/api/v1/audit", e.token("bob", "bob-new-password"), nil, nil), 403, "admin_required")
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			if r := e.do(m, "/api/v1/audit", e.admin, M{}, nil); r.Status != 405 {
				t.Fatalf("%s /audit: %d", m, r.Status)
			}
			if r := e.do(m, fmt.Sprintf("/api/v1/audit/%d", items[0].ID), e.admin, M{}, nil); r.Status != 404 {
				t.Fatalf("%s /audit/{id}: %d", m, r.Status)
			}
		}
	})
}

// TestLoginThrottleHTTP: the 6th sign-in within 15 minutes after 5 failures is 429 with Retry-After, also with
// the right password, and an X-Forwarded-For from an untrusted peer does not move the caller to another IP.
func TestLoginThrottleHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		e.mkUser("bob")
		for i := range 5 {
			hdr := map[string]string{"X-Forwarded-For": fmt.Sprintf("203.0.113.%d", i)}
			assertError(t, e.do("POST", "/api/v1/auth/login", "", M{"username": "bob", "password": "wrong"}, hdr), 401, "invalid_credentials")
			e.advance(time.Minute)
		}
		r := e.login("bob", "pw-bob-123")
		assertError(t, r, 429, "too_many_attempts")
		if ra := r.Header.Get("Retry-After"); ra != "600" || r.JSON["error"].(M)["details"].(M)["retry_after"] != float64(600) {
			t.Fatalf("Retry-After %q: %s", ra, r.Body)
		}
		e.advance(10 * time.Minute)
		if r := e.login("bob", "pw-bob-123"); r.Status != 200 {
			t.Fatalf("after the window: %d %s", r.Status, r.Body)
		}
	})
}

// TestTriggerRateLimit: API trigger calls of one client IP beyond the rate are 429 rate_limited with Retry-After;
// other routes are not limited.
func TestTriggerRateLimit(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	e := newEnv(t, s, func(d *server.Deps) { d.TriggerLimit = ratelimit.NewBuckets(0.01) }) // one call, then one per 100 s
	e.publish("open", []any{start(M{"kind": "async-api", "module": "erp", "function": "order"}), M{"id": "end", "type": "end"}}, []any{edge("start", "end")})
	if r := e.do("POST", "/api/v1/trigger/async/erp/order", "", M{}, nil); r.Status != 202 {
		t.Fatalf("first call: %d %s", r.Status, r.Body)
	}
	r := e.do("POST", "/api/v1/trigger/async/erp/order", "", M{}, nil)
	assertError(t, r, 429, "rate_limited")
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 90 || ra > 100 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	if n := e.countRows("SELECT COUNT(*) FROM instances"); n != 1 {
		t.Fatalf("%d instances after a refused call", n)
	}
	if r := e.do("GET", "/api/v1/me", e.admin, nil, nil); r.Status != 200 {
		t.Fatal("other routes are not limited")
	}
}

// TestTriggerRateLimitShared (Redis): two servers (replicas) whose trigger limit is shared through one Redis prefix
// together allow one client the burst once, not once each; a third on another prefix (another deployment) counts
// alone.
func TestTriggerRateLimitShared(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	o, err := redis.ParseURL(storetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(o)
	prefix := fmt.Sprintf("halley-test:%d:", time.Now().UnixNano())
	t.Cleanup(func() {
		if keys, _ := rdb.Keys(context.Background(), prefix+"*").Result(); len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
		rdb.Close()
	})
	limiter := func(prefix string) ratelimit.Limiter {
		l, err := ratelimit.NewRedisBuckets(rdb, prefix, "trigger", 0.02, testkit.Quiet()) // bursts of 1, then one per 50 s
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a := newEnv(t, s, func(d *server.Deps) { d.TriggerLimit = limiter(prefix) })
	b := newEnv(t, s, func(d *server.Deps) { d.TriggerLimit = limiter(prefix) })
	other := newEnv(t, s, func(d *server.Deps) { d.TriggerLimit = limiter(prefix + "other:") })
	a.publish("open", []any{start(M{"kind": "async-api", "module": "erp", "function": "order"}), M{"id": "end", "type": "end"}}, []any{edge("start", "end")})
	if r := a.do("POST", "/api/v1/trigger/async/erp/order", "", M{}, nil); r.Status != 202 {
		t.Fatalf("first call, on a: %d %s", r.Status, r.Body)
	}
	r := b.do("POST", "/api/v1/trigger/async/erp/order", "", M{}, nil)
	assertError(t, r, 429, "rate_limited")
	if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); ra < 40 || ra > 50 {
		t.Fatalf("Retry-After %q on b", r.Header.Get("Retry-After"))
	}
	assertError(t, a.do("POST", "/api/v1/trigger/async/erp/order", "", M{}, nil), 429, "rate_limited")
	if r := other.do("POST", "/api/v1/trigger/async/erp/order", "", M{}, nil); r.Status != 202 {
		t.Fatalf("another prefix shares the limit: %d %s", r.Status, r.Body)
	}
	if n := a.countRows("SELECT COUNT(*) FROM instances"); n != 2 {
		t.Fatalf("%d instances; want the two calls allowed", n)
	}
}

// TestMetricsMethodLabel: made-up HTTP methods share the label "other"; they never become label values.
func TestMetricsMethodLabel(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	e := newEnv(t, s, nil)
	for i := range 5 {
		e.do(fmt.Sprintf("FOO%d", i), "/api/v1/trigger/sync/erp/x", "", nil, nil)
		e.do(fmt.Sprintf("BAR%d", i), "/api/v1/nowhere", "", nil, nil)
	}
	m := string(e.do("GET", "/metrics", "", nil, nil).Body)
	if strings.Contains(m, "FOO") || strings.Contains(m, "BAR") || !strings.Contains(m, `method="other"`) || !strings.Contains(m, `method="POST"`) {
		t.Fatalf("method labels: %s", grepLines(m, "halley_http_requests_total"))
	}
}

func grepLines(s, part string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, part) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestManyApprovers: a linear process listing too many approvers is 422 too_many_approvers (nothing stored); a
// template whose role has 2,000 holders, signed by all, starts with 2,000 tasks on SQLite too (the inserts are
// split under its 32,766-variable limit: it was a 500).
func TestManyApprovers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, func(d *server.Deps) { d.BodyLimit = 1 << 20 })
		bob := e.mkUser("bob")
		names := func(n int) []string {
			out := make([]string, n)
			for i := range out {
				out[i] = fmt.Sprintf("u%04d", i)
			}
			return out
		}
		assertError(t, e.do("POST", "/api/v1/instances/linear", bob, M{"title": "t", "steps": []any{M{"name": "s", "approvers": M{"users": names(2000)}, "sign": "all"}}}, nil),
			422, "too_many_approvers")
		var steps []any
		for range 6 {
			steps = append(steps, M{"name": "s", "approvers": M{"users": names(200)}})
		}
		assertError(t, e.do("POST", "/api/v1/instances/linear", bob, M{"title": "t", "steps": steps}, nil), 422, "too_many_approvers")
		if n := e.countRows("SELECT COUNT(*) FROM templates"); n != 0 {
			t.Fatalf("%d hidden templates left by refused requests", n)
		}
		for _, u := range names(2000) {
			if err := s.CreateUser(ctx0, &model.User{TenantID: model.DefaultTenant, Username: u, PasswordHash: "x", DisplayName: u, Roles: []string{"clerk"}}); err != nil {
				t.Fatal(err)
			}
		}
		e.publish("all-clerks", []any{start(M{"kind": "manual"}), M{"id": "sign", "type": "approval", "approvers": M{"roles": []string{"clerk"}}, "sign": "all"},
			M{"id": "end", "type": "end"}}, []any{edge("start", "sign"), edge("sign", "end")})
		r := e.do("POST", "/api/v1/instances", bob, M{"template": "all-clerks"}, nil)
		if r.Status != 201 {
			t.Fatalf("start with 2,000 approvers: %d %s", r.Status, clip(string(r.Body), 300))
		}
		if n := e.countRows("SELECT COUNT(*) FROM tasks WHERE instance_id = ?", r.JSON["id"]); n != 2000 {
			t.Fatalf("%d tasks", n)
		}
	})
}

// TestNamesRefuseControlCharacters: names shown in lists, logs and the audit log refuse control characters and
// direction overrides: display names, department, token, template names, a linear process's title and steps.
func TestNamesRefuseControlCharacters(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	e := newEnv(t, s, nil)
	bob := e.mkUser("bob")
	for _, c := range []struct {
		method, path, token string
		body                M
		code                string
	}{
		{"POST", "/api/v1/users", e.admin, M{"username": "eve", "password": "eve-password", "display_name": "Eve\nAdmin"}, "invalid_display_name"},
		{"PUT", "/api/v1/me", bob, M{"display_name": "Bob\u202Egnp"}, "invalid_display_name"},
		{"PATCH", "/api/v1/users/bob", e.admin, M{"display_name": "B\x1b[2Jb"}, "invalid_display_name"},
		{"POST", "/api/v1/departments", e.admin, M{"name": "eng\x00"}, "invalid_name"},
		{"POST", "/api/v1/tokens", e.admin, M{"name": "erp\r\nX-Injected: 1"}, "invalid_name"},
		{"POST", "/api/v1/templates", e.admin, M{"key": "k", "name": "Leave\u2066x", "definition": M{}}, "invalid_name"},
		{"POST", "/api/v1/instances/linear", bob, M{"title": "a\tb", "steps": []any{M{"name": "s", "approvers": M{"users": []string{"bob"}}}}}, "invalid_title"},
		{"POST", "/api/v1/instances/linear", bob, M{"title": "ok", "steps": []any{M{"name": "s\n2", "approvers": M{"users": []string{"bob"}}}}}, "invalid_steps"},
	} {
		assertError(t, e.do(c.method, c.path, c.token, c.body, nil), 400, c.code)
	}
	for _, table := range []string{"departments", "api_tokens", "templates", "instances"} {
		if n := e.countRows("SELECT COUNT(*) FROM " + table); n != 0 {
			t.Errorf("%s: %d rows after refused requests", table, n)
		}
	}
	if u, _ := s.GetUser(ctx0, "default", "bob"); u.DisplayName != "bob" {
		t.Fatalf("bob changed: %+v", u)
	}
}

// replica is one Halley server of a two-replica deployment: its own identity service (user cache, clock) and
// engine over the shared MySQL database, login attempts counted in the shared Redis.
type replica struct {
	url   string
	clock *testClock
}

func newReplica(t *testing.T, s *store.Store, attempts ratelimit.Counter) *replica {
	t.Helper()
	clk := &testClock{t: time.Now()}
	ids := identity.New(s, identity.Options{Secret: []byte("test-secret-test-secret-test-secret"), BcryptCost: bcrypt.MinCost, Clock: clk, Attempts: attempts})
	e := newEnvWith(t, s, wiring{clock: clk}, func(d *server.Deps) { d.Identity = ids })
	return &replica{url: e.url, clock: clk}
}

// TestTwoReplicas (MySQL + Redis): a user disabled through one replica is refused by the other within the
// identity cache time (5 s), and at once by the first; failed sign-ins on both count toward one limit.
func TestTwoReplicas(t *testing.T) {
	s := storetest.Open(t, store.MySQL)
	o, err := redis.ParseURL(storetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("halley-test:%d:", time.Now().UnixNano())
	counter := func() ratelimit.Counter {
		rdb := redis.NewClient(o)
		t.Cleanup(func() { rdb.Close() })
		c, err := ratelimit.NewRedis(rdb, prefix, identity.LoginWindow)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	t.Cleanup(func() {
		rdb := redis.NewClient(o)
		defer rdb.Close()
		if keys, _ := rdb.Keys(context.Background(), prefix+"*").Result(); len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	})
	a, b := newReplica(t, s, counter()), newReplica(t, s, counter())
	e := &env{t: t, store: s, url: a.url}
	e.admin = e.token("admin", "admin-pw-1")
	e.mkUser("bob")
	eb := &env{t: t, store: s, url: b.url}
	bob := eb.token("bob", "pw-bob-123") // signed in through b
	if r := eb.do("GET", "/api/v1/tasks", bob, nil, nil); r.Status != 200 {
		t.Fatal(r.Status, string(r.Body))
	}
	if r := e.do("GET", "/api/v1/tasks", bob, nil, nil); r.Status != 200 {
		t.Fatal(r.Status, string(r.Body))
	}
	if r := e.do("PATCH", "/api/v1/users/bob", e.admin, M{"disabled": true}, nil); r.Status != 200 {
		t.Fatal(r.Status, string(r.Body))
	}
	assertError(t, e.do("GET", "/api/v1/tasks", bob, nil, nil), 401, "user_disabled") // a: at once
	b.clock.set(b.clock.Now().Add(4 * time.Second))
	if r := eb.do("GET", "/api/v1/tasks", bob, nil, nil); r.Status != 200 {
		t.Fatalf("b within its cache time still serves bob (what keeps requests free of reads): %d %s", r.Status, r.Body)
	}
	b.clock.set(b.clock.Now().Add(1500 * time.Millisecond))
	assertError(t, eb.do("GET", "/api/v1/tasks", bob, nil, nil), 401, "user_disabled") // b: within 5 s

	// Throttling is shared through Redis: 3 failures on a and 2 on b lock carol on both.
	e.mkUser("carol")
	for i := range 5 {
		r := e
		if i >= 3 {
			r = eb
		}
		assertError(t, r.login("carol", "wrong"), 401, "invalid_credentials")
	}
	assertError(t, e.login("carol", "pw-carol-123"), 429, "too_many_attempts")
	assertError(t, eb.login("carol", "pw-carol-123"), 429, "too_many_attempts")
}

// TestPasswordChangeThrottleHTTP: a session guessing the current password gets 5 tries, then 429
// too_many_attempts with Retry-After for the right one too, and the password stays; signing in still works.
func TestPasswordChangeThrottleHTTP(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		e.mkUser("bob")
		bob := e.token("bob", "pw-bob-123")
		for i := range 5 {
			assertError(t, e.do("POST", "/api/v1/me/password", bob, M{"old_password": fmt.Sprintf("guess-%d", i), "new_password": "taken-over-pw"}, nil), 403, "wrong_password")
			e.advance(time.Minute)
		}
		r := e.do("POST", "/api/v1/me/password", bob, M{"old_password": "pw-bob-123", "new_password": "taken-over-pw"}, nil)
		assertError(t, r, 429, "too_many_attempts")
		if ra := r.Header.Get("Retry-After"); ra != "600" || r.JSON["error"].(M)["details"].(M)["retry_after"] != float64(600) {
			t.Fatalf("Retry-After %q: %s", ra, r.Body)
		}
		if r := e.login("bob", "pw-bob-123"); r.Status != 200 {
			t.Fatalf("the password changed, or signing in is locked: %d %s", r.Status, r.Body)
		}
		e.advance(10 * time.Minute)
		if r := e.do("POST", "/api/v1/me/password", bob, M{"old_password": "pw-bob-123", "new_password": "bobs-own-new-pw"}, nil); r.Status != 204 {
			t.Fatalf("after the window: %d %s", r.Status, r.Body)
		}
	})
}

// TestRecreatedUserGetsNoOldSession: an admin deletes frank and creates frank again as an admin; the old frank's
// login token and API token stay 401, also after the user cache's time; the new frank signs in.
func TestRecreatedUserGetsNoOldSession(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		e := newEnv(t, s, nil)
		if r := e.do("POST", "/api/v1/users", e.admin, M{"username": "frank", "password": "pw-frank-123", "roles": []string{"admin"}}, nil); r.Status != 201 {
			t.Fatalf("create frank: %d %s", r.Status, r.Body)
		}
		frank := e.token("frank", "pw-frank-123")
		r := e.do("POST", "/api/v1/tokens", frank, M{"name": "frank-erp", "roles": []string{"admin"}}, nil)
		if r.Status != 201 {
			t.Fatalf("token: %d %s", r.Status, r.Body)
		}
		api := r.JSON["token"].(string)
		if r := e.do("DELETE", "/api/v1/users/frank", e.admin, nil, nil); r.Status != 204 {
			t.Fatalf("delete: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("GET", "/api/v1/me", frank, nil, nil), 401, "invalid_token")
		if r := e.do("POST", "/api/v1/users", e.admin, M{"username": "frank", "password": "pw-frank-456", "roles": []string{"admin", "auditor"}}, nil); r.Status != 201 {
			t.Fatalf("re-create frank: %d %s", r.Status, r.Body)
		}
		for _, wait := range []time.Duration{0, 10 * time.Second, time.Hour} {
			e.advance(wait)
			assertError(t, e.do("GET", "/api/v1/me", frank, nil, nil), 401, "invalid_token")
			assertError(t, e.do("GET", "/api/v1/audit", frank, nil, nil), 401, "invalid_token")
			assertError(t, e.do("GET", "/api/v1/me", api, nil, nil), 401, "invalid_token")
		}
		if r := e.do("GET", "/api/v1/me", e.token("frank", "pw-frank-456"), nil, nil); r.Status != 200 {
			t.Fatalf("the new frank: %d %s", r.Status, r.Body)
		}
		assertError(t, e.do("POST", "/api/v1/users", e.admin, M{"username": "FRANK", "password": "pw-frank-789"}, nil), 409, "user_exists")
	})
}
