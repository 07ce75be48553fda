package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/redisconn"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// doctorReport runs `halley doctor --json` with env and returns its checks by name and its error.
func doctorReport(t *testing.T, env map[string]string, args ...string) (map[string]check, error) {
	t.Helper()
	out, _, err := cli(t, env, append([]string{"doctor", "--json"}, args...)...)
	var rep struct {
		Checks []check `json:"checks"`
		OK     bool    `json:"ok"`
	}
	if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil {
		t.Fatalf("doctor --json printed no JSON (%v): %s", jerr, out)
	}
	byName := map[string]check{}
	failed := false
	for _, c := range rep.Checks {
		byName[c.Name] = c
		failed = failed || c.Status == checkFail
		if c.Status != checkOK && c.Fix == "" {
			t.Errorf("check %s is %s without a fix: %+v", c.Name, c.Status, c)
		}
	}
	if rep.OK == failed || (err != nil) != failed {
		t.Fatalf("ok %v, error %v, but a check failed: %v\n%s", rep.OK, err, failed, out)
	}
	return byName, err
}

func wantCheck(t *testing.T, checks map[string]check, name, status string, found ...string) check {
	t.Helper()
	c, ok := checks[name]
	if !ok {
		t.Fatalf("no check %q in %v", name, checks)
	}
	if c.Status != status {
		t.Fatalf("check %s: %s (%s; fix: %s), want %s", name, c.Status, c.Found, c.Fix, status)
	}
	for _, f := range found {
		if !strings.Contains(c.Found+" fix: "+c.Fix, f) {
			t.Fatalf("check %s says %q (fix %q), want %q in it", name, c.Found, c.Fix, f)
		}
	}
	return c
}

