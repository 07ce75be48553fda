package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

var ctx = context.Background()

func TestUsers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		u := &model.User{TenantID: model.DefaultTenant, Username: "bob", PasswordHash: "$2a$hash", DisplayName: "Bob 李",
			Department: "eng", Manager: "alice", Roles: []string{"dba", "admin"}}
		if err := s.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		err := s.CreateUser(ctx, &model.User{TenantID: model.DefaultTenant, Username: "bob", PasswordHash: "x"})
		if !model.IsKind(err, model.ECONFLICT) {
			t.Fatalf("duplicate user: got %v, want conflict", err)
		}
		got, err := s.GetUser(ctx, model.DefaultTenant, "bob")
		if err != nil {
			t.Fatal(err)
		}
		if got.DisplayName != "Bob 李" || got.Manager != "alice" || got.PasswordHash != "$2a$hash" || !slices.Equal(got.Roles, []string{"dba", "admin"}) {
			t.Fatalf("round trip: %+v", got)
		}
		if got.CreatedAt.IsZero() || got.CreatedAt.Location() != time.UTC {
			t.Fatalf("created_at = %v, want a UTC time", got.CreatedAt)
		}
		if _, err := s.GetUser(ctx, model.DefaultTenant, "BOB"); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("usernames are case-sensitive on every backend: got %v", err)
		}
		if _, err := s.GetUser(ctx, "other", "bob"); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("other tenant: got %v", err)
		}
		for _, n := range []string{"carol", "dave", "erin"} {
			if err := s.CreateUser(ctx, &model.User{TenantID: model.DefaultTenant, Username: n, PasswordHash: "x", Roles: []string{"dba"}}); err != nil {
				t.Fatal(err)
			}
		}
		names, err := s.UsersWithRole(ctx, model.DefaultTenant, "dba")
		if err != nil || !slices.Equal(names, []string{"bob", "carol", "dave", "erin"}) {
			t.Fatalf("UsersWithRole = %v, %v", names, err)
		}
		page1, next, err := s.ListUsers(ctx, model.DefaultTenant, "", model.Page{Limit: 3})
		if err != nil || len(page1) != 3 || next != "dave" {
			t.Fatalf("page 1 = %d users, next %q, %v", len(page1), next, err)
		}
		page2, next, err := s.ListUsers(ctx, model.DefaultTenant, "", model.Page{Limit: 3, Cursor: next})
		if err != nil || len(page2) != 1 || page2[0].Username != "erin" || next != "" {
			t.Fatalf("page 2 = %v, next %q, %v", page2, next, err)
		}
		admins, _, err := s.ListUsers(ctx, model.DefaultTenant, "admin", model.Page{Limit: 10})
		if err != nil || len(admins) != 1 || admins[0].Username != "bob" {
			t.Fatalf("role filter = %v, %v", admins, err)
		}
		if n, err := s.CountUsers(ctx); err != nil || n != 4 {
			t.Fatalf("CountUsers = %d, %v", n, err)
		}
	})
}

func TestAPITokensAndDepartments(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		tok := &model.APIToken{ID: "t1", TenantID: model.DefaultTenant, Name: "erp", Hash: "ab12", Roles: []string{"erp"}, CreatedBy: "admin"}
		if err := s.CreateAPIToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetAPITokenByHash(ctx, "ab12")
		if err != nil || got.Name != "erp" || !slices.Equal(got.Roles, []string{"erp"}) {
			t.Fatalf("GetAPITokenByHash = %+v, %v", got, err)
		}
		if _, err := s.GetAPITokenByHash(ctx, "nope"); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("unknown hash: %v", err)
		}
		if err := s.CreateDepartment(ctx, &model.Department{TenantID: model.DefaultTenant, Name: "eng", Leader: "alice"}); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateDepartment(ctx, &model.Department{TenantID: model.DefaultTenant, Name: "eng"}); !model.IsKind(err, model.ECONFLICT) {
			t.Fatalf("duplicate department: %v", err)
		}
		d, err := s.GetDepartment(ctx, model.DefaultTenant, "eng")
		if err != nil || d.Leader != "alice" {
			t.Fatalf("GetDepartment = %+v, %v", d, err)
		}
		ds, err := s.ListDepartments(ctx, model.DefaultTenant)
		if err != nil || len(ds) != 1 {
			t.Fatalf("ListDepartments = %v, %v", ds, err)
		}
	})
}

