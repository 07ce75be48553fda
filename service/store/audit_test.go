package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestDeleteUserKeepsAnAdmin: admins deleting each other and disabling themselves at once, under the same lock
// as UpdateUser: exactly one enabled admin remains, every refusal is last_admin; a deleted user's roles and the
// API tokens they own go with them.
func TestDeleteUserKeepsAnAdmin(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		const n = 10
		var names []string
		for i := range n {
			name := fmt.Sprintf("admin%02d", i)
			names = append(names, name)
			mkUser(t, s, name, model.RoleAdmin)
			if err := s.CreateAPIToken(ctx, &model.APIToken{ID: "tok-" + name, TenantID: model.DefaultTenant, Name: "erp", Hash: strings.Repeat(fmt.Sprint(i%10), 64),
				Roles: []string{}, Owner: name, CreatedBy: name}); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var ok, refused int
		var other []error
		for i, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if i%3 == 0 {
					_, err = s.UpdateUser(ctx, model.DefaultTenant, name, func(u *model.User) error { u.Disabled = true; return nil })
				} else {
					_, err = s.DeleteUser(ctx, model.DefaultTenant, name)
				}
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
			}()
		}
		wg.Wait()
		if len(other) > 0 || ok != n-1 || refused != 1 {
			t.Fatalf("ok %d, refused %d, other %v; want %d and 1", ok, refused, other, n-1)
		}
		enabled, deleted := 0, 0
		for i, name := range names {
			u, err := s.GetUser(ctx, model.DefaultTenant, name)
			if model.IsKind(err, model.ENOTFOUND) {
				deleted++
				if _, err := s.GetAPITokenByHash(ctx, strings.Repeat(fmt.Sprint(i%10), 64)); !model.IsKind(err, model.ENOTFOUND) {
					t.Fatalf("the token of deleted %s: %v", name, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.IsEnabledAdmin() {
				enabled++
			}
		}
		admins, _ := s.UsersWithRole(ctx, model.DefaultTenant, model.RoleAdmin)
		if enabled != 1 || deleted == 0 || len(admins) != n-deleted {
			t.Fatalf("%d enabled admins, %d deleted, role index %v", enabled, deleted, admins)
		}
	})
}

// TestAuditInTheChangesTransaction: an entry carried by the context is written by the store transaction of the
// change, with before and after, and not when the change fails (nor by a second transaction of the request).
func TestAuditInTheChangesTransaction(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		mkUser(t, s, "root", model.RoleAdmin)
		mkUser(t, s, "bob", "ops")
		count := func() int64 {
			var n int64
			s.DB().Table("audit_log").Count(&n)
			return n
		}
		// A refused change writes nothing.
		e := &model.AuditEntry{TenantID: model.DefaultTenant, Actor: "root", Action: model.AuditUserUpdate, Target: "root"}
		_, err := s.UpdateUser(model.WithAudit(ctx, e), model.DefaultTenant, "root", func(u *model.User) error { u.Disabled = true; return nil })
		if !model.IsKind(err, model.ECONFLICT) || count() != 0 || e.Written() {
			t.Fatalf("a refused change: %v, %d entries, written %v", err, count(), e.Written())
		}
		e = &model.AuditEntry{TenantID: model.DefaultTenant, Actor: "root", Action: model.AuditUserUpdate, Target: "bob", IP: "10.0.0.1", RequestID: "r1"}
		actx := model.WithAudit(ctx, e)
		if _, err := s.UpdateUser(actx, model.DefaultTenant, "bob", func(u *model.User) error {
			u.Roles, u.PasswordHash = []string{"dba"}, "new-hash"
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !e.Written() || count() != 1 {
			t.Fatalf("written %v, %d entries", e.Written(), count())
		}
		// A second transaction of the same request does not write it again.
		if _, err := s.UpdateUser(actx, model.DefaultTenant, "bob", func(u *model.User) error { u.DisplayName = "B"; return nil }); err != nil || count() != 1 {
			t.Fatalf("second transaction: %v, %d entries", err, count())
		}
		items, _, err := s.ListAudit(ctx, model.AuditFilter{TenantID: model.DefaultTenant, Page: model.Page{Limit: 10}})
		if err != nil || len(items) != 1 {
			t.Fatalf("list: %v %v", items, err)
		}
		got := items[0]
		var before, after map[string]any
		if err := json.Unmarshal(got.Before, &before); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got.After, &after); err != nil {
			t.Fatal(err)
		}
		if got.Actor != "root" || got.Action != "user.update" || got.Target != "bob" || got.IP != "10.0.0.1" || got.RequestID != "r1" ||
			fmt.Sprint(before["roles"]) != "[ops]" || fmt.Sprint(after["roles"]) != "[dba]" || after["token_version"] != float64(1) {
			t.Fatalf("entry: %+v\nbefore %s\nafter %s", got, got.Before, got.After)
		}
		if strings.Contains(string(got.Before)+string(got.After), "hash") {
			t.Fatalf("a password hash in the audit log: %s %s", got.Before, got.After)
		}
	})
}

