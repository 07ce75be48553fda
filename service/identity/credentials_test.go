package identity_test

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/crypto/bcrypt"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/ratelimit"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// counters gives each case a fresh in-process counter and a fresh Redis one (two replicas sharing Redis get two
// Redis counters on the same prefix).
func counters(t *testing.T) map[string]func() ratelimit.Counter {
	o, err := redis.ParseURL(storetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	rand.Read(b[:])
	prefix := "halley-test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		rdb := redis.NewClient(o)
		defer rdb.Close()
		if keys, _ := rdb.Keys(ctx, prefix+"*").Result(); len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	})
	return map[string]func() ratelimit.Counter{
		"memory": func() ratelimit.Counter { return ratelimit.NewMemory(identity.LoginWindow, 0) },
		"redis": func() ratelimit.Counter {
			rdb := redis.NewClient(o)
			t.Cleanup(func() { rdb.Close() })
			c, err := ratelimit.NewRedis(rdb, prefix, identity.LoginWindow)
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
	}
}

func serviceWith(s *store.Store, clk *clock.Fake, c ratelimit.Counter) *identity.Service {
	return identity.New(s, identity.Options{Secret: []byte("identity-test-secret-identity-test"), BcryptCost: bcrypt.MinCost, Clock: clk, Attempts: c})
}

func retryAfter(err error) int {
	if e, ok := err.(*model.Error); ok {
		n, _ := e.Details["retry_after"].(int)
		return n
	}
	return -1
}

// TestLoginThrottle: after 5 failed sign-ins for one username within 15 minutes the 6th is refused (429
// too_many_attempts with the seconds until the oldest leaves the window), the right password too; a success
// forgets the username's failures; 20 failures from one IP refuse that IP for every username; two replicas
// sharing Redis count together.
func TestLoginThrottle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for name, newCounter := range counters(t) {
			t.Run(name, func(t *testing.T) {
				clk := clock.NewFake(time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC))
				shared := newCounter()
				a := serviceWith(s, clk, shared)
				if _, err := a.Bootstrap(ctx, "admin-password", false); err != nil {
					t.Fatal(err)
				}
				for _, u := range []string{"bob", "carol"} {
					if _, err := a.CreateUser(ctx, model.DefaultTenant, identity.CreateUserRequest{Username: u, Password: u + "-password"}); err != nil && !model.IsKind(err, model.ECONFLICT) {
						t.Fatal(err)
					}
				}
				// A second replica: its own counter object on the same Redis (in process: the same counter).
				b := a
				if name == "redis" {
					b = serviceWith(s, clk, newCounter())
				}
				t0 := clk.Now()
				for i := range 5 {
					svc := a
					if i%2 == 1 {
						svc = b
					}
					if _, _, _, err := svc.LoginFrom(ctx, "bob", "wrong", "10.0.0.1"); codeOf(err) != "invalid_credentials" {
						t.Fatalf("failure %d: %v", i+1, err)
					}
					clk.Advance(time.Second)
				}
				// 5 s after the first failure: locked for 15 min minus those 5 s, whatever the password.
				for _, svc := range []*identity.Service{a, b} {
					_, _, _, err := svc.LoginFrom(ctx, "bob", "bob-password", "10.0.0.2")
					if codeOf(err) != "too_many_attempts" || !model.IsKind(err, model.ERATELIMITED) || retryAfter(err) != 895 {
						t.Fatalf("the right password during the lock: %v (retry_after %d)", err, retryAfter(err))
					}
				}
				// Other users are not locked by bob's failures.
				if _, _, _, err := a.LoginFrom(ctx, "carol", "carol-password", "10.0.0.3"); err != nil {
					t.Fatal(err)
				}
				// The lock lifts when the first failure is 15 minutes old; a success forgets the failures.
				clk.Set(t0.Add(identity.LoginWindow))
				if _, _, _, err := b.LoginFrom(ctx, "bob", "bob-password", "10.0.0.2"); err != nil {
					t.Fatalf("after the window: %v", err)
				}
				for i := range 4 {
					if _, _, _, err := a.LoginFrom(ctx, "bob", "wrong", "10.0.0.4"); codeOf(err) != "invalid_credentials" {
						t.Fatalf("failure %d after the success: %v", i+1, err)
					}
				}
				if _, _, _, err := a.LoginFrom(ctx, "bob", "bob-password", "10.0.0.4"); err != nil {
					t.Fatalf("4 failures after a success do not lock: %v", err)
				}
				// 20 failures from one IP, over many usernames (existing or not): that IP is refused for everyone,
				// other IPs are not.
				for i := range 20 {
					user := []string{"ghost", "carol", "nobody", "admin"}[i%4]
					if _, _, _, err := b.LoginFrom(ctx, user+string(rune('a'+i/4)), "wrong", "192.0.2.7"); codeOf(err) != "invalid_credentials" {
						t.Fatalf("IP failure %d: %v", i+1, err)
					}
				}
				if _, _, _, err := a.LoginFrom(ctx, "carol", "carol-password", "192.0.2.7"); codeOf(err) != "too_many_attempts" {
					t.Fatalf("the 21st from the IP: %v", err)
				}
				if _, _, _, err := a.LoginFrom(ctx, "carol", "carol-password", "192.0.2.8"); err != nil {
					t.Fatalf("another IP: %v", err)
				}
			})
		}
	})
}