// TestDoctorSQLite: on a migrated SQLite database the database, WAL, migrations, disks and Redis (not configured)
// are OK and the exit status is 0; before the first start the missing file is a WARN; a schema newer than the
// binary FAILs (exit status 1) with what to do; a bad setting is a FAIL of the configuration; the text report
// has one line per check and the fix under it.
func TestDoctorSQLite(t *testing.T) {
	data := t.TempDir()
	env := map[string]string{"HALLEY_DATA_DIR": data, "HALLEY_ADMIN_PASSWORD": "doctor-pw-1", "HALLEY_ATTACHMENT_STORAGE": "dir"}
	checks, err := doctorReport(t, env)
	if err != nil {
		t.Fatal(err)
	}
	wantCheck(t, checks, "database", checkWarn, "no SQLite database", "halley serve")
	wantCheck(t, checks, "sqlite file", checkOK, filepath.Join(data, "halley.db"))

	if _, _, err := cli(t, env, "migrate"); err != nil {
		t.Fatal(err)
	}
	checks, err = doctorReport(t, env)
	if err != nil {
		t.Fatal(err)
	}
	wantCheck(t, checks, "configuration", checkOK, "valid")
	wantCheck(t, checks, "database", checkOK, "SQLite 3.")
	wantCheck(t, checks, "sqlite journal", checkOK, "wal")
	wantCheck(t, checks, "migrations", checkOK, "this binary's latest")
	wantCheck(t, checks, "clock skew", checkOK, "SQLite")
	wantCheck(t, checks, "redis", checkOK, "not configured")
	wantCheck(t, checks, "disk (attachments)", checkOK, filepath.Join(data, "attachments"), "free of")
	wantCheck(t, checks, "disk (plugins)", checkOK, "free of")
	if _, ok := checks["python"]; !ok {
		t.Fatal("no python check")
	}
	if _, ok := checks["cgroup"]; !ok {
		t.Fatal("no cgroup check")
	}

	out, _, err := cli(t, env, "doctor")
	if err != nil || !strings.Contains(out, "OK    migrations") || !strings.Contains(out, " FAIL\n") {
		t.Fatalf("text report (%v):\n%s", err, out)
	}

	// A schema newer than this binary: FAIL, exit status 1.
	st, err := store.Open(context.Background(), store.Config{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DB().Exec("INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', CURRENT_TIMESTAMP)").Error; err != nil {
		t.Fatal(err)
	}
	st.Close()
	checks, err = doctorReport(t, env)
	if !errors.Is(err, errDoctorFailed) {
		t.Fatalf("exit: %v; want the failed check", err)
	}
	wantCheck(t, checks, "migrations", checkFail, "999", "newer than this binary", "run a release that knows the schema")
	out, _, _ = cli(t, env, "doctor")
	if !strings.Contains(out, "FAIL  migrations") || !strings.Contains(out, "fix: run a release") {
		t.Fatalf("text report of a FAIL:\n%s", out)
	}

	// A bad setting: the configuration fails, nothing else is checked.
	checks, err = doctorReport(t, map[string]string{"HALLEY_DATA_DIR": data, "HALLEY_ADDR": "nowhere"})
	if err == nil || len(checks) != 1 {
		t.Fatalf("bad config: %v %v", err, checks)
	}
	wantCheck(t, checks, "configuration", checkFail, "HALLEY_ADDR")
}

// TestDoctorMySQLRedis (MySQL + Redis): against the real services the database, its settings, migrations, clock
// skew and Redis are checked; max_connections too small for the replicas asked is a WARN with the number to set.
func TestDoctorMySQLRedis(t *testing.T) {
	env := map[string]string{"HALLEY_DATA_DIR": t.TempDir(), "HALLEY_ADMIN_PASSWORD": "doctor-pw-1",
		"HALLEY_DATABASE_URL": storetest.URL(t, store.MySQL), "HALLEY_REDIS_URL": storetest.RedisURL(t), "HALLEY_REDIS_PREFIX": "halley-test-doctor:"}
	checks, _ := doctorReport(t, env)
	wantCheck(t, checks, "migrations", checkWarn, "pending", "run halley migrate")
	if _, _, err := cli(t, env, "migrate"); err != nil {
		t.Fatal(err)
	}
	checks, _ = doctorReport(t, env, "--replicas", "1")
	wantCheck(t, checks, "database", checkOK, "MySQL/MariaDB")
	wantCheck(t, checks, "migrations", checkOK)
	wantCheck(t, checks, "clock skew", checkOK, "only host against database")
	wantCheck(t, checks, "character set", checkOK, "utf8mb4")
	wantCheck(t, checks, "redis", checkOK, "Redis ")
	wantCheck(t, checks, "redis latency", checkOK, "PINGs")
	if c := checks["database version"]; c.Status == checkFail || (!strings.Contains(c.Found, "Maria") && !strings.Contains(c.Found, "MySQL")) {
		t.Fatalf("the test server's version: %+v", c)
	}
	// The database's size, read from the server: the migrated schema's tables and indexes, a few hundred KiB at least.
	st, err := store.Open(context.Background(), store.Config{URL: env["HALLEY_DATABASE_URL"]})
	if err != nil {
		t.Fatal(err)
	}
	if n := databaseBytes(context.Background(), st); n < 100<<10 {
		t.Errorf("databaseBytes = %d; want the migrated schema's size", n)
	}
	st.Close()
	for _, name := range []string{"isolation level", "max_connections", "innodb_buffer_pool_size", "innodb redo log", "sql_mode", "time_zone", "redis persistence", "redis maxmemory-policy"} {
		if _, ok := checks[name]; !ok {
			t.Fatalf("no check %q", name)
		}
	}
	if c := checks["isolation level"]; c.Status == checkFail {
		t.Fatalf("the test server's isolation level: %+v", c)
	}
	// On MariaDB two connections beside each replica's pool keep step groups prepared (HALLEY_DB_STMT_CACHE).
	maria := strings.Contains(checks["database version"].Found, "Maria")
	if maria {
		wantCheck(t, checks, "max_prepared_stmt_count", checkOK, "1 replicas × 2 connections × 128 statements")
	} else if _, ok := checks["max_prepared_stmt_count"]; ok {
		t.Fatal("max_prepared_stmt_count checked on MySQL, where no group is prepared")
	}
	checks, _ = doctorReport(t, env, "--replicas", "100000")
	if maria {
		wantCheck(t, checks, "max_connections", checkWarn, "100000 replicas × (a pool of 64 + 2 keeping step groups prepared)", "raise max_connections to at least 6600010")
		wantCheck(t, checks, "max_prepared_stmt_count", checkWarn, "100000 replicas × 2 connections × 128", "raise max_prepared_stmt_count to at least 25600000")
	} else {
		wantCheck(t, checks, "max_connections", checkWarn, "100000 replicas × a pool of 64", "raise max_connections to at least 6400010")
	}
	env["HALLEY_DB_STMT_CACHE"] = "0"
	checks, _ = doctorReport(t, env, "--replicas", "100000")
	wantCheck(t, checks, "max_connections", checkWarn, "100000 replicas × a pool of 64", "raise max_connections to at least 6400010")
	if _, ok := checks["max_prepared_stmt_count"]; ok {
		t.Fatal("max_prepared_stmt_count checked with HALLEY_DB_STMT_CACHE=0")
	}
}

// TestDoctorRedisEvicts: a Redis of this test's own (never the shared one's settings) with maxmemory-policy
// allkeys-lru and a memory limit FAILs with the fix (noeviction) and why; without AOF or save points persistence
// is a WARN.
func TestDoctorRedisEvicts(t *testing.T) {
	bin := testkit.RequireTool(t, "redis-server", "")
	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	srv := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru", "--dir", t.TempDir())
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if !testkit.Eventually(10*time.Second, 10*time.Millisecond, func() bool { return rdb.Ping(context.Background()).Err() == nil }) {
		t.Fatal("the test's redis-server did not start")
	}
	env := map[string]string{"HALLEY_DATA_DIR": t.TempDir(), "HALLEY_ADMIN_PASSWORD": "doctor-pw-1", "HALLEY_REDIS_URL": fmt.Sprintf("redis://%s/0", addr)}
	checks, err := doctorReport(t, env)
	if !errors.Is(err, errDoctorFailed) {
		t.Fatalf("exit: %v", err)
	}
	wantCheck(t, checks, "redis", checkOK)
	wantCheck(t, checks, "redis maxmemory-policy", checkFail, "allkeys-lru", "timer members", "CONFIG SET maxmemory-policy noeviction")
	wantCheck(t, checks, "redis persistence", checkWarn, "appendonly yes")

	// No memory limit: nothing is evicted yet, a WARN.
	if err := rdb.ConfigSet(context.Background(), "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	checks, _ = doctorReport(t, env)
	wantCheck(t, checks, "redis maxmemory-policy", checkWarn, "no maxmemory limit")
	if err := rdb.ConfigSet(context.Background(), "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigSet(context.Background(), "appendonly", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	checks, err = doctorReport(t, env)
	if err != nil {
		t.Fatal(err)
	}
	wantCheck(t, checks, "redis maxmemory-policy", checkOK, "noeviction")
	wantCheck(t, checks, "redis persistence", checkOK, "appendonly yes")
	// Redis down: FAIL.
	_ = srv.Process.Kill()
	_ = srv.Wait()
	checks, _ = doctorReport(t, env, "--timeout", "2s")
	wantCheck(t, checks, "redis", checkFail, addr, "check that Redis runs")
}

// TestDoctorThresholds: clock skew WARN past 500 ms and FAIL past 5 s either way; free disk WARN below 1 GiB and
// FAIL below 100 MiB.
func TestDoctorThresholds(t *testing.T) {
	for d, want := range map[time.Duration]string{0: checkOK, 500 * time.Millisecond: checkOK, -501 * time.Millisecond: checkWarn,
		5 * time.Second: checkWarn, 5*time.Second + 1: checkFail, -time.Minute: checkFail} {
		if got := skewStatus(d); got != want {
			t.Errorf("skew %v: %s, want %s", d, got, want)
		}
	}
	for free, want := range map[uint64]string{10 << 30: checkOK, 1 << 30: checkOK, 1<<30 - 1: checkWarn, 100 << 20: checkWarn, 100<<20 - 1: checkFail, 0: checkFail} {
		if got := diskStatus(free); got != want {
			t.Errorf("free %d: %s, want %s", free, got, want)
		}
	}
	for line, want := range map[string]string{"cpuset cpu io memory pids": "", "memory pids": "", "hugetlb": "memory,pids", "cpu memory": "pids", "": "memory,pids"} {
		if got := strings.Join(missingControllers(line), ","); got != want {
			t.Errorf("controllers %q: missing %q, want %q", line, got, want)
		}
	}
}

// TestDoctorRedisCluster (HALLEY_TEST_REDIS_CLUSTER, read only: the cluster is shared with other tests): on a
// cluster URL the doctor reads every master and names each in persistence and maxmemory-policy.
func TestDoctorRedisCluster(t *testing.T) {
	url := os.Getenv("HALLEY_TEST_REDIS_CLUSTER")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("HALLEY_TEST_REDIS_CLUSTER is not set: under CI=true the Redis Cluster tests must run (scripts/redis-cluster.sh start)")
		}
		t.Skip("HALLEY_TEST_REDIS_CLUSTER is not set; skipping (CI=true would fail)")
	}
	target, err := redisconn.Parse(url)
	if err != nil || target.Cluster == nil {
		t.Fatalf("HALLEY_TEST_REDIS_CLUSTER: %v (a cluster URL is needed)", err)
	}
	env := map[string]string{"HALLEY_DATA_DIR": t.TempDir(), "HALLEY_ADMIN_PASSWORD": "doctor-pw-1", "HALLEY_REDIS_URL": url}
	checks, _ := doctorReport(t, env)
	wantCheck(t, checks, "redis", checkOK, "cluster mode", "at cluster ")
	c := checks["redis maxmemory-policy"]
	p := checks["redis persistence"]
	masters := strings.Count(c.Found, "; ") + 1
	if masters < 3 || strings.Count(p.Found, "; ")+1 != masters {
		t.Fatalf("want a line per master (3 or more): policy %q, persistence %q", c.Found, p.Found)
	}
	for _, addr := range target.Cluster.Addrs {
		if !strings.Contains(c.Found, addr+": ") {
			t.Fatalf("master %s not named: %q", addr, c.Found)
		}
	}
}

// TestDoctorRedoLog: the redo log is a WARN below a quarter of the buffer pool (at most 1 GiB asked), with the
// size to set; the MySQL 8 capacity wins over the file size, and MySQL 5.7's files multiply it.
func TestDoctorRedoLog(t *testing.T) {
	const mib, gib = 1 << 20, 1 << 30
	for _, c := range []struct {
		bp, redo uint64
		want     string
		fix      string
	}{
		{128 * mib, 96 * mib, checkOK, ""},           // MariaDB's defaults
		{8 * gib, 96 * mib, checkWarn, "1.0 GiB"},    // a big pool beside the default log
		{8 * gib, 1 * gib, checkOK, ""},              // 1 GiB is enough for any pool
		{2 * gib, 256 * mib, checkWarn, "512.0 MiB"}, // a quarter of the pool
		{2 * gib, 512 * mib, checkOK, ""},
	} {
		status, fix, detail := redoCheck(c.bp, c.redo)
		if status != c.want || !strings.Contains(fix, c.fix) || !strings.Contains(detail, humanBytes(c.redo)) {
			t.Errorf("pool %s, redo %s: %s %q %q; want %s with %q", humanBytes(c.bp), humanBytes(c.redo), status, fix, detail, c.want, c.fix)
		}
	}
	for _, c := range []struct {
		v    map[string]string
		want uint64
	}{
		{map[string]string{"global.innodb_log_file_size": "100663296"}, 100663296},
		{map[string]string{"global.innodb_log_file_size": "50331648", "global.innodb_log_files_in_group": "2"}, 100663296},
		{map[string]string{"global.innodb_log_file_size": "50331648", "global.innodb_redo_log_capacity": "104857600"}, 104857600},
		{map[string]string{}, 0},
	} {
		if got := redoLogSize(c.v); got != c.want {
			t.Errorf("redoLogSize(%v) = %d, want %d", c.v, got, c.want)
		}
	}
}

// TestDoctorDatabaseVersion: servers without FOR UPDATE SKIP LOCKED or JSON_TABLE fail; MariaDB before 11.8 with
// the doublewrite buffer on is a WARN naming the stall and the way out, unless its buffer pool holds the database
// with a quarter of it to spare (the sizes known); 11.8, MySQL 8 and a MariaDB without the doublewrite buffer pass; a
// version string Halley cannot read is a WARN, never a pass.
func TestDoctorDatabaseVersion(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		version, doublewrite string
		pool, data           uint64
		want                 string
		found, fix           string
	}{
		{"10.11.19-MariaDB-0+deb12u1", "ON", 0, 0, checkWarn, "MariaDB 10.11.19 with innodb_doublewrite ON", "MariaDB 11.8 LTS"},
		// A pool that holds the database with a quarter to spare: no stall measured there.
		{"10.11.19-MariaDB-0+deb12u1", "ON", 16 * gib, 9 * gib, checkOK, "the buffer pool (16.0 GiB) holds the database (9.0 GiB)", ""},
		{"10.11.19-MariaDB-0+deb12u1", "ON", 16 * gib, 12 * gib, checkOK, "holds the database (12.0 GiB)", ""},
		{"10.11.19-MariaDB-0+deb12u1", "ON", 16 * gib, 13 * gib, checkWarn, "(the database is 13.0 GiB, the buffer pool 16.0 GiB)", "a third more than the database"},
		{"10.11.19-MariaDB-0+deb12u1", "ON", 8 * gib, 0, checkWarn, "stop every write for 1–4 s", "MariaDB 11.8 LTS"},
		{"10.11.19-MariaDB-0+deb12u1", "ON", 0, 1 << 20, checkWarn, "stop every write for 1–4 s", "MariaDB 11.8 LTS"},
		// The size does not rescue a server that is too old, nor is it needed where there is no stall.
		{"10.5.27-MariaDB", "ON", 16 * gib, 1 * gib, checkFail, "MariaDB 10.5.27", "MariaDB 10.6 or later"},
		{"11.8.9-MariaDB", "ON", 1 * gib, 9 * gib, checkOK, "MariaDB 11.8.9", ""},
		{"10.11.19-MariaDB-0+deb12u1", "", 0, 0, checkWarn, "innodb_doublewrite ON", "innodb_doublewrite = OFF only where"},
		{"10.11.19-MariaDB-0+deb12u1", "OFF", 0, 0, checkOK, "MariaDB 10.11.19", ""},
		{"10.6.21-MariaDB", "1", 0, 0, checkWarn, "MariaDB 10.6.21 with innodb_doublewrite ON", "11.8"},
		{"10.11.6-MariaDB", "0", 0, 0, checkOK, "MariaDB 10.11.6", ""},
		{"11.4.5-MariaDB-log", "ON", 0, 0, checkWarn, "MariaDB 11.4.5", "11.8"},
		{"11.8.9-MariaDB-0+deb13u1", "ON", 0, 0, checkOK, "MariaDB 11.8.9", ""},
		{"12.1.2-MariaDB", "fast", 0, 0, checkOK, "MariaDB 12.1.2", ""},
		{"5.5.5-10.5.27-MariaDB", "ON", 0, 0, checkFail, "MariaDB 10.5.27", "MariaDB 10.6 or later"},
		{"10.3.39-MariaDB-0+deb10u2", "ON", 0, 0, checkFail, "SKIP LOCKED", "MariaDB 10.6 or later"},
		{"8.0.3-rc-log", "ON", 0, 0, checkFail, "MySQL 8.0.3", "MySQL 8.0.4 or later"},
		{"5.7.44-log", "ON", 0, 0, checkFail, "MySQL 5.7.44", "MySQL 8.0.4"},
		{"8.0.36", "ON", 0, 0, checkOK, "MySQL 8.0.36", ""},
		{"8.4.3", "DETECT_AND_RECOVER", 0, 0, checkOK, "MySQL 8.4.3", ""},
		{"9.1.0-commercial", "ON", 0, 0, checkOK, "MySQL 9.1.0", ""},
		{"", "", 0, 0, checkWarn, "not a version", "MySQL 8.0.4+ or MariaDB 10.6+"},
		{"unknown", "ON", 0, 0, checkWarn, "not a version", "MySQL 8.0.4+"},
	} {
		status, fix, found := versionCheck(c.version, c.doublewrite, c.pool, c.data)
		if status != c.want || !strings.Contains(found, c.found) || !strings.Contains(fix, c.fix) || (status == checkOK) != (fix == "") {
			t.Errorf("versionCheck(%q, %q, %d, %d) = %s, fix %q, found %q; want %s with %q and fix %q", c.version, c.doublewrite, c.pool, c.data, status, fix, found, c.want, c.found, c.fix)
		}
	}
}
