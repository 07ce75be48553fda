package store_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func pluginVersion(name string, v int, content []byte) *model.Plugin {
	return &model.Plugin{TenantID: model.DefaultTenant, Name: name, Version: v, Runtime: "python", Timeout: time.Second, SHA256: sum(content),
		Size: int64(len(content)), UploadedBy: "admin"}
}

// TestPluginFilesInTheDatabase: a version's file is stored with its row, in chunks, once per content; it reads
// back byte for byte; a file that does not match its hash stores nothing.
func TestPluginFilesInTheDatabase(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		// 2.5 chunks, with every byte value.
		big := make([]byte, store.BlobChunkSize*5/2)
		for i := range big {
			big[i] = byte(i * 7)
		}
		if err := s.CreatePlugin(ctx, pluginVersion("big", 1, big), bytes.NewReader(big)); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if n, err := s.ReadBlob(ctx, sum(big), &got); err != nil || n != int64(len(big)) || !bytes.Equal(got.Bytes(), big) {
			t.Fatalf("read back %d bytes, %v; equal %v", n, err, bytes.Equal(got.Bytes(), big))
		}
		if n := count(t, s, "blob_chunks", "sha256 = ?", sum(big)); n != 3 {
			t.Fatalf("%d chunks, want 3", n)
		}
		// The same bytes as another version (or plugin) are stored once.
		if err := s.CreatePlugin(ctx, pluginVersion("big", 2, big), bytes.NewReader(big)); err != nil {
			t.Fatal(err)
		}
		if err := s.CreatePlugin(ctx, pluginVersion("other", 1, big), bytes.NewReader(big)); err != nil {
			t.Fatal(err)
		}
		if n := count(t, s, "blobs", "1 = 1"); n != 1 {
			t.Fatalf("%d blobs for one content", n)
		}
		// A version that exists: conflict, nothing stored.
		small := []byte("print('{}')\n")
		if err := s.CreatePlugin(ctx, pluginVersion("big", 2, small), bytes.NewReader(small)); !model.IsKind(err, model.ECONFLICT) {
			t.Fatalf("duplicate version: %v", err)
		}
		if ok, _ := s.HasBlob(ctx, sum(small)); ok {
			t.Fatal("a refused upload stored its file")
		}
		// A file that is not what its row says: nothing stored, not even the row.
		lie := pluginVersion("liar", 1, small)
		if err := s.CreatePlugin(ctx, lie, strings.NewReader("something else")); err == nil {
			t.Fatal("a file with another hash was stored")
		}
		if _, err := s.GetPlugin(ctx, model.DefaultTenant, "liar", 0); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("the row of a refused file: %v", err)
		}
		if _, err := s.ReadBlob(ctx, sum([]byte("nope")), &got); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("missing blob: %v", err)
		}
	})
}

// TestConcurrentUploadsOfOneFile: many versions with the same bytes uploaded at once all succeed, one blob.
func TestConcurrentUploadsOfOneFile(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		content := bytes.Repeat([]byte("x"), 100_000)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- s.CreatePlugin(ctx, pluginVersion(fmt.Sprintf("p%d", i), 1, content), bytes.NewReader(content))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("upload: %v", err)
			}
		}
		if n := count(t, s, "blobs", "1 = 1"); n != 1 {
			t.Fatalf("%d blobs", n)
		}
		if n := count(t, s, "plugins", "1 = 1"); n != 8 {
			t.Fatalf("%d versions", n)
		}
	})
}

// TestImportBlobAndPluginsWithoutFile: versions of an earlier release have rows but no stored file; importing
// the file fixes that, and importing it again changes nothing.
func TestImportBlobAndPluginsWithoutFile(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		content := []byte("print('legacy')\n")
		p := pluginVersion("legacy", 1, content)
		// How an earlier release stored it: the row only (its file was on one replica's disk).
		if err := s.DB().Exec("INSERT INTO plugins (tenant_id, name, version, runtime, timeout_ms, sha256, size, uploaded_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
			p.TenantID, p.Name, p.Version, p.Runtime, 1000, p.SHA256, p.Size, p.UploadedBy, time.Now().UTC()).Error; err != nil {
			t.Fatal(err)
		}
		missing, err := s.PluginsWithoutFile(ctx)
		if err != nil || len(missing) != 1 || missing[0].Name != "legacy" {
			t.Fatalf("without file: %v, %v", missing, err)
		}
		for range 2 {
			if err := s.ImportBlob(ctx, p.SHA256, p.Size, bytes.NewReader(content)); err != nil {
				t.Fatal(err)
			}
		}
		if missing, _ := s.PluginsWithoutFile(ctx); len(missing) != 0 {
			t.Fatalf("still without file: %v", missing)
		}
		if n := count(t, s, "blob_chunks", "1 = 1"); n != 1 {
			t.Fatalf("%d chunks after importing twice", n)
		}
	})
}

