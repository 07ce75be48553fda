package store_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	halleysql "github.com/halley-bpm/halley/sql"
)

func TestMigrations(t *testing.T) {
	migs, err := store.LoadMigrations(halleysql.Migrations)
	if err != nil || len(migs) == 0 {
		t.Fatalf("LoadMigrations = %d, %v", len(migs), err)
	}
	latest := migs[len(migs)-1].Version
	for _, d := range storetest.Dialects {
		t.Run(d, func(t *testing.T) {
			u := storetest.URL(t, d)
			s, err := store.Open(context.Background(), store.Config{URL: u, DataDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if v, _ := s.SchemaVersion(ctx); v != 0 {
				t.Fatalf("fresh database at version %d", v)
			}
			n, err := s.Migrate(ctx)
			if err != nil || n != len(migs) {
				t.Fatalf("fresh apply: %d applied, %v", n, err)
			}
			if v, _ := s.SchemaVersion(ctx); v != latest {
				t.Fatalf("version after apply = %d, want %d", v, latest)
			}
			n, err = s.Migrate(ctx)
			if err != nil || n != 0 {
				t.Fatalf("re-apply: %d applied, %v; want a no-op", n, err)
			}
			// A database migrated by a newer binary is refused.
			newer := append(append([]store.Migration{}, migs...), store.Migration{Version: latest + 1, Name: "future", Statements: []string{"CREATE TABLE future_thing (id INT NOT NULL PRIMARY KEY) ENGINE=InnoDB"}})
			if n, err := s.MigrateWith(ctx, newer); err != nil || n != 1 {
				t.Fatalf("apply future migration: %d, %v", n, err)
			}
			_, err = s.Migrate(ctx)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("version %d", latest+1)) {
				t.Fatalf("a newer schema must be refused, got %v", err)
			}
		})
	}
}

func TestMigrationFilesAreOrdered(t *testing.T) {
	fs := fstest.MapFS{
		"0001_a.sql": {Data: []byte("CREATE TABLE a (id INT);\n")},
		"0003_c.sql": {Data: []byte("CREATE TABLE c (id INT);\n")},
	}
	if _, err := store.LoadMigrations(fs); err == nil {
		t.Fatal("a gap in the numbering must be refused")
	}
}

func TestToSQLite(t *testing.T) {
	in := "CREATE TABLE x (\n  seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,\n  a VARCHAR(10) NOT NULL,\n  at DATETIME(6) NULL\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
	want := "CREATE TABLE x (\n  seq INTEGER PRIMARY KEY AUTOINCREMENT,\n  a VARCHAR(10) NOT NULL,\n  at DATETIME NULL\n)"
	if got := store.ToSQLite(in); got != want {
		t.Fatalf("ToSQLite:\n%s\nwant\n%s", got, want)
	}
	for in, want := range map[string]string{
		"DROP INDEX idx_a ON bookmarks":       "DROP INDEX idx_a",
		"drop index idx_a\n  on bookmarks":    "drop index idx_a",
		"CREATE INDEX idx_a ON bookmarks (a)": "CREATE INDEX idx_a ON bookmarks (a)",
	} {
		if got := store.ToSQLite(in); got != want {
			t.Errorf("ToSQLite(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSchemasMatch proves the SQLite schema derived from the MySQL migrations has the same tables, columns
// (in order, with the same nullability) and indexes as MySQL.
func TestSchemasMatch(t *testing.T) {
	lite := describe(t, storetest.Open(t, store.SQLite))
	my := describe(t, storetest.Open(t, store.MySQL))
	if !reflect.DeepEqual(lite, my) {
		for k := range my {
			if !reflect.DeepEqual(lite[k], my[k]) {
				t.Errorf("%s:\n  mysql  %v\n  sqlite %v", k, my[k], lite[k])
			}
		}
		for k := range lite {
			if _, ok := my[k]; !ok {
				t.Errorf("%s only in sqlite", k)
			}
		}
	}
}

// describe returns "table" → columns "name null|notnull" and "index name" → its columns and uniqueness.
func describe(t *testing.T, s *store.Store) map[string][]string {
	t.Helper()
	db := s.DB()
	out := map[string][]string{}
	var tables []string
	if s.Dialect() == store.MySQL {
		db.Raw("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&tables)
	} else {
		db.Raw("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").Scan(&tables)
	}
	if len(tables) < 3 {
		t.Fatalf("%s: only %d tables", s.Dialect(), len(tables))
	}
	for _, tb := range tables {
		type col struct {
			Name    string
			NotNull bool
		}
		var cols []col
		if s.Dialect() == store.MySQL {
			db.Raw("SELECT column_name AS name, is_nullable = 'NO' AS not_null FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? ORDER BY ordinal_position", tb).Scan(&cols)
		} else {
			db.Raw("SELECT name, \"notnull\" OR pk > 0 AS not_null FROM pragma_table_info(?) ORDER BY cid", tb).Scan(&cols)
		}
		for _, c := range cols {
			out["table "+tb] = append(out["table "+tb], fmt.Sprintf("%s %v", strings.ToLower(c.Name), c.NotNull))
		}
		type idx struct {
			Name   string
			Column string
			Unique bool
		}
		var idxs []idx
		if s.Dialect() == store.MySQL {
			db.Raw("SELECT index_name AS name, column_name AS `column`, non_unique = 0 AS `unique` FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? AND index_name <> 'PRIMARY' ORDER BY index_name, seq_in_index", tb).Scan(&idxs)
		} else {
			db.Raw("SELECT il.name AS name, ii.name AS `column`, il.\"unique\" AS `unique` FROM pragma_index_list(?) il, pragma_index_info(il.name) ii WHERE il.origin = 'c' ORDER BY il.name, ii.seqno", tb).Scan(&idxs)
		}
		for _, i := range idxs {
			k := "index " + strings.ToLower(i.Name)
			if len(out[k]) == 0 {
				out[k] = append(out[k], fmt.Sprintf("on %s unique=%v", tb, i.Unique))
			}
			out[k] = append(out[k], strings.ToLower(i.Column))
		}
	}
	return out
}
