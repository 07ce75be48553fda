package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestSQLStepSuite runs the sqlstep suite small on MySQL, once per read: every step commits, the rows are the
// flow's (each instance completed at rev 5 with its four approvals decided) until the suite deletes them, and a
// database with instances of its own is refused.
func TestSQLStepSuite(t *testing.T) {
	url := storetest.URL(t, store.MySQL)
	ctx := context.Background()
	for _, read := range []string{"locked", "cached", "none"} {
		var out bytes.Buffer
		c := sqlstepConfig{mysql: url, clients: 3, n: 12, read: read, history: true, notices: read != "none"}
		if err := sqlstepSuite(ctx, c, &out, io.Discard); err != nil {
			t.Fatalf("read %s: %v", read, err)
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		var fig SQLStepFigures
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &fig); err != nil {
			t.Fatalf("read %s: last line %q: %v", read, lines[len(lines)-1], err)
		}
		if fig.Steps != 60 || fig.Latency.Errors != 0 || fig.StepsPerS <= 0 || fig.Read != read || fig.Baseline != nil {
			t.Fatalf("read %s: figures %+v", read, fig)
		}
	}
	db, err := openMySQL(url, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"SELECT COUNT(*) FROM instances", "SELECT COUNT(*) FROM tasks", "SELECT COUNT(*) FROM history", "SELECT COUNT(*) FROM notifications"} {
		if n := count(t, db, q); n != 0 {
			t.Errorf("%s = %d after the suite, want 0", q, n)
		}
	}
	if _, err := db.Exec("INSERT INTO instances (id, tenant_id, tkey, version, title, status, initiator, correlation_id, context, state, rev, created_at, updated_at) " +
		"VALUES ('real-1', 'default', 't', 1, 't', 'running', 'ann', '', '{}', '{}', 1, NOW(), NOW())"); err != nil {
		t.Fatal(err)
	}
	err = sqlstepSuite(ctx, sqlstepConfig{mysql: url, clients: 1, n: 1, read: "locked"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "database of its own") {
		t.Fatalf("suite on a database with an instance of its own: %v", err)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM instances WHERE id = 'real-1'"); n != 1 {
		t.Fatalf("the database's own instance is gone")
	}
}

// TestSQLStepFlowRows: one flow's rows as it leaves them, before the clean-up.
func TestSQLStepFlowRows(t *testing.T) {
	url := storetest.URL(t, store.MySQL)
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{URL: url, StepCache: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	db, err := openMySQL(url, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := sqlstepConfig{read: "cached", history: true, notices: true}
	if err := sqlstepFlow(ctx, db, c, "sqlstep-x-1", "user001", newRecorder()); err != nil {
		t.Fatal(err)
	}
	var status string
	var rev int
	if err := db.QueryRow("SELECT status, rev FROM instances WHERE id = 'sqlstep-x-1'").Scan(&status, &rev); err != nil || status != "completed" || rev != 5 {
		t.Fatalf("instance %s rev %d, %v: want completed at rev 5", status, rev, err)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM tasks WHERE instance_id = 'sqlstep-x-1' AND status = 'approved'"); n != 4 {
		t.Fatalf("%d approved tasks, want 4", n)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM history WHERE instance_id = 'sqlstep-x-1'"); n != 5 {
		t.Fatalf("%d history rows, want 5", n)
	}
	sqlstepCleanUp(db)
	if n := count(t, db, "SELECT COUNT(*) FROM tasks"); n != 0 {
		t.Fatalf("%d tasks after the clean-up", n)
	}
}

func count(t *testing.T, db *sql.DB, q string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
