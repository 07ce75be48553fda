package store_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

func mkUser(t *testing.T, s *store.Store, name string, roles ...string) {
	t.Helper()
	if roles == nil {
		roles = []string{}
	}
	if err := s.CreateUser(ctx, &model.User{TenantID: model.DefaultTenant, Username: name, PasswordHash: "h-" + name, DisplayName: name, Roles: roles}); err != nil {
		t.Fatal(err)
	}
}

func TestUpdateUser(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		mkUser(t, s, "root", model.RoleAdmin)
		mkUser(t, s, "bob", "dba")
		got, err := s.UpdateUser(ctx, model.DefaultTenant, "bob", func(u *model.User) error {
			u.DisplayName, u.Department, u.Manager = "Bob 李", "eng", "root"
			u.Roles = []string{"admin", "ops"}
			u.Language, u.Email, u.Mobile, u.IMID = "zh-CN", "bob@example.com", "+86 138 0000 0000", "bob.im"
			u.PasswordHash, u.PasswordChangeRequired = "h2", true
			u.Username, u.TenantID = "mallory", "other" // cannot change
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.Username != "bob" || got.TenantID != model.DefaultTenant {
			t.Fatalf("the key changed: %+v", got)
		}
		read, _ := s.GetUser(ctx, model.DefaultTenant, "bob")
		if read.DisplayName != "Bob 李" || read.Department != "eng" || read.Manager != "root" || !slices.Equal(read.Roles, []string{"admin", "ops"}) ||
			read.Language != "zh-CN" || read.Email != "bob@example.com" || read.Mobile != "+86 138 0000 0000" || read.IMID != "bob.im" ||
			read.PasswordHash != "h2" || !read.PasswordChangeRequired || !read.UpdatedAt.After(read.CreatedAt) && !read.UpdatedAt.Equal(read.CreatedAt) {
			t.Fatalf("round trip: %+v", read)
		}
		// The role index follows.
		for role, want := range map[string][]string{"admin": {"bob", "root"}, "ops": {"bob"}, "dba": nil} {
			names, err := s.UsersWithRole(ctx, model.DefaultTenant, role)
			if err != nil || !slices.Equal(names, want) {
				t.Fatalf("UsersWithRole(%s) = %v, %v; want %v", role, names, err, want)
			}
		}
		// fn's error is returned and nothing is written.
		boom := errors.New("boom")
		if _, err := s.UpdateUser(ctx, model.DefaultTenant, "bob", func(u *model.User) error { u.DisplayName = "x"; return boom }); !errors.Is(err, boom) {
			t.Fatalf("fn error: %v", err)
		}
		if r, _ := s.GetUser(ctx, model.DefaultTenant, "bob"); r.DisplayName != "Bob 李" {
			t.Fatalf("a failed update wrote: %+v", r)
		}
		if _, err := s.UpdateUser(ctx, model.DefaultTenant, "nobody", func(*model.User) error { return nil }); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("unknown user: %v", err)
		}

		// Two admins: one may go; the last one may neither be disabled nor lose the role.
		if _, err := s.UpdateUser(ctx, model.DefaultTenant, "root", func(u *model.User) error { u.Disabled = true; return nil }); err != nil {
			t.Fatalf("disable one of two admins: %v", err)
		}
		for name, fn := range map[string]func(u *model.User){
			"disable":  func(u *model.User) { u.Disabled = true },
			"de-admin": func(u *model.User) { u.Roles = []string{"ops"} },
			"both":     func(u *model.User) { u.Disabled, u.Roles = true, nil },
		} {
			_, err := s.UpdateUser(ctx, model.DefaultTenant, "bob", func(u *model.User) error { fn(u); return nil })
			var de *model.Error
			if !errors.As(err, &de) || de.Kind != model.ECONFLICT || de.Code != "last_admin" {
				t.Fatalf("%s the last enabled admin: got %v, want conflict last_admin", name, err)
			}
		}
		// A disabled admin does not count; enabling root again lets bob go.
		if _, err := s.UpdateUser(ctx, model.DefaultTenant, "root", func(u *model.User) error { u.Disabled = false; return nil }); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateUser(ctx, model.DefaultTenant, "bob", func(u *model.User) error { u.Roles = []string{"ops"}; return nil }); err != nil {
			t.Fatalf("de-admin bob with root enabled: %v", err)
		}
		// Changes that keep an admin an admin, or touch non-admins, never hit the check.
		if _, err := s.UpdateUser(ctx, model.DefaultTenant, "root", func(u *model.User) error { u.DisplayName = "Root"; return nil }); err != nil {
			t.Fatal(err)
		}
	})
}

// TestUpdateUserKeepsAnAdmin: many admins disable themselves and demote each other at once; whatever the
// interleaving, exactly one enabled admin remains and every refusal is last_admin.
func TestUpdateUserKeepsAnAdmin(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		const n = 12
		var names []string
		for i := range n {
			name := fmt.Sprintf("admin%02d", i)
			names = append(names, name)
			mkUser(t, s, name, model.RoleAdmin, "staff")
		}
		mkUser(t, s, "plain", "staff")
		var wg sync.WaitGroup
		var mu sync.Mutex
		var ok, refused int
		var other []error
		for i, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.UpdateUser(ctx, model.DefaultTenant, name, func(u *model.User) error {
					if i%2 == 0 {
						u.Disabled = true
					} else {
						u.Roles = []string{"staff"}
					}
					return nil
				})
				// An unrelated change at the same time must not be blocked out or refused.
				_, perr := s.UpdateUser(ctx, model.DefaultTenant, "plain", func(u *model.User) error { u.DisplayName = "Plain " + name; return nil })
				mu.Lock()
				defer mu.Unlock()
				var de *model.Error
				switch {
				case err == nil:
					ok++
				case errors.As(err, &de) && de.Code == "last_admin":
					refused++
				default:
					other = append(other, err)
				}
				if perr != nil {
					other = append(other, perr)
				}
			}()
		}
		wg.Wait()
		if len(other) > 0 || ok != n-1 || refused != 1 {
			t.Fatalf("ok %d, refused %d, other errors %v; want %d ok and 1 refused", ok, refused, other, n-1)
		}
		enabled := 0
		for _, name := range names {
			u, err := s.GetUser(ctx, model.DefaultTenant, name)
			if err != nil {
				t.Fatal(err)
			}
			if u.IsEnabledAdmin() {
				enabled++
			}
		}
		admins, _ := s.UsersWithRole(ctx, model.DefaultTenant, model.RoleAdmin)
		if enabled != 1 || len(admins) < 1 {
			t.Fatalf("%d enabled admins remain (role holders %v), want exactly 1", enabled, admins)
		}
	})
}