func TestIdempotencyRecords(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		s.SetNow(func() time.Time { return now })
		rec := &model.IdempotencyRecord{TenantID: "default", Username: "bob", Key: "k1", RequestHash: "h1"}
		old, claimed, err := s.BeginIdempotent(ctx, rec, now.Add(-24*time.Hour))
		if err != nil || !claimed || old != nil {
			t.Fatalf("first claim = %v %v %v", old, claimed, err)
		}
		old, claimed, err = s.BeginIdempotent(ctx, &model.IdempotencyRecord{TenantID: "default", Username: "bob", Key: "k1", RequestHash: "h1"}, now.Add(-24*time.Hour))
		if err != nil || claimed || old == nil || old.StatusCode != 0 {
			t.Fatalf("claim while in flight = %+v %v %v", old, claimed, err)
		}
		rec.StatusCode, rec.Body = 201, []byte(`{"ok":true}`)
		if err := s.FinishIdempotent(ctx, rec); err != nil {
			t.Fatal(err)
		}
		old, claimed, _ = s.BeginIdempotent(ctx, &model.IdempotencyRecord{TenantID: "default", Username: "bob", Key: "k1", RequestHash: "h1"}, now.Add(-24*time.Hour))
		if claimed || old.StatusCode != 201 || string(old.Body) != `{"ok":true}` || old.RequestHash != "h1" {
			t.Fatalf("replay = %+v %v", old, claimed)
		}
		// Another user may use the same key.
		if _, claimed, _ := s.BeginIdempotent(ctx, &model.IdempotencyRecord{TenantID: "default", Username: "carol", Key: "k1", RequestHash: "h9"}, now.Add(-24*time.Hour)); !claimed {
			t.Fatal("a key is per user")
		}
		// After 24 h the key is free again.
		now = now.Add(25 * time.Hour)
		if _, claimed, _ := s.BeginIdempotent(ctx, &model.IdempotencyRecord{TenantID: "default", Username: "bob", Key: "k1", RequestHash: "h2"}, now.Add(-24*time.Hour)); !claimed {
			t.Fatal("expired key must be claimable")
		}
		if err := s.AbandonIdempotent(ctx, "default", "bob", "k1"); err != nil {
			t.Fatal(err)
		}
		if _, claimed, _ := s.BeginIdempotent(ctx, &model.IdempotencyRecord{TenantID: "default", Username: "bob", Key: "k1", RequestHash: "h3"}, now.Add(-24*time.Hour)); !claimed {
			t.Fatal("abandoned key must be claimable")
		}
		// A key in flight is taken over by one caller once it is older than the cut-off, and only then.
		if took, err := s.TakeOverIdempotent(ctx, "default", "bob", "k1", now); err != nil || took {
			t.Fatalf("take over of a fresh claim = %v, %v", took, err)
		}
		now = now.Add(2 * time.Minute)
		if took, err := s.TakeOverIdempotent(ctx, "default", "bob", "k1", now.Add(-time.Minute)); err != nil || !took {
			t.Fatalf("take over of a stale claim = %v, %v", took, err)
		}
		if took, _ := s.TakeOverIdempotent(ctx, "default", "bob", "k1", now.Add(-time.Minute)); took {
			t.Fatal("a claim taken over is fresh again")
		}
		if _, ok, err := s.IdempotentCommit(ctx, "default", "bob", "k1"); err != nil || ok {
			t.Fatalf("commit of a key whose work did not commit = %v, %v", ok, err)
		}
		if err := s.DB().Exec("INSERT INTO idempotency_commits (tenant_id, username, idem_key, instance_id, created_at) VALUES ('default', 'bob', 'k1', 'i-1', ?)", now).Error; err != nil {
			t.Fatal(err)
		}
		if id, ok, err := s.IdempotentCommit(ctx, "default", "bob", "k1"); err != nil || !ok || id != "i-1" {
			t.Fatalf("commit = %q %v %v", id, ok, err)
		}
		n, err := s.PurgeIdempotent(ctx, now.Add(-time.Hour))
		if err != nil || n != 1 { // carol's, created 25 h ago
			t.Fatalf("purge = %d, %v", n, err)
		}
		// When a key expires, the record of its work goes with it, and the key may do new work.
		now = now.Add(25 * time.Hour)
		if _, claimed, _ := s.BeginIdempotent(ctx, &model.IdempotencyRecord{TenantID: "default", Username: "bob", Key: "k1", RequestHash: "h4"}, now.Add(-24*time.Hour)); !claimed {
			t.Fatal("expired key must be claimable")
		}
		if _, ok, _ := s.IdempotentCommit(ctx, "default", "bob", "k1"); ok {
			t.Fatal("the commit record of an expired key survived its renewal")
		}
	})
}

