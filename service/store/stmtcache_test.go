package store_test

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// stmtCacheDB opens a one-connection pool on the test MariaDB whose connection keeps size block statements
// prepared, with a scratch table. On MySQL (no compound statements there) it skips, and fails under CI=true, whose
// server is MariaDB.
func stmtCacheDB(t *testing.T, size int) *sql.DB {
	t.Helper()
	_, dsn, err := store.ParseURL(storetest.URL(t, store.MySQL), "")
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.OpenStmtCacheDB(dsn, size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	var version string
	if err := db.QueryRow("SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(version, "MariaDB") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the test server is %s; CI runs these on MariaDB (compound statements are MariaDB's)", version)
		}
		t.Skip("compound statements are MariaDB's; this server is " + version)
	}
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS stmtcache_t (id INT PRIMARY KEY, v TEXT)"); err != nil {
		t.Fatal(err)
	}
	return db
}

// sessionCount is a session status counter of the connection behind q (a one-connection pool, or a pinned
// connection).
func sessionCount(t *testing.T, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, name string) int {
	t.Helper()
	var n int
	// The name as a literal: with a ? the driver could prepare the statement, which would count itself.
	if err := q.QueryRowContext(context.Background(), "SHOW SESSION STATUS LIKE '"+name+"'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// prepares is the session's count of statements prepared so far (MariaDB's Com_stmt_prepare).
func prepares(t *testing.T, db *sql.DB) int {
	t.Helper()
	return sessionCount(t, db, "Com_stmt_prepare")
}

// executes is the session's count of prepared statements run so far (MariaDB's Com_stmt_execute).
func executes(t *testing.T, db *sql.DB) int {
	t.Helper()
	return sessionCount(t, db, "Com_stmt_execute")
}

// block is a compound statement of n inserts of one row each, like a step group's (the shape decides the text).
func block(n int) string {
	var b strings.Builder
	b.WriteString("BEGIN NOT ATOMIC\n")
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(";\n")
		}
		b.WriteString("INSERT INTO stmtcache_t (id, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)")
	}
	b.WriteString(";\nEND")
	return b.String()
}

// A block statement with values is prepared the second time it runs on a connection and then runs on the
// prepared statement; texts run once never are, and do not push out those that recur; the least recently used
// beyond the size is closed; the values arrive as sent, quotes and backslashes included; statements without
// values or of another kind are not prepared.
func TestStmtCacheKeepsRecentBlocks(t *testing.T) {
	db := stmtCacheDB(t, 2)
	ctx := context.Background()
	exec := func(n int, v string) {
		t.Helper()
		args := []any{}
		for i := 0; i < n; i++ {
			args = append(args, i+1, v)
		}
		if _, err := db.ExecContext(ctx, block(n), args...); err != nil {
			t.Fatal(err)
		}
	}
	p0, e0 := prepares(t, db), executes(t, db)
	want := func(p, e int, why string) {
		t.Helper()
		if gp, ge := prepares(t, db)-p0, executes(t, db)-e0; gp != p || ge != e {
			t.Fatalf("%s: %d prepared, %d run prepared; want %d and %d", why, gp, ge, p, e)
		}
	}
	exec(1, "a")
	want(0, 0, "a text run once")
	exec(1, "b")
	want(1, 1, "the same text again")
	exec(2, "c")
	exec(2, "c")
	exec(1, "d")
	want(2, 3, "two texts, each run again")
	for n := 4; n < 14; n++ { // ten texts run once each
		exec(n, "once")
	}
	exec(2, "e")
	exec(1, "e")
	want(2, 5, "the kept texts after ten run once")
	exec(3, "f")
	exec(3, "f") // a third kept: the least recently used (two inserts) is closed
	exec(1, "g")
	want(3, 7, "a third text kept")
	exec(2, "h") // closed before: text, then prepared again
	want(3, 7, "an evicted text, run once more")
	exec(2, "i")
	want(4, 8, "an evicted text, run twice more")
	var open int
	var name string
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'").Scan(&name, &open); err != nil {
		t.Fatal(err)
	}
	if open > 2+64 { // this connection's two, and whatever other tests running beside it keep
		t.Errorf("%d statements prepared on the server; evicted ones must be closed", open)
	}

	tricky := `it's "quoted" \ back\\slashed ` + "\x00 and 漢字"
	exec(2, tricky)
	var got string
	if err := db.QueryRow("SELECT v FROM stmtcache_t WHERE id = 2").Scan(&got); err != nil || got != tricky {
		t.Fatalf("stored %q (%v); want %q", got, err, tricky)
	}

	// Without values, or not a block: as the driver sends it, nothing prepared.
	p1 := prepares(t, db)
	if _, err := db.ExecContext(ctx, "BEGIN NOT ATOMIC\nUPDATE stmtcache_t SET v = 'x' WHERE id = 1;\nEND"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "UPDATE stmtcache_t SET v = ? WHERE id = ?", "y", 1); err != nil {
		t.Fatal(err)
	}
	if got := prepares(t, db) - p1; got != 0 {
		t.Errorf("prepared %d statements for a block without values and a plain statement; want 0", got)
	}
}

