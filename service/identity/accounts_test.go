package identity_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestDeletedAccountStaysDead: an admin deletes frank and creates a user named frank again, with other roles. The
// old frank's login token and the API token he owned stay refused: at once on the replica that deleted him, and on one
// that had both cached once its user cache is older than UserCacheTTL, for good; the new frank's own token works.
func TestDeletedAccountStaysDead(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		clk := clock.NewFake(time.Now().UTC().Truncate(time.Second))
		a, b := newService(s, clk), newService(s, clk)
		if _, err := a.Bootstrap(ctx, "admin-password", false); err != nil {
			t.Fatal(err)
		}
		adminTok, _, _, err := a.Login(ctx, "admin", "admin-password")
		if err != nil {
			t.Fatal(err)
		}
		admin, err := a.Authenticate(ctx, adminTok)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreateUser(ctx, model.DefaultTenant, identity.CreateUserRequest{Username: "frank", Password: "frank-password", Roles: []string{"admin"}}); err != nil {
			t.Fatal(err)
		}
		oldJWT, _, _, err := a.Login(ctx, "frank", "frank-password")
		if err != nil {
			t.Fatal(err)
		}
		oldFrank, err := b.Authenticate(ctx, oldJWT) // b caches the token and the user
		if err != nil {
			t.Fatal(err)
		}
		oldAPI, _, err := a.CreateAPIToken(ctx, oldFrank, identity.TokenRequest{Name: "frank-erp", Roles: []string{"admin"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Authenticate(ctx, oldAPI); err != nil {
			t.Fatal(err)
		}

		if err := a.DeleteUser(ctx, admin, "frank"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreateUser(ctx, model.DefaultTenant, identity.CreateUserRequest{Username: "frank", Password: "frank-password-2", Roles: []string{"admin", "auditor"}}); err != nil {
			t.Fatal(err)
		}
		newJWT, _, _, err := a.Login(ctx, "frank", "frank-password-2")
		if err != nil {
			t.Fatal(err)
		}
		refused := func(when string, replicas map[string]*identity.Service) {
			t.Helper()
			for name, svc := range replicas {
				if p, err := svc.Authenticate(ctx, oldJWT); !model.IsKind(err, model.EUNAUTHORIZED) {
					t.Fatalf("%s, replica %s: the old frank's login token: %+v %v", when, name, p, err)
				}
				if p, err := svc.Authenticate(ctx, oldAPI); !model.IsKind(err, model.EUNAUTHORIZED) {
					t.Fatalf("%s, replica %s: the old frank's API token: %+v %v", when, name, p, err)
				}
			}
		}
		// At once on the replica that deleted him; on the other once its user cache is older than UserCacheTTL.
		refused("at once", map[string]*identity.Service{"a": a})
		clk.Advance(6 * time.Second) // past b's user cache: b reads the new frank
		refused("past the user cache", map[string]*identity.Service{"a": a, "b": b})
		p, err := b.Authenticate(ctx, newJWT)
		if err != nil || p.Username != "frank" || len(p.Roles) != 2 || p.AccountID == oldFrank.AccountID {
			t.Fatalf("the new frank: %+v %v", p, err)
		}
		clk.Advance(time.Hour)
		refused("an hour later", map[string]*identity.Service{"a": a, "b": b})
	})
}

// TestLookAlikeUsernames: a username that differs from an existing one only in letter case is refused (409
// user_exists naming the holder); login stays exact.
func TestLookAlikeUsernames(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		a := newService(s, clock.NewFake(time.Now()))
		if _, err := a.Bootstrap(ctx, "admin-password", false); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"Admin", "ADMIN", "aDmIn"} {
			_, err := a.CreateUser(ctx, model.DefaultTenant, identity.CreateUserRequest{Username: name, Password: "lookalike-password", Roles: []string{"admin"}})
			if e, ok := err.(*model.Error); !ok || e.Code != "user_exists" || e.Details["conflicts_with"] != "admin" || !model.IsKind(err, model.ECONFLICT) {
				t.Fatalf("creating %s beside admin: %v", name, err)
			}
			if _, err := s.GetUser(ctx, model.DefaultTenant, name); !model.IsKind(err, model.ENOTFOUND) {
				t.Fatalf("%s was stored: %v", name, err)
			}
		}
		if _, _, _, err := a.Login(ctx, "ADMIN", "admin-password"); codeOf(err) != "invalid_credentials" {
			t.Fatalf("login with another case: %v", err)
		}
		if _, _, _, err := a.Login(ctx, "admin", "admin-password"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestPasswordChangeThrottle: a stolen session guessing the current password through POST /me/password gets 5
// tries per 15 minutes, counted together by two replicas sharing Redis, then 429 too_many_attempts whatever the
// password (also the right one); 40 guesses at once are still 5 tries; signing in is not locked by them; the lock
// lifts with the window and a right password forgets the failures.
func TestPasswordChangeThrottle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for name, newCounter := range counters(t) {
			t.Run(name, func(t *testing.T) {
				clk := clock.NewFake(time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC))
				a := serviceWith(s, clk, newCounter())
				b := a
				if name == "redis" {
					b = serviceWith(s, clk, newCounter())
				}
				user := "erin-" + name
				if _, err := a.CreateUser(ctx, model.DefaultTenant, identity.CreateUserRequest{Username: user, Password: "erin-password"}); err != nil {
					t.Fatal(err)
				}
				p := &model.Principal{TenantID: model.DefaultTenant, Username: user}
				t0 := clk.Now()
				var mu sync.Mutex
				codes := map[string]int{}
				var wg sync.WaitGroup
				for i := range 40 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						svc := []*identity.Service{a, b}[i%2]
						err := svc.ChangePassword(ctx, p, "guess-"+strconv.Itoa(i), "a-new-password")
						mu.Lock()
						codes[codeOf(err)]++
						mu.Unlock()
					}()
				}
				wg.Wait()
				if codes["wrong_password"] != 5 || codes["too_many_attempts"] != 35 {
					t.Fatalf("40 guesses at once: %v", codes)
				}
				clk.Advance(10 * time.Second)
				for _, svc := range []*identity.Service{a, b} {
					err := svc.ChangePassword(ctx, p, "erin-password", "a-new-password")
					if codeOf(err) != "too_many_attempts" || !model.IsKind(err, model.ERATELIMITED) || retryAfter(err) != 890 {
						t.Fatalf("the right password during the lock: %v (retry_after %d)", err, retryAfter(err))
					}
				}
				if _, _, _, err := b.LoginFrom(ctx, user, "erin-password", "10.0.0.9"); err != nil {
					t.Fatalf("signing in while password changes are locked: %v", err)
				}
				if u, _ := s.GetUser(ctx, model.DefaultTenant, user); bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte("erin-password")) != nil {
					t.Fatal("the password changed during the lock")
				}
				clk.Set(t0.Add(identity.LoginWindow))
				for i := range 4 {
					if err := a.ChangePassword(ctx, p, "wrong-again", "a-new-password"); codeOf(err) != "wrong_password" {
						t.Fatalf("failure %d after the window: %v", i+1, err)
					}
				}
				if err := b.ChangePassword(ctx, p, "erin-password", "a-new-password"); err != nil {
					t.Fatalf("the right password after the window: %v", err)
				}
				for i := range 4 {
					if err := a.ChangePassword(ctx, p, "wrong-once-more", "another-password"); codeOf(err) != "wrong_password" {
						t.Fatalf("failure %d after a success (the success forgot the earlier ones): %v", i+1, err)
					}
				}
			})
		}
	})
}