func TestPurgeFinished(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		s.SetNow(func() time.Time { return old })
		for _, tm := range []*model.Timer{
			{ID: "done", TenantID: "default", Kind: model.TimerDelay, DueAt: old, Status: model.TimerFired},
			{ID: "live", TenantID: "default", Kind: model.TimerDelay, DueAt: old.AddDate(1, 0, 0), Status: model.TimerPending},
		} {
			if err := s.SaveTimer(ctx, tm); err != nil {
				t.Fatal(err)
			}
		}
		n, err := s.PurgeFinished(ctx, old.Add(time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("purged %d, %v", n, err)
		}
		left, _ := s.PendingTimers(ctx, "", 10)
		if len(left) != 1 || left[0].ID != "live" {
			t.Fatalf("a pending timer was purged: %v", left)
		}
	})
}

func TestLatestVersion(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		now := time.Now().UTC()
		def := []byte(`{"nodes":[]}`)
		if err := s.CreateTemplate(ctx, &model.Template{TenantID: model.DefaultTenant, Key: "leave", Name: "Leave", Draft: def, CreatedBy: "admin",
			CreatedAt: now, UpdatedAt: now, DraftUpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		if v, err := s.LatestVersion(ctx, model.DefaultTenant, "leave"); err != nil || v != 0 {
			t.Fatalf("before publishing: %d, %v; want 0", v, err)
		}
		for want := 1; want <= 2; want++ {
			if _, err := s.PublishVersion(ctx, model.DefaultTenant, "leave", def, "admin", now, func(int) error { return nil }); err != nil {
				t.Fatal(err)
			}
			if v, err := s.LatestVersion(ctx, model.DefaultTenant, "leave"); err != nil || v != want {
				t.Fatalf("after publish %d: %d, %v", want, v, err)
			}
		}
		for _, c := range []struct{ tenant, key string }{{model.DefaultTenant, "nope"}, {"other", "leave"}, {model.DefaultTenant, "LEAVE"}} {
			if _, err := s.LatestVersion(ctx, c.tenant, c.key); !model.IsKind(err, model.ENOTFOUND) {
				t.Fatalf("%s/%s: got %v, want not found", c.tenant, c.key, err)
			}
		}
	})
}

// TestSaveDraftUnchanged: saving the draft a template already has, at the same instant, succeeds on both backends
// (MySQL reports no changed row for it); an unknown or hidden template is still ENOTFOUND.
func TestSaveDraftUnchanged(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		now := time.Now().UTC()
		def := []byte(`{"nodes":[]}`)
		if err := s.CreateTemplate(ctx, &model.Template{TenantID: model.DefaultTenant, Key: "leave", Name: "Leave", Draft: def, CreatedBy: "admin"}); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if err := s.SaveDraft(ctx, model.DefaultTenant, "leave", json.RawMessage(`{"nodes":[{"id":"a"}]}`), now); err != nil {
				t.Fatalf("save %d of the same draft at the same instant: %v", i+1, err)
			}
		}
		if got, err := s.GetTemplate(ctx, model.DefaultTenant, "leave"); err != nil || string(got.Draft) != `{"nodes":[{"id":"a"}]}` {
			t.Fatalf("the draft: %s, %v", got.Draft, err)
		}
		if err := s.SaveDraft(ctx, model.DefaultTenant, "nope", json.RawMessage(`{}`), now); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("an unknown template: %v, want not found", err)
		}
	})
}

// TestEngineStoreContract: both backends keep the contract the engine relies on (storetest.EngineStoreContract;
// the engine's test doubles run the same suite in engine_test).
func TestEngineStoreContract(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) { storetest.EngineStoreContract(t, s, s) })
}
