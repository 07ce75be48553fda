package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	halleysql "github.com/halley-bpm/halley/sql"
)

// TestAccessMigrationsMoveData applies the access-control migrations to a database holding rows written before
// them: synthetic initiators become "system:*" on instances and tasks (and the resubmit tasks they were assigned),
// and running instances that share a correlation id keep running, the oldest holding the claim.
func TestAccessMigrationsMoveData(t *testing.T) {
	migs, err := store.LoadMigrations(halleysql.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	first := -1
	for i, m := range migs {
		if m.Name == "synthetic_initiators" {
			first = i
		}
	}
	if first < 0 {
		t.Fatal("no synthetic_initiators migration")
	}
	for _, d := range storetest.Dialects {
		t.Run(d, func(t *testing.T) {
			ctx := context.Background()
			s, err := store.Open(ctx, store.Config{URL: storetest.URL(t, d), DataDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.MigrateWith(ctx, migs[:first]); err != nil {
				t.Fatal(err)
			}
			db := s.DB()
			now := time.Now().UTC()
			inst := func(id, tkey, status, initiator, corr string) {
				t.Helper()
				if err := db.Exec("INSERT INTO instances (id, tenant_id, tkey, version, title, status, initiator, correlation_id, context, state, rev, created_at, updated_at) "+
					"VALUES (?, 'default', ?, 1, 't', ?, ?, ?, '{}', '{}', 1, ?, ?)", id, tkey, status, initiator, corr, now, now).Error; err != nil {
					t.Fatal(err)
				}
			}
			task := func(id, instance, assignee, kind, initiator string) {
				t.Helper()
				if err := db.Exec("INSERT INTO tasks (id, tenant_id, instance_id, node_id, node_name, node_instance_id, assignee, status, kind, grp, position, parent_id, "+
					"after_signers, comment, data, decided_by, title, tkey, initiator, created_at) VALUES (?, 'default', ?, 'n', 'n', 'ni', ?, 'pending', ?, 0, 0, '', '[]', '', '{}', '', 't', 'k', ?, ?)",
					id, instance, assignee, kind, initiator, now).Error; err != nil {
					t.Fatal(err)
				}
			}
			inst("i1", "nightly", "running", "cron", "cron:t1")
			inst("i2", "form", "running", "anonymous", "")
			inst("i3", "leave", "running", "bob", "dup")
			inst("i4", "leave", "running", "carol", "dup")
			inst("i5", "leave", "completed", "dave", "dup")
			inst("i6", "other", "running", "bob", "dup")
			task("i2.t1", "i2", "anonymous", "resubmit", "anonymous")
			task("i2.t2", "i2", "erin", "approval", "anonymous")
			task("i1.t1", "i1", "frank", "approval", "cron")
			task("i3.t1", "i3", "anonymous", "approval", "bob") // a user of that name, assigned by name: left alone

			if _, err := s.MigrateWith(ctx, migs); err != nil {
				t.Fatal(err)
			}
			col := func(q string, args ...any) string {
				t.Helper()
				var v string
				if err := db.Raw(q, args...).Scan(&v).Error; err != nil {
					t.Fatal(err)
				}
				return v
			}
			for id, want := range map[string]string{"i1": "system:cron", "i2": "system:anonymous", "i3": "bob"} {
				if got := col("SELECT initiator FROM instances WHERE id = ?", id); got != want {
					t.Errorf("instance %s initiator %q, want %q", id, got, want)
				}
			}
			for id, want := range map[string][2]string{"i2.t1": {"system:anonymous", "system:anonymous"}, "i2.t2": {"erin", "system:anonymous"},
				"i1.t1": {"frank", "system:cron"}, "i3.t1": {"anonymous", "bob"}} {
				if a, i := col("SELECT assignee FROM tasks WHERE id = ?", id), col("SELECT initiator FROM tasks WHERE id = ?", id); a != want[0] || i != want[1] {
					t.Errorf("task %s: assignee %q initiator %q, want %v", id, a, i, want)
				}
			}
			type claim struct{ Tkey, CorrelationID, InstanceID string }
			var claims []claim
			db.Raw("SELECT tkey, correlation_id, instance_id FROM running_correlations ORDER BY tkey, correlation_id").Scan(&claims)
			want := []claim{{"leave", "dup", "i3"}, {"nightly", "cron:t1", "i1"}, {"other", "dup", "i6"}}
			if len(claims) != len(want) {
				t.Fatalf("claims %v, want %v", claims, want)
			}
			for i := range want {
				if claims[i] != want[i] {
					t.Fatalf("claims %v, want %v", claims, want)
				}
			}
		})
	}
}
