package store_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	halleysql "github.com/halley-bpm/halley/sql"
)

// TestAccountIDMigration applies migration account_ids to users and API tokens written before it: every user gets
// an account id of their own, every token with a living owner that owner's id (a token whose owner is gone none);
// look-alike usernames that already exist are kept as they are, reported at this and every later start, and the
// younger one gets the key once the older is deleted; new look-alikes are refused.
func TestAccountIDMigration(t *testing.T) {
	migs, err := store.LoadMigrations(halleysql.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	first := -1
	for i, m := range migs {
		if m.Name == "account_ids" {
			first = i
		}
	}
	if first < 0 {
		t.Fatal("no account_ids migration")
	}
	for _, d := range storetest.Dialects {
		t.Run(d, func(t *testing.T) {
			ctx := context.Background()
			var logs bytes.Buffer
			s, err := store.Open(ctx, store.Config{URL: storetest.URL(t, d), DataDir: t.TempDir(),
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.MigrateWith(ctx, migs[:first]); err != nil {
				t.Fatal(err)
			}
			db := s.DB()
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, name := range []string{"admin", "Admin", "bob", "ADMIN"} {
				if err := db.Exec("INSERT INTO users (tenant_id, username, password_hash, display_name, roles, department, manager, created_at, updated_at) "+
					"VALUES ('default', ?, 'x', ?, '[\"admin\"]', '', '', ?, ?)", name, name, at.Add(time.Duration(i)*time.Minute), at).Error; err != nil {
					t.Fatal(err)
				}
				if err := db.Exec("INSERT INTO user_roles (tenant_id, role, username) VALUES ('default', 'admin', ?)", name).Error; err != nil {
					t.Fatal(err)
				}
			}
			for _, tok := range [][2]string{{"t-admin", "admin"}, {"t-gone", "frank"}, {"t-legacy", ""}} {
				if err := db.Exec("INSERT INTO api_tokens (id, tenant_id, name, token_hash, roles, created_by, created_at, owner) VALUES (?, 'default', 'erp', ?, '[]', 'admin', ?, ?)",
					tok[0], strings.Repeat(tok[0][2:3], 64), at, tok[1]).Error; err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}

			ids := map[string]bool{}
			for _, name := range []string{"admin", "Admin", "bob", "ADMIN"} {
				u, err := s.GetUser(ctx, model.DefaultTenant, name)
				if err != nil {
					t.Fatalf("%s kept: %v", name, err)
				}
				if u.AccountID == "" || ids[u.AccountID] || u.Username != name || u.DisplayName != name {
					t.Fatalf("user %s after the migration: %+v", name, u)
				}
				ids[u.AccountID] = true
			}
			admin, _ := s.GetUser(ctx, model.DefaultTenant, "admin")
			owners := map[string]string{}
			rows, err := db.Raw("SELECT id, owner_id FROM api_tokens").Rows()
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id, owner string
				if err := rows.Scan(&id, &owner); err != nil {
					t.Fatal(err)
				}
				owners[id] = owner
			}
			_ = rows.Close()
			if owners["t-admin"] != admin.AccountID || owners["t-gone"] != "" || owners["t-legacy"] != "" {
				t.Fatalf("token owners %v (admin is %s)", owners, admin.AccountID)
			}

			conflicts, err := s.UsernameConflicts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			want := []store.UsernameConflict{{TenantID: "default", Username: "Admin", Holder: "admin"}, {TenantID: "default", Username: "ADMIN", Holder: "admin"}}
			if len(conflicts) != 2 || conflicts[0] != want[0] || conflicts[1] != want[1] {
				t.Fatalf("conflicts %+v, want %+v", conflicts, want)
			}
			for _, name := range []string{"Admin", "ADMIN"} {
				if !strings.Contains(logs.String(), "username="+name+" same_as=admin") {
					t.Errorf("the migration did not report %s:\n%s", name, logs.String())
				}
			}
			// Reported at every start until resolved.
			logs.Reset()
			if _, err := s.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs.String(), "username=Admin same_as=admin") {
				t.Errorf("a later start did not report the conflict:\n%s", logs.String())
			}

			err = s.CreateUser(ctx, &model.User{TenantID: model.DefaultTenant, Username: "aDMIN", Roles: []string{}})
			if e, ok := err.(*model.Error); !ok || e.Code != "user_exists" || e.Details["conflicts_with"] != "admin" {
				t.Fatalf("a new look-alike: %v", err)
			}
			if _, err := s.DeleteUser(ctx, model.DefaultTenant, "admin"); err != nil {
				t.Fatal(err)
			}
			// The oldest look-alike takes the name's key; the other is still reported, now against it.
			conflicts, err = s.UsernameConflicts(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(conflicts) != 1 || conflicts[0].Username != "ADMIN" || conflicts[0].Holder != "Admin" {
				t.Fatalf("conflicts after deleting admin: %+v", conflicts)
			}
			err = s.CreateUser(ctx, &model.User{TenantID: model.DefaultTenant, Username: "admin", Roles: []string{}})
			if e, ok := err.(*model.Error); !ok || e.Code != "user_exists" || e.Details["conflicts_with"] != "Admin" {
				t.Fatalf("re-creating admin beside Admin: %v", err)
			}
		})
	}
}
