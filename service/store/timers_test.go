package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestRearmReadsThroughItsIndexes EXPLAINs the two reads of the re-arm on MySQL over a table whose timers are
// mostly fired, as a deployment's is (fired rows stay for the retention period): the full pass pages through
// idx_timers_pending (status, id), reading pending rows alone — through the primary key it walked the fired ones
// too, and a ref of the status alone started every page at the first pending timer — and the periodic pass through
// idx_timers_created, reading the rows armed in its window alone.
func TestRearmReadsThroughItsIndexes(t *testing.T) {
	s := storetest.Open(t, store.MySQL)
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 3000
	var args []any
	for i := range n {
		status, fired := model.TimerFired, any(base.Add(time.Duration(i)*time.Minute+time.Hour))
		if i%10 == 0 {
			status, fired = model.TimerPending, nil
		}
		at := base.Add(time.Duration(i) * time.Minute)
		args = append(args, fmt.Sprintf("t%05d", i), model.DefaultTenant, fmt.Sprintf("i%05d", i), "d", fmt.Sprintf("i%05d.d", i), model.TimerDelay,
			at.Add(time.Hour), status, "{}", at, fired)
	}
	fillAndAnalyze(t, s, "timers", "id, tenant_id, instance_id, node_id, node_instance_id, kind, due_at, status, payload, created_at, fired_at", args)
	from := base.Add(100 * time.Minute)
	for _, c := range []struct {
		name, sql, key string
		args           []any
	}{
		{"every pending timer", store.PendingTimersSQL(store.MySQL), "idx_timers_pending", []any{model.TimerPending, "t00100", 2000}},
		{"timers armed lately", store.PendingTimersCreatedSQL(store.MySQL), "idx_timers_created", []any{from, from.Add(10 * time.Minute), from, from, "", model.TimerPending, 2000}},
	} {
		typ, key := explain(t, s, c.sql, c.args...)
		if typ != "range" || key != c.key {
			t.Errorf("%s: access %q through %s, want a range of %s\n  %s", c.name, typ, key, c.key, c.sql)
		}
		t.Logf("%-22s %-6s %s", c.name, typ, key)
	}
	pending, err := s.PendingTimers(ctx, "", 1000)
	if err != nil || len(pending) != n/10 {
		t.Fatalf("PendingTimers: %d rows, %v; want %d", len(pending), err, n/10)
	}
	recent, err := s.PendingTimersCreated(ctx, from, from.Add(10*time.Minute), time.Time{}, "", 1000)
	if err != nil || len(recent) != 1 || recent[0].ID != "t00100" {
		t.Fatalf("PendingTimersCreated: %v, %v; want t00100 alone", recent, err)
	}
}

// fillAndAnalyze inserts rows into table (args: their values, one per column of cols, row after row) 500 a
// statement, then has MySQL count the table's indexes again, as a deployment's statistics would.
func fillAndAnalyze(t *testing.T, s *store.Store, table, cols string, args []any) {
	t.Helper()
	width := len(strings.Split(cols, ","))
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", width), ", ") + ")"
	for start := 0; start < len(args); start += 500 * width {
		end := min(start+500*width, len(args))
		q := "INSERT INTO " + table + " (" + cols + ") VALUES " + strings.TrimSuffix(strings.Repeat(row+", ", (end-start)/width), ", ")
		if err := s.DB().Exec(q, args[start:end]...).Error; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DB().Exec("ANALYZE TABLE " + table).Error; err != nil {
		t.Fatal(err)
	}
}

// explain returns the access type and the index ("<none>" when none) of MySQL's plan for the statement's table.
func explain(t *testing.T, s *store.Store, sql string, args ...any) (access, key string) {
	t.Helper()
	var plan struct {
		Type string
		Key  *string
	}
	if err := s.DB().Raw("EXPLAIN "+sql, args...).Scan(&plan).Error; err != nil {
		t.Fatalf("EXPLAIN %s: %v", sql, err)
	}
	if plan.Key == nil {
		return plan.Type, "<none>"
	}
	return plan.Type, *plan.Key
}

// entriesRead is how many index entries the statements on tx read since its last FLUSH STATUS (the session's
// Handler_read_next and Handler_read_prev): tx must be one connection, not the pool.
func entriesRead(tx *gorm.DB) (int64, error) {
	var st []struct {
		VariableName string `gorm:"column:Variable_name"`
		Value        int64
	}
	if err := tx.Raw("SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_prev', 'Handler_read_next')").Scan(&st).Error; err != nil {
		return 0, err
	}
	var n int64
	for _, v := range st {
		n += v.Value
	}
	return n, nil
}

