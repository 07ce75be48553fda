package identity_test

import (
	"context"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

var ctx = context.Background()

func newService(s *store.Store, clk *clock.Fake) *identity.Service {
	return identity.New(s, identity.Options{Secret: []byte("identity-test-secret-identity-test"), BcryptCost: bcrypt.MinCost, Clock: clk})
}

func codeOf(err error) string {
	if e, ok := err.(*model.Error); ok {
		return e.Code
	}
	return ""
}

// TestBootstrapPasswordChange: the bootstrap admin created with the default password (or one the policy refuses)
// must change it; login says so until the change, which clears it.
func TestBootstrapPasswordChange(t *testing.T) {
	cases := []struct {
		name       string
		password   string
		defaulted  bool
		mustChange bool
	}{
		{"default password", "admin", true, true},
		{"a configured weak password", "admin12", false, true},
		{"a configured good password", "a-good-admin-password", false, false},
	}
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				if i > 0 {
					// One bootstrap per database: start each case on an empty users table.
					if err := s.DB().Exec("DELETE FROM user_roles").Error; err != nil {
						t.Fatal(err)
					}
					if err := s.DB().Exec("DELETE FROM users").Error; err != nil {
						t.Fatal(err)
					}
				}
				ids := newService(s, clock.NewFake(time.Now()))
				created, err := ids.Bootstrap(ctx, tc.password, tc.defaulted)
				if err != nil || !created {
					t.Fatalf("bootstrap: %v %v", created, err)
				}
				if again, err := ids.Bootstrap(ctx, tc.password, tc.defaulted); again || err != nil {
					t.Fatalf("a second bootstrap must do nothing: %v %v", again, err)
				}
				_, u, _, err := ids.Login(ctx, "admin", tc.password)
				if err != nil || u.PasswordChangeRequired != tc.mustChange || ids.BootstrapPasswordUnchanged(ctx) != tc.mustChange {
					t.Fatalf("login: %+v %v; want password_change_required %v", u, err, tc.mustChange)
				}
				p := &model.Principal{TenantID: model.DefaultTenant, Username: "admin", Roles: []string{"admin"}}
				if err := ids.ChangePassword(ctx, p, tc.password, "the admin's own password"); err != nil {
					t.Fatal(err)
				}
				if _, u, _, err = ids.Login(ctx, "admin", "the admin's own password"); err != nil || u.PasswordChangeRequired || ids.BootstrapPasswordUnchanged(ctx) {
					t.Fatalf("after the change: %+v %v", u, err)
				}
			})
		}
	})
}

// TestDisabledAcrossReplicas: a user disabled through one replica is refused by another within UserCacheTTL
// (5 s; a fake clock), with no read per request before that; the replica that disabled them refuses at once.
func TestDisabledAcrossReplicas(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		clk := clock.NewFake(time.Now())
		a, b := newService(s, clk), newService(s, clk)
		if _, err := a.Bootstrap(ctx, "admin-password", false); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreateUser(ctx, model.DefaultTenant, identity.CreateUserRequest{Username: "bob", Password: "bob-password", Roles: []string{"ops"}}); err != nil {
			t.Fatal(err)
		}
		tok, _, _, err := b.Login(ctx, "bob", "bob-password")
		if err != nil {
			t.Fatal(err)
		}
		if p, err := b.Authenticate(ctx, tok); err != nil || p.Username != "bob" || len(p.Roles) != 1 || p.Roles[0] != "ops" {
			t.Fatalf("b: %+v %v", p, err)
		}
		if _, err := a.Authenticate(ctx, tok); err != nil { // a has read bob too
			t.Fatal(err)
		}
		admin := &model.Principal{TenantID: model.DefaultTenant, Username: "admin", Roles: []string{"admin"}}
		yes := true
		if _, err := a.UpdateUser(ctx, admin, "bob", identity.UserPatch{Disabled: &yes, Roles: &[]string{"ops", "dba"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Authenticate(ctx, tok); codeOf(err) != "user_disabled" || !model.IsKind(err, model.EUNAUTHORIZED) {
			t.Fatalf("the replica that disabled bob must refuse at once: %v", err)
		}
		clk.Advance(4 * time.Second)
		if _, err := b.Authenticate(ctx, tok); err != nil {
			t.Fatalf("within the cache time the other replica has not read bob again (that is what keeps requests cheap): %v", err)
		}
		clk.Advance(1500 * time.Millisecond)
		if _, err := b.Authenticate(ctx, tok); codeOf(err) != "user_disabled" {
			t.Fatalf("after the cache time every replica refuses: %v", err)
		}
		if _, _, _, err := b.Login(ctx, "bob", "bob-password"); codeOf(err) != "user_disabled" || !model.IsKind(err, model.EFORBIDDEN) {
			t.Fatalf("login of a disabled user: %v", err)
		}
		// Enabled again: disabling ended bob's sessions for good (the token version moved), so the old token stays
		// refused; a new sign-in works, with the roles the store holds now.
		no := false
		if _, err := a.UpdateUser(ctx, admin, "bob", identity.UserPatch{Disabled: &no}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(6 * time.Second)
		if _, err := b.Authenticate(ctx, tok); codeOf(err) != "token_revoked" || !model.IsKind(err, model.EUNAUTHORIZED) {
			t.Fatalf("a token from before the disable, after re-enabling: %v", err)
		}
		tok, _, _, err = b.Login(ctx, "bob", "bob-password")
		if err != nil {
			t.Fatal(err)
		}
		if p, err := b.Authenticate(ctx, tok); err != nil || len(p.Roles) != 2 {
			t.Fatalf("re-enabled, signed in again: %+v %v", p, err)
		}
	})
}