// TestAuditListAndPurge: newest first by (at, id) through every page; filters by actor, action (exact or a
// prefix with '*') and time range; a malformed cursor is invalid_cursor; the purge deletes only what is older than
// its cutoff, in batches.
func TestAuditListAndPurge(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		actions := []string{model.AuditTemplateCreate, model.AuditTemplatePublish, model.AuditUserCreate, model.AuditTokenDelete}
		const n = 40
		for i := range n {
			e := &model.AuditEntry{TenantID: model.DefaultTenant, At: t0.Add(time.Duration(i/2) * time.Hour), Actor: []string{"alice", "bob"}[i%2],
				Action: actions[i%4], Target: fmt.Sprintf("t%02d", i), After: json.RawMessage(`{"n":` + fmt.Sprint(i) + `}`)}
			if err := s.AppendAudit(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AppendAudit(ctx, &model.AuditEntry{TenantID: "other", At: t0, Actor: "alice", Action: model.AuditUserCreate, Target: "x"}); err != nil {
			t.Fatal(err)
		}
		list := func(f model.AuditFilter) []string {
			t.Helper()
			f.TenantID = model.DefaultTenant
			f.Page.Limit = 7
			var out []string
			for {
				items, next, err := s.ListAudit(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				for _, it := range items {
					out = append(out, it.Target)
				}
				if next == "" {
					return out
				}
				f.Page.Cursor = next
			}
		}
		all := list(model.AuditFilter{})
		if len(all) != n || all[0] != "t39" || all[1] != "t38" || all[n-1] != "t00" {
			t.Fatalf("all, newest first: %v", all)
		}
		if got := list(model.AuditFilter{Actor: "bob"}); len(got) != 20 || got[0] != "t39" {
			t.Fatalf("bob: %v", got)
		}
		if got := list(model.AuditFilter{Action: "template.*"}); len(got) != 20 {
			t.Fatalf("template.*: %v", got)
		}
		if got := list(model.AuditFilter{Action: model.AuditTokenDelete, Actor: "bob"}); len(got) != 10 || got[0] != "t39" {
			t.Fatalf("bob's token deletes: %v", got)
		}
		if got := list(model.AuditFilter{Action: "template_*"}); len(got) != 0 {
			t.Fatalf("'_' is not a wildcard: %v", got)
		}
		// from inclusive, to exclusive: hours 5 to 7 are entries 10..15.
		if got := list(model.AuditFilter{From: t0.Add(5 * time.Hour), To: t0.Add(8 * time.Hour)}); strings.Join(got, ",") != "t15,t14,t13,t12,t11,t10" {
			t.Fatalf("range: %v", got)
		}
		if _, _, err := s.ListAudit(ctx, model.AuditFilter{TenantID: model.DefaultTenant, Page: model.Page{Limit: 5, Cursor: "bm90LWEtY3Vyc29y"}}); !model.IsKind(err, model.EINVALID) {
			t.Fatalf("bad cursor: %v", err)
		}
		// Purge what is older than hour 10 (entries 0..19), 7 at a time.
		var purged int64
		for {
			k, err := s.PurgeAudit(ctx, t0.Add(10*time.Hour), 7)
			if err != nil {
				t.Fatal(err)
			}
			purged += k
			if k < 7 {
				break
			}
		}
		// 20 of this tenant and the other tenant's one (at t0): the retention is the deployment's.
		if purged != 21 {
			t.Fatalf("purged %d, want 21", purged)
		}
		if got := list(model.AuditFilter{}); len(got) != 20 || got[n/2-1] != "t20" {
			t.Fatalf("after the purge: %v", got)
		}
	})
}