// TestTimesReachMySQLAsMicroseconds: a Go time (nanoseconds) given to a query on MySQL goes with six fractional
// digits at most. With more, MariaDB did not read a DATETIME(6) index as a range but scanned it whole: the periodic
// re-arm's window of a few minutes, a handful of rows, read every entry of idx_timers_created (~1M index entries
// and seconds of the database at a million timers, every 5 minutes). Checked through the store's own method, on a
// pool of one connection whose handler counters tell how many index entries the read went through.
func TestTimesReachMySQLAsMicroseconds(t *testing.T) {
	s, err := store.Open(ctx, store.Config{URL: storetest.URL(t, store.MySQL), DataDir: t.TempDir(), MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	seed(t, s, "timers", 20000, base) // created_at on the hour, spread over a year; every fifth timer pending
	if err := s.DB().Exec("ANALYZE TABLE timers").Error; err != nil {
		t.Fatal(err)
	}
	from := base.Add(4000*time.Hour + 123456789*time.Nanosecond) // nanoseconds, as time.Now() has them
	to := from.Add(48 * time.Hour)
	if err := s.DB().Exec("FLUSH STATUS").Error; err != nil {
		t.Fatal(err)
	}
	got, err := s.PendingTimersCreated(ctx, from, to, time.Time{}, "", 2000)
	if err != nil {
		t.Fatal(err)
	}
	read, err := entriesRead(s.DB()) // the pool is one connection
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	if err := s.DB().Raw("SELECT COUNT(*) FROM timers WHERE created_at >= ? AND created_at < ? AND status = 'pending'",
		from.Format("2006-01-02 15:04:05.000000"), to.Format("2006-01-02 15:04:05.000000")).Scan(&want).Error; err != nil {
		t.Fatal(err)
	}
	if want == 0 || int64(len(got)) != want {
		t.Fatalf("%d pending timers armed in the window, want %d (and more than none)", len(got), want)
	}
	for _, tm := range got {
		if tm.CreatedAt.Before(from) || !tm.CreatedAt.Before(to) {
			t.Fatalf("timer %s armed at %v, outside [%v, %v)", tm.ID, tm.CreatedAt, from, to)
		}
	}
	// The window holds ~110 of the 20,000 index entries; a scan of the index reads them all.
	if read > 500 {
		t.Fatalf("reading the %d timers of the window went through %d index entries", len(got), read)
	}
	t.Logf("%d timers, %d index entries read", len(got), read)
}

// TestMessageLookupReadsThroughItsIndex EXPLAINs a message's lookup of its bookmarks (FindBookmarks) on MySQL over
// a table of mostly closed delay bookmarks, as a deployment's is: it reads idx_bookmarks_message (tenant_id, hash),
// the entries of its hash alone, not every open bookmark through idx_bookmarks_closed. closed_at left that index
// (migration 23) so that closing a bookmark moves no entry there; the closed bookmarks of the same hash it now
// reads too are filtered out.
func TestMessageLookupReadsThroughItsIndex(t *testing.T) {
	s := storetest.Open(t, store.MySQL)
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const n = 3000
	hash := strings.Repeat("ab", 32)
	var args []any
	for i := range n {
		h, closed := "", any(base.Add(time.Duration(i)*time.Minute+time.Hour))
		switch {
		case i%10 == 0:
			closed = nil // an open delay
		case i%500 == 1:
			h = hash // a closed wait for the message
		case i%1000 == 2:
			h, closed = hash, nil // an open one
		}
		at := base.Add(time.Duration(i) * time.Minute)
		args = append(args, fmt.Sprintf("b%05d", i), model.DefaultTenant, fmt.Sprintf("i%05d", i), "w", fmt.Sprintf("b%05d", i), "delay", h, "", "", "null", at, closed)
	}
	fillAndAnalyze(t, s, "bookmarks", "id, tenant_id, instance_id, node_id, node_instance_id, kind, hash, message_name, correlation_id, payload, created_at, closed_at", args)
	const lookup = "SELECT * FROM bookmarks WHERE tenant_id = ? AND hash = ? AND closed_at IS NULL ORDER BY created_at, id" // FindBookmarks'
	typ, key := explain(t, s, lookup, model.DefaultTenant, hash)
	if typ != "ref" || key != "idx_bookmarks_message" {
		t.Errorf("a message's lookup: access %q through %s, want a ref of idx_bookmarks_message", typ, key)
	}
	found, err := s.FindBookmarks(ctx, model.DefaultTenant, hash)
	if err != nil || len(found) != 3 || found[0].ID != "b00002" || found[1].ID != "b01002" || found[2].ID != "b02002" {
		ids := []string{}
		for _, b := range found {
			ids = append(ids, b.ID)
		}
		t.Fatalf("FindBookmarks: %v, %v; want the open b00002, b01002, b02002 in order", ids, err)
	}
}