// An error inside a prepared block is the server's own, number and all, and stops the block: the step group's
// guard (ER_SUBQUERY_NO_1_ROW) still sends a group with a stale row back to a locked read. (The text's first run
// goes as text; the failing second is the prepared statement's.)
func TestStmtCacheKeepsErrors(t *testing.T) {
	db := stmtCacheDB(t, 4)
	q := "BEGIN NOT ATOMIC\nINSERT INTO stmtcache_t (id, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v);\n" +
		"SET @g = (SELECT 1 UNION ALL SELECT 1 FROM DUAL WHERE ROW_COUNT() <> ?);\n" +
		"INSERT INTO stmtcache_t (id, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v);\nEND"
	if _, err := db.Exec("DELETE FROM stmtcache_t WHERE id IN (10, 11)"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(q, 10, "first", 1, 11, "second"); err != nil {
		t.Fatalf("guard met: %v", err)
	}
	p0, e0 := prepares(t, db), executes(t, db)
	_, err := db.Exec(q, 10, "again", 1, 11, "never") // an update: two rows affected, not one
	if !store.IsGuardFailedForTest(err) {
		t.Fatalf("guard not met: %v; want ER_SUBQUERY_NO_1_ROW", err)
	}
	if p, e := prepares(t, db)-p0, executes(t, db)-e0; p != 1 || e != 1 {
		t.Fatalf("the second run: %d prepared, %d run prepared; want 1 and 1", p, e)
	}
	var v string
	if err := db.QueryRow("SELECT v FROM stmtcache_t WHERE id = 11").Scan(&v); err != nil || v != "second" {
		t.Fatalf("the statement after the failed guard ran: %q %v", v, err)
	}
}

// At the server's max_prepared_stmt_count a block goes as text: the group is written, not refused.
func TestStmtCacheFallsBackWhenTheServerIsFull(t *testing.T) {
	db := stmtCacheDB(t, 4)
	var was int
	if err := db.QueryRow("SELECT @@GLOBAL.max_prepared_stmt_count").Scan(&was); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("SET GLOBAL max_prepared_stmt_count = 0"); err != nil {
		t.Fatal(err)
	}
	restore := func() { _, _ = db.Exec("SET GLOBAL max_prepared_stmt_count = ?", was) }
	t.Cleanup(restore)
	for i := 0; i < 3; i++ {
		if _, err := db.Exec(block(2), 20, "full", 21, "full"); err != nil {
			t.Fatalf("run %d with the server full: %v", i, err)
		}
	}
	restore()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM stmtcache_t WHERE id IN (20, 21) AND v = 'full'").Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows written as text: %d (%v); want 2", n, err)
	}
}