// TestLoginThrottleRace: 40 wrong guesses sent at once for one username are 5 failures and 35 refusals — the
// attempt is counted before the password is checked, so none slips past the limit while bcrypt runs.
func TestLoginThrottleRace(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	for name, newCounter := range counters(t) {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC))
			a := serviceWith(s, clk, newCounter())
			if _, err := a.CreateUser(ctx, model.DefaultTenant, identity.CreateUserRequest{Username: "dave-" + name, Password: "dave-password"}); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			codes := map[string]int{}
			var wg sync.WaitGroup
			for range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _, _, err := a.LoginFrom(ctx, "dave-"+name, "guess", "")
					mu.Lock()
					codes[codeOf(err)]++
					mu.Unlock()
				}()
			}
			wg.Wait()
			if codes["invalid_credentials"] != 5 || codes["too_many_attempts"] != 35 {
				t.Fatalf("outcomes: %v", codes)
			}
		})
	}
}

// TestTokenVersions: a password change, an admin reset, disabling and a role taken away end a user's sessions
// (401 token_revoked, on every replica within the cache time); a role given applies to the live token; deleting
// the user ends them too.
func TestTokenVersions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		clk := clock.NewFake(time.Now())
		a, b := newService(s, clk), newService(s, clk)
		if _, err := a.Bootstrap(ctx, "admin-password", false); err != nil {
			t.Fatal(err)
		}
		admin := &model.Principal{TenantID: model.DefaultTenant, Username: "admin", Roles: []string{"admin"}}
		if _, err := a.CreateUser(ctx, model.DefaultTenant, identity.CreateUserRequest{Username: "bob", Password: "bob-password", Roles: []string{"ops"}}); err != nil {
			t.Fatal(err)
		}
		login := func(pw string) string {
			t.Helper()
			tok, _, _, err := a.Login(ctx, "bob", pw)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		revoked := func(what, tok string) {
			t.Helper()
			if _, err := a.Authenticate(ctx, tok); codeOf(err) != "token_revoked" {
				t.Fatalf("%s: this replica: %v", what, err)
			}
			clk.Advance(6 * time.Second) // past the other replica's cache
			if _, err := b.Authenticate(ctx, tok); codeOf(err) != "token_revoked" {
				t.Fatalf("%s: the other replica: %v", what, err)
			}
		}
		bobP := &model.Principal{TenantID: model.DefaultTenant, Username: "bob"}

		tok := login("bob-password")
		if err := a.ChangePassword(ctx, bobP, "bob-password", "bob-password-2"); err != nil {
			t.Fatal(err)
		}
		revoked("own password change", tok)

		tok = login("bob-password-2")
		if err := a.ResetPassword(ctx, admin, "bob", "reset-password"); err != nil {
			t.Fatal(err)
		}
		revoked("admin reset", tok)

		tok = login("reset-password")
		if _, err := b.Authenticate(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if _, err := a.UpdateUser(ctx, admin, "bob", identity.UserPatch{Roles: &[]string{"ops", "dba"}}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(6 * time.Second)
		if p, err := b.Authenticate(ctx, tok); err != nil || !slices.Equal(p.Roles, []string{"dba", "ops"}) {
			t.Fatalf("a role given applies to the live token (read from the store): %+v %v", p, err)
		}
		if _, err := a.UpdateUser(ctx, admin, "bob", identity.UserPatch{DisplayName: ptr("Bob"), Email: ptr("bob@example.com")}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Authenticate(ctx, tok); err != nil {
			t.Fatalf("a profile change ends no session: %v", err)
		}
		if _, err := a.UpdateUser(ctx, admin, "bob", identity.UserPatch{Roles: &[]string{"dba"}}); err != nil {
			t.Fatal(err)
		}
		revoked("a role taken away", tok)

		tok = login("reset-password")
		yes := true
		if _, err := a.UpdateUser(ctx, admin, "bob", identity.UserPatch{Disabled: &yes}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Authenticate(ctx, tok); codeOf(err) != "user_disabled" {
			t.Fatalf("disabled: %v", err)
		}
		no := false
		if _, err := a.UpdateUser(ctx, admin, "bob", identity.UserPatch{Disabled: &no}); err != nil {
			t.Fatal(err)
		}
		revoked("disabled, then enabled", tok)

		tok = login("reset-password")
		if _, err := b.Authenticate(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if err := a.DeleteUser(ctx, admin, "bob"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Authenticate(ctx, tok); codeOf(err) != "invalid_token" {
			t.Fatalf("deleted, this replica at once: %v", err)
		}
		clk.Advance(6 * time.Second)
		if _, err := b.Authenticate(ctx, tok); codeOf(err) != "invalid_token" {
			t.Fatalf("deleted, the other replica within the cache time: %v", err)
		}
		if _, _, _, err := a.Login(ctx, "bob", "reset-password"); codeOf(err) != "invalid_credentials" {
			t.Fatalf("a deleted user signs in: %v", err)
		}
		if err := a.DeleteUser(ctx, admin, "admin"); codeOf(err) != "cannot_delete_self" {
			t.Fatalf("deleting oneself: %v", err)
		}
		if err := a.DeleteUser(ctx, admin, "bob"); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("deleting twice: %v", err)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// TestAPITokens: two tokens of one name are two tokens; a deleted one is refused at once, also by a replica that
// used it a moment ago (API tokens are never cached); expires_at; a token works while its owner is an enabled
// admin and is deleted with its owner; a token made by a token has that token's owner; last_used_at is written
// at most once a minute.
func TestAPITokens(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		clk := clock.NewFake(time.Now().UTC().Truncate(time.Second))
		a, b := newService(s, clk), newService(s, clk)
		if _, err := a.Bootstrap(ctx, "admin-password", false); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreateUser(ctx, model.DefaultTenant, identity.CreateUserRequest{Username: "root", Password: "root-password", Roles: []string{"admin"}}); err != nil {
			t.Fatal(err)
		}
		root := &model.Principal{TenantID: model.DefaultTenant, Username: "root", Roles: []string{"admin"}}
		admin := &model.Principal{TenantID: model.DefaultTenant, Username: "admin", Roles: []string{"admin"}}
		mk := func(by *model.Principal, name string, expires *time.Time) (string, *model.APIToken) {
			t.Helper()
			plain, tok, err := a.CreateAPIToken(ctx, by, identity.TokenRequest{Name: name, Roles: []string{"erp"}, ExpiresAt: expires})
			if err != nil {
				t.Fatal(err)
			}
			return plain, tok
		}
		auth := func(svc *identity.Service, plain string) (*model.Principal, error) {
			return svc.Authenticate(ctx, plain)
		}

		p1, t1 := mk(root, "erp", nil)
		p2, t2 := mk(root, "erp", nil)
		if t1.ID == t2.ID || t1.Owner != "root" || t1.CreatedBy != "root" {
			t.Fatalf("two tokens named erp: %+v %+v", t1, t2)
		}
		for _, c := range []struct {
			plain string
			id    string
		}{{p1, t1.ID}, {p2, t2.ID}} {
			p, err := auth(b, c.plain)
			if err != nil || p.Username != "token:erp" || p.TokenID != c.id || p.Owner != "root" || !p.Token || p.Subject() != "token:"+c.id {
				t.Fatalf("principal of %s: %+v %v", c.id, p, err)
			}
		}
		list, _, err := a.ListAPITokens(ctx, model.DefaultTenant, model.Page{Limit: 50})
		if err != nil || len(list) != 2 {
			t.Fatalf("list: %v %v", list, err)
		}
		if err := a.DeleteAPIToken(ctx, admin, t1.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := auth(b, p1); codeOf(err) != "invalid_token" {
			t.Fatalf("a deleted token on the replica that just used it: %v", err)
		}
		if _, err := auth(b, p2); err != nil {
			t.Fatalf("its namesake still works: %v", err)
		}
		if err := a.DeleteAPIToken(ctx, admin, t1.ID); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("deleted twice: %v", err)
		}

		// Expiry.
		past := clk.Now().Add(-time.Second)
		if _, _, err := a.CreateAPIToken(ctx, root, identity.TokenRequest{Name: "old", ExpiresAt: &past}); codeOf(err) != "invalid_expires_at" {
			t.Fatalf("an expiry in the past: %v", err)
		}
		soon := clk.Now().Add(time.Hour)
		p3, _ := mk(admin, "short-lived", &soon)
		if _, err := auth(a, p3); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Hour)
		if _, err := auth(a, p3); codeOf(err) != "token_expired" {
			t.Fatalf("past its expiry: %v", err)
		}

		// last_used_at: set by the first use, not rewritten within a minute (on any replica), then again.
		used := func() time.Time {
			t.Helper()
			l, _, _ := a.ListAPITokens(ctx, model.DefaultTenant, model.Page{Limit: 50})
			for _, tk := range l {
				if tk.ID == t2.ID && tk.LastUsedAt != nil {
					return tk.LastUsedAt.UTC()
				}
			}
			t.Fatal("no last_used_at")
			return time.Time{}
		}
		if _, err := auth(a, p2); err != nil {
			t.Fatal(err)
		}
		first := used()
		if !first.Equal(clk.Now()) {
			t.Fatalf("last used %v, now %v", first, clk.Now())
		}
		clk.Advance(30 * time.Second)
		if _, err := auth(a, p2); err != nil {
			t.Fatal(err)
		}
		if _, err := auth(b, p2); err != nil {
			t.Fatal(err)
		}
		if u := used(); !u.Equal(first) {
			t.Fatalf("rewritten within a minute: %v", u)
		}
		clk.Advance(31 * time.Second)
		if _, err := auth(b, p2); err != nil {
			t.Fatal(err)
		}
		if u := used(); !u.Equal(clk.Now()) {
			t.Fatalf("a minute later: %v, want %v", u, clk.Now())
		}

		// Owners: a token made by a token belongs to the same admin; disabling or demoting the owner stops the
		// owner's tokens (on the other replica within the cache time), enabling them again restores them;
		// deleting the owner deletes them.
		tp, err := auth(a, p2)
		if err != nil {
			t.Fatal(err)
		}
		tp.Roles = []string{"admin"}
		p4, t4 := mk(tp, "made-by-a-token", nil)
		if t4.Owner != "root" || t4.CreatedBy != "token:erp" {
			t.Fatalf("a token's token: %+v", t4)
		}
		if _, err := auth(b, p4); err != nil {
			t.Fatal(err)
		}
		yes, no := true, false
		if _, err := a.UpdateUser(ctx, admin, "root", identity.UserPatch{Disabled: &yes}); err != nil {
			t.Fatal(err)
		}
		if _, err := auth(a, p2); codeOf(err) != "token_owner_gone" {
			t.Fatalf("owner disabled, this replica: %v", err)
		}
		clk.Advance(6 * time.Second)
		if _, err := auth(b, p4); codeOf(err) != "token_owner_gone" {
			t.Fatalf("owner disabled, the other replica: %v", err)
		}
		if _, err := a.UpdateUser(ctx, admin, "root", identity.UserPatch{Disabled: &no}); err != nil {
			t.Fatal(err)
		}
		if _, err := auth(a, p2); err != nil {
			t.Fatalf("owner enabled again: %v", err)
		}
		if _, err := a.UpdateUser(ctx, admin, "root", identity.UserPatch{Roles: &[]string{"ops"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := auth(a, p2); codeOf(err) != "token_owner_gone" {
			t.Fatalf("owner no longer an admin: %v", err)
		}
		if _, err := a.UpdateUser(ctx, admin, "root", identity.UserPatch{Roles: &[]string{"admin"}}); err != nil {
			t.Fatal(err)
		}
		if err := a.DeleteUser(ctx, admin, "root"); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{p2, p4} {
			if _, err := auth(b, p); codeOf(err) != "invalid_token" {
				t.Fatalf("the owner's tokens are deleted with the owner: %v", err)
			}
		}
		if l, _, _ := a.ListAPITokens(ctx, model.DefaultTenant, model.Page{Limit: 50}); len(l) != 1 || l[0].Name != "short-lived" || l[0].Owner != "admin" { // another owner's stays
			t.Fatalf("left: %+v", l)
		}
		// Names: control characters are refused.
		for _, bad := range []string{"e\nrp", "tab\there", "a\x1b[31mred", "evil\u202Egnp.exe"} {
			if _, _, err := a.CreateAPIToken(ctx, admin, identity.TokenRequest{Name: bad}); codeOf(err) != "invalid_name" {
				t.Fatalf("name %q: %v", bad, err)
			}
		}
	})
}