// TestPluginRunLogs: one record per attempt, readable by run, a repeated record ignored, purged by age.
func TestPluginRunLogs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		day := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
		for a := 1; a <= 2; a++ {
			l := &model.PluginRunLog{RunID: "i1.r3", Attempt: a, TenantID: model.DefaultTenant, Plugin: "p", InstanceID: "i1",
				Record: fmt.Sprintf("attempt %d\n", a), CreatedAt: day.Add(time.Duration(a) * time.Minute)}
			if err := s.AppendRunLog(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		dup := &model.PluginRunLog{RunID: "i1.r3", Attempt: 2, TenantID: model.DefaultTenant, Plugin: "p", Record: "again\n", CreatedAt: day}
		if err := s.AppendRunLog(ctx, dup); err != nil {
			t.Fatalf("a repeated record must be ignored, got %v", err)
		}
		logs, err := s.RunLogs(ctx, model.DefaultTenant, "i1.r3")
		if err != nil || len(logs) != 2 || logs[0].Record != "attempt 1\n" || logs[1].Record != "attempt 2\n" {
			t.Fatalf("logs = %v, %v", logs, err)
		}
		if _, err := s.RunLogs(ctx, "other", "i1.r3"); !model.IsKind(err, model.ENOTFOUND) {
			t.Fatalf("another tenant's log: %v", err)
		}
		if n, err := s.PurgeRunLogs(ctx, day.Add(90*time.Second)); err != nil || n != 1 {
			t.Fatalf("purge = %d, %v", n, err)
		}
		if logs, _ := s.RunLogs(ctx, model.DefaultTenant, "i1.r3"); len(logs) != 1 || logs[0].Attempt != 2 {
			t.Fatalf("after purge: %v", logs)
		}
	})
}

// TestPurgesWorkInBatches: a backlog larger than one batch is purged completely, and only what is older.
func TestPurgesWorkInBatches(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		const n = 2345
		var b strings.Builder
		args := []any{}
		for i := range n {
			if b.Len() > 0 {
				b.WriteString(",")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
			exp := old
			if i%5 == 0 {
				exp = old.AddDate(1, 0, 0) // not expired yet
			}
			args = append(args, fmt.Sprintf("m%05d", i), model.DefaultTenant, "msg", "", "h", "{}", old, exp)
			if len(args) >= 800 || i == n-1 {
				if err := s.DB().Exec("INSERT INTO messages (id, tenant_id, name, correlation_id, hash, data, created_at, expires_at) VALUES "+b.String(), args...).Error; err != nil {
					t.Fatal(err)
				}
				b.Reset()
				args = args[:0]
			}
		}
		purged, err := s.PurgeMessages(ctx, old.Add(time.Hour))
		if want := n - (n+4)/5; err != nil || purged != int64(want) {
			t.Fatalf("purged %d, %v; want %d", purged, err, want)
		}
		if left := count(t, s, "messages", "1 = 1"); left != (n+4)/5 {
			t.Fatalf("%d messages left, want %d", left, (n+4)/5)
		}
	})
}

// TestLease: one holder at a time; a renewal keeps the token, a takeover after expiry increments it, a release
// frees it at once.
func TestLease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		a, ok, err := s.AcquireLease(ctx, "sweep", "a", now, now.Add(time.Minute))
		if err != nil || !ok || a.Token != 1 {
			t.Fatalf("a = %+v %v %v", a, ok, err)
		}
		if _, ok, _ := s.AcquireLease(ctx, "sweep", "b", now.Add(30*time.Second), now.Add(90*time.Second)); ok {
			t.Fatal("b took a held lease")
		}
		if a2, ok, _ := s.AcquireLease(ctx, "sweep", "a", now.Add(30*time.Second), now.Add(90*time.Second)); !ok || a2.Token != 1 {
			t.Fatalf("renewal = %+v %v", a2, ok)
		}
		b, ok, _ := s.AcquireLease(ctx, "sweep", "b", now.Add(91*time.Second), now.Add(3*time.Minute))
		if !ok || b.Token != 2 {
			t.Fatalf("takeover after expiry = %+v %v", b, ok)
		}
		if _, ok, _ := s.AcquireLease(ctx, "sweep", "a", now.Add(92*time.Second), now.Add(3*time.Minute)); ok {
			t.Fatal("a took the lease back while b holds it")
		}
		// a's fenced writes fail now.
		batch := &model.ArchiveBatch{ID: "b1", File: "2026-01-01.jsonl.gz", InstanceIDs: []string{"x"}, CreatedAt: now}
		if err := s.BeginArchiveBatch(ctx, a, batch, now.Add(92*time.Second)); !model.IsKind(err, model.ECONFLICT) {
			t.Fatalf("a fenced write of a lost lease: %v", err)
		}
		if err := s.ReleaseLease(ctx, a); err != nil { // a stale holder's release changes nothing
			t.Fatal(err)
		}
		if _, ok, _ := s.AcquireLease(ctx, "other-name", "a", now, now.Add(time.Minute)); !ok {
			t.Fatal("leases of other names are independent")
		}
		if err := s.ReleaseLease(ctx, b); err != nil {
			t.Fatal(err)
		}
		if c, ok, _ := s.AcquireLease(ctx, "sweep", "c", now.Add(93*time.Second), now.Add(3*time.Minute)); !ok || c.Token != 3 {
			t.Fatalf("after release = %+v %v", c, ok)
		}
	})
}

// TestLeaseRace: many replicas ask for a free lease at once; exactly one gets it.
func TestLeaseRace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		now := time.Now().UTC()
		var wg sync.WaitGroup
		var mu sync.Mutex
		winners := 0
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, ok, err := s.AcquireLease(ctx, "race", fmt.Sprintf("r%d", i), now, now.Add(time.Minute))
				if err != nil {
					t.Errorf("acquire: %v", err)
				}
				if ok {
					mu.Lock()
					winners++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if winners != 1 {
			t.Fatalf("%d replicas hold the lease", winners)
		}
	})
}

// TestMaintenanceQueriesUseIndexes EXPLAINs every statement of the purges and of the retention sweep on MySQL,
// over tables filled the way a deployment fills them (rows spread over a year, a few per instance, the cutoff a
// month in): each must read through an index (a range, ref or group-by scan), never a full table or full index
// scan, so that they stay cheap on tables of millions of rows.
func TestMaintenanceQueriesUseIndexes(t *testing.T) {
	s := storetest.Open(t, store.MySQL)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	qs := s.MaintenanceQueries(base.AddDate(0, 1, 0))
	if len(qs) < 20 {
		t.Fatalf("only %d maintenance queries", len(qs))
	}
	seeded := map[string]bool{}
	for _, q := range qs {
		for _, w := range strings.Fields(q.SQL) {
			w = strings.Trim(w, "(),")
			if w == "" || seeded[w] || !isTable(t, s, w) {
				continue
			}
			seeded[w] = true
			seed(t, s, w, 3000, base)
		}
	}
	for _, q := range qs {
		rows, err := s.DB().Raw("EXPLAIN "+q.SQL, q.Args...).Rows()
		if err != nil {
			t.Errorf("%s: EXPLAIN: %v", q.Name, err)
			continue
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			plan := map[string]string{}
			for i, c := range cols {
				if b, ok := vals[i].([]byte); ok {
					plan[c] = string(b)
				} else if vals[i] != nil {
					plan[c] = fmt.Sprint(vals[i])
				}
			}
			switch plan["type"] {
			case "range", "ref", "eq_ref", "const", "index_merge", "ref_or_null":
				if plan["key"] == "" {
					t.Errorf("%s: no index used: %v\n  %s", q.Name, plan, q.SQL)
				}
			default:
				t.Errorf("%s: access type %q (a full scan): %v\n  %s", q.Name, plan["type"], plan, q.SQL)
			}
			t.Logf("%-40s %-6s %s", q.Name, plan["type"], plan["key"])
		}
		rows.Close()
	}
}

func isTable(t *testing.T, s *store.Store, name string) bool {
	var n int64
	s.DB().Raw("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", name).Scan(&n)
	return n == 1
}

// seed fills a table with n synthetic rows from its column types: instance ids shared by three rows each,
// times spread over a year from base (a third of the nullable ones NULL), a few values per plain string column,
// unique values where a unique index needs them. Then it updates the table's statistics.
func seed(t *testing.T, s *store.Store, table string, n int, base time.Time) {
	t.Helper()
	type column struct {
		Name, DataType, Nullable, Extra string
	}
	var cols []column
	s.DB().Raw("SELECT column_name AS name, data_type, is_nullable AS nullable, extra FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ? ORDER BY ordinal_position", table).Scan(&cols)
	var uniq []string
	s.DB().Raw("SELECT DISTINCT column_name FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = ? AND non_unique = 0", table).Scan(&uniq)
	unique := map[string]bool{}
	for _, c := range uniq {
		unique[strings.ToLower(c)] = true
	}
	var names []string
	for _, c := range cols {
		if !strings.Contains(c.Extra, "auto_increment") {
			names = append(names, strings.ToLower(c.Name))
		}
	}
	var ids model.TimeIDs
	value := func(c column, i int) any {
		name := strings.ToLower(c.Name)
		switch {
		case name == "instance_id":
			return fmt.Sprintf("inst-%05d", i/3)
		case name == "id" && (table == "instances" || table == "archived_instances"):
			return fmt.Sprintf("inst-%05d", i)
		case name == "id" && (table == "notifications" || table == "notification_deliveries"):
			return ids.Next(base.Add(time.Duration((i*7919)%(365*24)) * time.Hour)) // stamped with created_at, as notify does
		case name == "tenant_id":
			return model.DefaultTenant
		case name == "tkey":
			return fmt.Sprintf("tkey-%d", i%20)
		case name == "version":
			return i % 3
		case name == "status":
			return []string{"pending", "fired", "succeeded", "failed", "completed"}[i%5]
		case c.DataType == "datetime":
			if c.Nullable == "YES" && i%3 == 0 {
				return nil
			}
			return base.Add(time.Duration((i*7919)%(365*24)) * time.Hour)
		case c.DataType == "tinyint": // BOOLEAN
			return i % 2
		case strings.Contains(c.DataType, "int"):
			return i
		case strings.Contains(c.DataType, "blob"):
			return []byte("x")
		case strings.Contains(c.DataType, "text"):
			return "{}"
		case unique[name]:
			return fmt.Sprintf("%s-%06d", name, i)
		default:
			return fmt.Sprintf("%s-%d", name, i%40)
		}
	}
	for start := 0; start < n; start += 500 {
		var ph []string
		var args []any
		for i := start; i < min(n, start+500); i++ {
			ph = append(ph, "("+strings.TrimSuffix(strings.Repeat("?,", len(names)), ",")+")")
			for _, c := range cols {
				if !strings.Contains(c.Extra, "auto_increment") {
					args = append(args, value(c, i))
				}
			}
		}
		if err := s.DB().Exec("INSERT INTO "+table+" ("+strings.Join(names, ", ")+") VALUES "+strings.Join(ph, ", "), args...).Error; err != nil {
			t.Fatalf("seed %s: %v", table, err)
		}
	}
	if err := s.DB().Exec("ANALYZE TABLE " + table).Error; err != nil {
		t.Fatal(err)
	}
}

func count(t *testing.T, s *store.Store, table, where string, args ...any) int {
	t.Helper()
	var n int64
	if err := s.DB().Table(table).Where(where, args...).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// TestGormLogsThroughSlog: gorm's statements reach the store's logger — a slow one as a warning without its
// values, a failed one only at debug level (the store returns the error and its caller logs it once).
func TestGormLogsThroughSlog(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := store.Open(ctx, store.Config{URL: storetest.URL(t, store.MySQL), Logger: lg, MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.DB().Exec("SELECT SLEEP(?) AS secret_value", 1.05).Error; err != nil {
		t.Fatal(err)
	}
	if err := s.DB().Exec("SELECT * FROM no_such_table").Error; err == nil {
		t.Fatal("a bad statement succeeded")
	}
	var slow map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		if m["msg"] == "slow sql statement" {
			slow = m
		}
		if m["msg"] == "sql statement failed" {
			t.Errorf("a failed statement was logged at info level: %v", m)
		}
	}
	if slow == nil || slow["component"] != "gorm" || slow["level"] != "WARN" || !strings.Contains(slow["sql"].(string), "SLEEP(?)") {
		t.Fatalf("slow statement line: %v\n%s", slow, buf.String())
	}
}
