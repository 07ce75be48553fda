package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/halley-bpm/halley/server/config"
	"github.com/halley-bpm/halley/service/redisconn"
	"github.com/halley-bpm/halley/service/store"
	halleysql "github.com/halley-bpm/halley/sql"
)

// Doctor check results.
const (
	checkOK   = "OK"
	checkWarn = "WARN"
	checkFail = "FAIL"
)

// check is one line of `halley doctor`: what was checked, what was found and, unless it is OK, what to do.
type check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // OK, WARN or FAIL
	Found  string `json:"found"`
	Fix    string `json:"fix,omitempty"`
}

// doctorOptions are the doctor's flags.
type doctorOptions struct {
	JSON     bool
	Replicas int
	Timeout  time.Duration
}

// Thresholds of the doctor's checks (docs/operations.md "halley doctor" lists them).
const (
	skewWarn          = 500 * time.Millisecond
	skewFail          = 5 * time.Second
	diskWarnBytes     = 1 << 30   // 1 GiB free
	diskFailBytes     = 100 << 20 // 100 MiB free
	bufferPoolWarn    = 512 << 20
	redoWarnCap       = 1 << 30 // the redo log is too small below min(buffer pool / 4, 1 GiB)
	redisLatencyWarn  = 20 * time.Millisecond
	redisLatencyPings = 10
)

// errDoctorFailed: a check failed (exit status 1, the report says which).
var errDoctorFailed = errors.New("a check failed")

func doctorCommand(cfgPath *string, getenv func(string) string) *cobra.Command {
	var o doctorOptions
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the configuration, the database, Redis, clocks, disks and the plugin sandbox, and say what to fix",
		Long: "Check a deployment with the settings serve reads (HALLEY_* and --config): the configuration, the database\n" +
			"(version, isolation level, max_connections against the pools of all replicas, buffer pool, sql_mode,\n" +
			"time zone, character set; for SQLite the file, WAL and free disk), the migrations, Redis (version,\n" +
			"persistence, maxmemory-policy, latency), the clock against the database's, free disk for plugins and\n" +
			"attachments, and what the plugin sandbox needs. One line per check: OK, WARN or FAIL, what was found and\n" +
			"what to fix. It changes nothing. The exit status is 1 when a check fails. See docs/operations.md.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if o.Replicas < 1 {
				return fmt.Errorf("%s: --replicas must be at least 1", c.CommandPath())
			}
			checks := runDoctor(c.Context(), *cfgPath, getenv, o)
			if err := printDoctor(c.OutOrStdout(), checks, o.JSON); err != nil {
				return err
			}
			for _, ch := range checks {
				if ch.Status == checkFail {
					return loggedError{errDoctorFailed} // the report said it
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the checks as JSON ({\"checks\":[{name,status,found,fix}],\"ok\":bool})")
	cmd.Flags().IntVar(&o.Replicas, "replicas", 2, "how many replicas will share the database (max_connections must hold all their pools)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 10*time.Second, "how long to wait for the database and Redis")
	return cmd
}

func printDoctor(w io.Writer, checks []check, asJSON bool) error {
	if asJSON {
		ok := true
		for _, c := range checks {
			ok = ok && c.Status != checkFail
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"checks": checks, "ok": ok})
	}
	counts := map[string]int{}
	for _, c := range checks {
		counts[c.Status]++
		line := fmt.Sprintf("%-4s  %-24s %s", c.Status, c.Name, c.Found)
		if c.Fix != "" {
			line += "\n      " + strings.Repeat(" ", 24) + " fix: " + c.Fix
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\n%d OK, %d WARN, %d FAIL\n", counts[checkOK], counts[checkWarn], counts[checkFail])
	return err
}

// doctor collects the checks.
type doctor struct {
	cfg    *config.Config
	opts   doctorOptions
	checks []check
}

func (d *doctor) add(name, status, fix, found string, args ...any) {
	if status == checkOK {
		fix = ""
	}
	d.checks = append(d.checks, check{Name: name, Status: status, Found: fmt.Sprintf(found, args...), Fix: fix})
}

func runDoctor(ctx context.Context, cfgPath string, getenv func(string) string, o doctorOptions) []check {
	d := &doctor{opts: o}
	cfg, err := config.Load(cfgPath, getenv)
	if err != nil {
		d.add("configuration", checkFail, "correct the setting named (docs/configuration.md lists them all)", "%v", err)
		return d.checks
	}
	d.cfg = cfg
	src := "environment"
	if cfg.File != "" {
		src = "environment and " + cfg.File
	}
	d.add("configuration", checkOK, "", "valid (%s)", src)
	if cfg.AdminPasswordDefaulted {
		d.add("admin password", checkWarn, "set HALLEY_ADMIN_PASSWORD (it only matters for the first start of an empty database)", "HALLEY_ADMIN_PASSWORD is unset: an empty database gets the default admin password")
	}
	d.database(ctx)
	d.redis(ctx)
	d.disks()
	d.sandbox(ctx)
	return d.checks
}

// database checks the database: reachable, version, settings, migrations and clock skew.
func (d *doctor) database(ctx context.Context) {
	cfg := d.cfg
	dialect, dsn, err := store.ParseURL(cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		d.add("database", checkFail, "correct HALLEY_DATABASE_URL", "%v", err)
		return
	}
	if dialect == store.SQLite {
		d.sqliteFile(strings.SplitN(dsn, "?", 2)[0])
	}
	octx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	st, err := store.Open(octx, store.Config{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, MaxOpenConns: 2, Logger: slog.New(slog.DiscardHandler), MustExist: true})
	if err != nil {
		if dialect == store.SQLite {
			d.add("database", checkWarn, "none needed for a new deployment: halley serve (or halley migrate) creates it", "%v", err)
			return
		}
		d.add("database", checkFail, "check that the database server runs and that HALLEY_DATABASE_URL names its address, user, password and database", "%v", err)
		return
	}
	defer st.Close() //nolint:errcheck // read only: nothing to lose
	db := st.DB().WithContext(octx)
	if dialect == store.SQLite {
		var v, mode string
		db.Raw("SELECT sqlite_version()").Scan(&v)
		db.Raw("PRAGMA journal_mode").Scan(&mode)
		d.add("database", checkOK, "", "SQLite %s", v)
		if strings.EqualFold(mode, "wal") {
			d.add("sqlite journal", checkOK, "", "journal_mode=wal")
		} else {
			d.add("sqlite journal", checkWarn, "let Halley open the file (it sets WAL); check that the file system supports WAL (not a network share)", "journal_mode=%s, not wal: readers block the writer", mode)
		}
	} else {
		d.mysql(octx, st)
	}
	d.migrations(octx, st)
	if dialect == store.MySQL {
		d.clockSkew(octx, st)
	} else {
		d.add("clock skew", checkOK, "", "SQLite runs in this process: one clock, and no replicas")
	}
}

// sqliteFile checks that the SQLite file (or its folder, before the first start) is writable, with free disk.
func (d *doctor) sqliteFile(path string) {
	dir := filepath.Dir(path)
	if err := writable(dir); err != nil {
		d.add("sqlite file", checkFail, "give the user Halley runs as write access to "+dir+" (SQLite writes its -wal and -shm files beside the database)", "%v", err)
	} else if f, err := os.OpenFile(path, os.O_RDWR, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.add("sqlite file", checkFail, "give the user Halley runs as read and write access to "+path, "%v", err)
	} else {
		if f != nil {
			_ = f.Close() // opened only to see that it may be
		}
		d.add("sqlite file", checkOK, "", "%s writable", path)
	}
	d.disk("disk (database)", dir)
}

// mysqlVars reads global and session variables; missing ones are "".
// preparedStatements checks that the server lets every replica keep its step groups prepared
// (HALLEY_DB_STMT_CACHE): beyond max_prepared_stmt_count, shared by all the server's clients, a connection sends its
// groups as text, slower but correct.
func (d *doctor) preparedStatements(limit string) {
	n, err := strconv.Atoi(limit)
	need := d.opts.Replicas * store.PreparedConns * d.cfg.DBStmtCache
	switch {
	case err != nil:
		d.add("max_prepared_stmt_count", checkWarn, "check that the user may read @@max_prepared_stmt_count", "unable to read max_prepared_stmt_count")
	case n < need:
		d.add("max_prepared_stmt_count", checkWarn, fmt.Sprintf("raise max_prepared_stmt_count to at least %d, or lower HALLEY_DB_STMT_CACHE", need),
			"%d, below %d replicas × %d connections × %d statements (HALLEY_DB_STMT_CACHE): beyond it step groups go as text, costing the database more CPU",
			n, d.opts.Replicas, store.PreparedConns, d.cfg.DBStmtCache)
	default:
		d.add("max_prepared_stmt_count", checkOK, "", "%d, enough for %d replicas × %d connections × %d statements (~0.5 MB of the server's memory each)",
			n, d.opts.Replicas, store.PreparedConns, d.cfg.DBStmtCache)
	}
}

func mysqlVars(ctx context.Context, st *store.Store, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		var v *string
		if err := st.DB().WithContext(ctx).Raw("SELECT @@" + n).Scan(&v).Error; err == nil && v != nil {
			out[n] = *v
		}
	}
	return out
}

func (d *doctor) mysql(ctx context.Context, st *store.Store) {
	v := mysqlVars(ctx, st, "version", "version_comment", "global.innodb_doublewrite", "session.transaction_isolation", "session.tx_isolation", "global.max_connections",
		"global.max_prepared_stmt_count", "global.innodb_buffer_pool_size", "global.innodb_log_file_size", "global.innodb_log_files_in_group", "global.innodb_redo_log_capacity", "session.sql_mode", "session.time_zone", "global.time_zone", "system_time_zone",
		"character_set_server", "character_set_database", "collation_database", "session.character_set_connection")
	d.add("database", checkOK, "", "MySQL/MariaDB %s (%s)", v["version"], v["version_comment"])
	bufferPool, _ := strconv.ParseUint(v["global.innodb_buffer_pool_size"], 10, 64)
	vStatus, vFix, vDetail := versionCheck(v["version"], v["global.innodb_doublewrite"], bufferPool, databaseBytes(ctx, st))
	d.add("database version", vStatus, vFix, "%s", vDetail)

	iso := v["session.transaction_isolation"]
	if iso == "" {
		iso = v["session.tx_isolation"]
	}
	switch strings.ToUpper(strings.ReplaceAll(iso, " ", "-")) {
	case "READ-COMMITTED", "REPEATABLE-READ":
		d.add("isolation level", checkOK, "", "%s (Halley locks instance rows itself and runs its sweeps at READ COMMITTED)", iso)
	case "SERIALIZABLE":
		d.add("isolation level", checkWarn, "set transaction_isolation = 'READ-COMMITTED' (or the default REPEATABLE-READ) in the server's configuration",
			"SERIALIZABLE: every read takes shared locks, so concurrent steps wait on and deadlock with each other")
	default:
		d.add("isolation level", checkFail, "set transaction_isolation = 'READ-COMMITTED' (or the default REPEATABLE-READ) in the server's configuration",
			"%q: Halley needs at least READ COMMITTED (it must never read uncommitted instance states)", iso)
	}

	maxConn, _ := strconv.Atoi(v["global.max_connections"])
	pool := d.cfg.DBMaxOpenConns
	if pool == 0 {
		pool = 64 // store.Open's default for MySQL
	}
	prepared, conns := 0, "a pool of "+strconv.Itoa(pool)
	if d.cfg.DBStmtCache > 0 && strings.Contains(v["version"], "MariaDB") {
		prepared = store.PreparedConns // beside the pool, keeping step groups prepared
		conns = fmt.Sprintf("(a pool of %d + %d keeping step groups prepared)", pool, prepared)
	}
	need := (pool+prepared)*d.opts.Replicas + 10 // and a few for people and tools
	switch {
	case maxConn == 0:
		d.add("max_connections", checkWarn, "check that the user may read @@max_connections", "unable to read max_connections")
	case maxConn < need:
		d.add("max_connections", checkWarn, fmt.Sprintf("raise max_connections to at least %d, or lower HALLEY_DB_MAX_OPEN_CONNS", need),
			"%d, below %d replicas × %s (HALLEY_DB_MAX_OPEN_CONNS) + 10: under load replicas are refused connections (error 1040)", maxConn, d.opts.Replicas, conns)
	default:
		d.add("max_connections", checkOK, "", "%d, enough for %d replicas × %s + 10", maxConn, d.opts.Replicas, conns)
	}
	if prepared > 0 {
		d.preparedStatements(v["global.max_prepared_stmt_count"])
	}

	if bp, err := strconv.ParseUint(v["global.innodb_buffer_pool_size"], 10, 64); err == nil {
		if bp < bufferPoolWarn {
			d.add("innodb_buffer_pool_size", checkWarn, "give innodb_buffer_pool_size most of the database host's memory (at least 512 MiB; the instance, task and history tables are read on every step)",
				"%s, the default-sized buffer pool: the working set will not stay in memory", humanBytes(bp))
		} else {
			d.add("innodb_buffer_pool_size", checkOK, "", "%s", humanBytes(bp))
		}
	}

	if bp, err := strconv.ParseUint(v["global.innodb_buffer_pool_size"], 10, 64); err == nil {
		if redo := redoLogSize(v); redo > 0 {
			status, fix, detail := redoCheck(bp, redo)
			d.add("innodb redo log", status, fix, "%s", detail)
		}
	}

	mode := strings.ToUpper(v["session.sql_mode"])
	var bad []string
	for _, m := range []string{"ANSI_QUOTES", "NO_BACKSLASH_ESCAPES", "PAD_CHAR_TO_FULL_LENGTH"} {
		if strings.Contains(mode, m) {
			bad = append(bad, m)
		}
	}
	switch {
	case len(bad) > 0:
		d.add("sql_mode", checkFail, "remove "+strings.Join(bad, ", ")+" from sql_mode", "%s: %s change how Halley's statements are read", v["session.sql_mode"], strings.Join(bad, ", "))
	case !strings.Contains(mode, "STRICT_TRANS_TABLES") && !strings.Contains(mode, "STRICT_ALL_TABLES"):
		d.add("sql_mode", checkWarn, "add STRICT_TRANS_TABLES to sql_mode (the MySQL and MariaDB default)", "%q: without strict mode a value too long is cut silently instead of refused", v["session.sql_mode"])
	default:
		d.add("sql_mode", checkOK, "", "%s", v["session.sql_mode"])
	}

	tz := v["global.time_zone"]
	if tz == "SYSTEM" {
		tz = "SYSTEM (" + v["system_time_zone"] + ")"
	}
	if utcZone(v["global.time_zone"], v["system_time_zone"]) {
		d.add("time_zone", checkOK, "", "%s", tz)
	} else {
		d.add("time_zone", checkWarn, "set default_time_zone = '+00:00' in the server's configuration",
			"%s: Halley writes UTC and compares with UTC_TIMESTAMP, but NOW() and tools reading the tables see local times", tz)
	}

	var schemaCS, schemaColl string
	_ = st.DB().WithContext(ctx).Raw("SELECT default_character_set_name, default_collation_name FROM information_schema.schemata WHERE schema_name = DATABASE()").
		Row().Scan(&schemaCS, &schemaColl)
	var tables []string
	st.DB().WithContext(ctx).Raw("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' AND table_collation NOT LIKE 'utf8mb4%'").Scan(&tables)
	switch {
	case len(tables) > 0:
		sort.Strings(tables)
		d.add("character set", checkFail, "convert them: ALTER TABLE <name> CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
			"tables not in utf8mb4: %s (names and comments outside the Basic Multilingual Plane, emoji, cannot be stored)", strings.Join(tables, ", "))
	case !strings.HasPrefix(schemaCS, "utf8mb4"):
		d.add("character set", checkWarn, "ALTER DATABASE <name> CHARACTER SET utf8mb4 COLLATE utf8mb4_bin (Halley's own tables declare utf8mb4)",
			"database default %s (%s): tables created by hand or by tools get it", schemaCS, schemaColl)
	default:
		d.add("character set", checkOK, "", "database %s (%s), every table utf8mb4; connection %s", schemaCS, schemaColl, v["session.character_set_connection"])
	}
}

func utcZone(zone, system string) bool {
	switch strings.ToUpper(zone) {
	case "+00:00", "UTC", "GMT", "ETC/UTC", "Z":
		return true
	case "SYSTEM":
		return utcZone(system, "")
	}
	return false
}

// migrations compares the database's schema version with this binary's migrations.
func (d *doctor) migrations(ctx context.Context, st *store.Store) {
	migs, err := store.LoadMigrations(halleysql.Migrations)
	if err != nil {
		d.add("migrations", checkFail, "rebuild halley", "%v", err)
		return
	}
	have, err := st.SchemaVersion(ctx)
	if err != nil {
		d.add("migrations", checkFail, "check the database user's rights on schema_migrations", "%v", err)
		return
	}
	known := len(migs)
	switch {
	case have == known:
		d.add("migrations", checkOK, "", "schema at version %d, this binary's latest", have)
	case have < known:
		d.add("migrations", checkWarn, "run halley migrate (halley serve also migrates at start)", "schema at version %d, %d pending (this binary knows %d)", have, known-have, known)
	default:
		d.add("migrations", checkFail, "run a release that knows the schema (the one that migrated it, or newer): an older binary refuses to start on it",
			"schema at version %d, newer than this binary (%d)", have, known)
	}
}

// clockSkew compares this host's clock with the database's (the midpoint of the query's round trip).
func (d *doctor) clockSkew(ctx context.Context, st *store.Store) {
	var best time.Duration = -1
	var skew time.Duration
	for range 3 {
		var ts time.Time
		t0 := time.Now()
		if err := st.DB().WithContext(ctx).Raw("SELECT UTC_TIMESTAMP(6)").Row().Scan(&ts); err != nil {
			d.add("clock skew", checkWarn, "check the database connection", "unable to read the database's clock: %v", err)
			return
		}
		rtt := time.Since(t0)
		if best < 0 || rtt < best { // the fastest round trip bounds the error best
			best, skew = rtt, ts.Sub(t0.Add(rtt/2))
		}
	}
	found := fmt.Sprintf("the database's clock is %s %s this host's (±%s round trip); only host against database: replicas record no heartbeats to compare",
		skew.Abs().Round(time.Microsecond), map[bool]string{true: "ahead of", false: "behind"}[skew >= 0], (best / 2).Round(time.Microsecond))
	d.add("clock skew", skewStatus(skew), "run NTP (chrony, systemd-timesyncd) on this host and the database host: timers fire, leases expire and claims are compared by these clocks",
		"%s", found)
}

// skewStatus grades a clock skew: WARN past skewWarn, FAIL past skewFail.
func skewStatus(skew time.Duration) string {
	switch abs := skew.Abs(); {
	case abs > skewFail:
		return checkFail
	case abs > skewWarn:
		return checkWarn
	}
	return checkOK
}

// diskStatus grades free bytes: WARN below diskWarnBytes, FAIL below diskFailBytes.
func diskStatus(free uint64) string {
	switch {
	case free < diskFailBytes:
		return checkFail
	case free < diskWarnBytes:
		return checkWarn
	}
	return checkOK
}

// redisNode is what the doctor read from one Redis server (each master of a cluster).
type redisNode struct {
	addr string
	info map[string]string
	save string // CONFIG GET save; "" when none or refused
}

func readRedisNode(ctx context.Context, c *redis.Client) (redisNode, error) {
	n := redisNode{addr: c.Options().Addr, info: map[string]string{}}
	for _, section := range []string{"server", "persistence", "memory"} {
		s, err := c.Info(ctx, section).Result()
		if err != nil {
			return n, fmt.Errorf("%s: INFO %s: %w", n.addr, section, err)
		}
		for _, l := range strings.Split(s, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
				n.info[k] = v
			}
		}
	}
	if kv, err := c.ConfigGet(ctx, "save").Result(); err == nil { // may be refused on managed Redis
		n.save = strings.TrimSpace(kv["save"])
	}
	return n, nil
}

// worse is the more serious of two statuses.
func worse(a, b string) string {
	rank := map[string]int{checkOK: 0, checkWarn: 1, checkFail: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// perNode adds one check over every node: the worst status, what each node has (named by address on a cluster).
func (d *doctor) perNode(name string, nodes []redisNode, grade func(n redisNode) (status, fix, found string)) {
	status, fix := checkOK, ""
	var found []string
	for _, n := range nodes {
		st, fx, f := grade(n)
		if len(nodes) > 1 {
			f = n.addr + ": " + f
		}
		found = append(found, f)
		if worse(status, st) != status || fix == "" {
			fix = fx
		}
		status = worse(status, st)
	}
	d.add(name, status, fix, "%s", strings.Join(found, "; "))
}

// redis checks Redis when HALLEY_REDIS_URL is set: one server, or every master of a cluster.
func (d *doctor) redis(ctx context.Context) {
	if d.cfg.RedisURL == "" {
		d.add("redis", checkOK, "", "not configured: one replica, timers in process (set HALLEY_REDIS_URL to run several)")
		return
	}
	target, err := redisconn.Parse(d.cfg.RedisURL)
	if err != nil {
		d.add("redis", checkFail, "correct HALLEY_REDIS_URL", "%v", err)
		return
	}
	addr := ""
	if target.Cluster != nil {
		target.Cluster.MaxRetries = -1
		addr = "cluster " + strings.Join(target.Cluster.Addrs, ",")
	} else {
		target.Single.MaxRetries = -1
		addr = target.Single.Addr
	}
	rdb := target.Client()
	defer rdb.Close() //nolint:errcheck // read only: nothing to lose
	rctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	if err := rdb.Ping(rctx).Err(); err != nil {
		d.add("redis", checkFail, "check that Redis runs and that HALLEY_REDIS_URL names its address, password and database", "%s: %v", addr, err)
		return
	}
	var nodes []redisNode
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		err = c.ForEachMaster(rctx, func(ctx context.Context, m *redis.Client) error {
			n, err := readRedisNode(ctx, m)
			mu.Lock()
			defer mu.Unlock()
			nodes = append(nodes, n)
			return err
		})
		sort.Slice(nodes, func(i, j int) bool { return nodes[i].addr < nodes[j].addr })
	case *redis.Client:
		var n redisNode
		n, err = readRedisNode(rctx, c)
		nodes = append(nodes, n)
	}
	if err != nil {
		d.add("redis", checkFail, "allow the INFO command to Halley's Redis user", "%v", err)
		return
	}
	n0 := nodes[0].info
	d.add("redis", checkOK, "", "Redis %s at %s (%s mode)", n0["redis_version"], addr, n0["redis_mode"])

	// persistence: AOF, or RDB snapshots.
	d.perNode("redis persistence", nodes, func(n redisNode) (string, string, string) {
		switch {
		case n.info["aof_enabled"] == "1":
			return checkOK, "", "appendonly yes"
		case n.save != "":
			return checkOK, "", "RDB snapshots (save " + n.save + "), no AOF: a crash loses the last writes, which timer recovery rebuilds from the database"
		}
		return checkWarn, "set appendonly yes (or RDB save points)",
			"none (no AOF, no RDB save points, or CONFIG GET refused): a Redis restart empties the timer index, rebuilt from the database only at the next recovery pass (HALLEY_REDIS_CHECK_INTERVAL)"
	})

	why := "Redis would evict keys Halley needs: timer members (a timer then fires only after the recovery pass), housekeeping locks (two replicas run one job), rate-limit counters"
	d.perNode("redis maxmemory-policy", nodes, func(n redisNode) (string, string, string) {
		policy, maxmem := n.info["maxmemory_policy"], n.info["maxmemory"]
		switch {
		case policy == "noeviction":
			return checkOK, "", "noeviction (maxmemory " + maxmem + ")"
		case maxmem == "0" || maxmem == "":
			return checkWarn, "CONFIG SET maxmemory-policy noeviction (and in redis.conf)",
				policy + " with no maxmemory limit: nothing is evicted now, but once a limit is set " + why
		}
		return checkFail, "CONFIG SET maxmemory-policy noeviction (and in redis.conf), or give Halley a Redis of its own",
			policy + " with maxmemory " + maxmem + ": " + why
	})

	var lat []time.Duration
	for range redisLatencyPings {
		t0 := time.Now()
		if err := rdb.Ping(rctx).Err(); err != nil {
			break
		}
		lat = append(lat, time.Since(t0))
	}
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		med, worst := lat[len(lat)/2], lat[len(lat)-1]
		if med > redisLatencyWarn {
			d.add("redis latency", checkWarn, "put Redis next to Halley (same zone), and check its host's load", "median %s, worst %s over %d PINGs: every timer and lock costs round trips", med.Round(time.Microsecond), worst.Round(time.Microsecond), len(lat))
		} else {
			d.add("redis latency", checkOK, "", "median %s, worst %s over %d PINGs", med.Round(time.Microsecond), worst.Round(time.Microsecond), len(lat))
		}
	}
}

// disks checks free space where Halley writes files.
func (d *doctor) disks() {
	d.disk("disk (plugins)", d.cfg.PluginDir)
	d.disk("disk (plugin runs)", d.cfg.PluginWorkDir)
	if d.cfg.AttachmentStorage == "dir" {
		d.disk("disk (attachments)", d.cfg.AttachmentDir)
	}
}

// disk checks the free space of the file system holding dir (or its nearest existing parent).
func (d *doctor) disk(name, dir string) {
	at := dir
	for {
		if _, err := os.Stat(at); err == nil || filepath.Dir(at) == at {
			break
		}
		at = filepath.Dir(at)
	}
	free, total, err := diskFree(at)
	if err != nil {
		d.add(name, checkWarn, "check the path", "%s: %v", dir, err)
		return
	}
	found := fmt.Sprintf("%s: %s free of %s", dir, humanBytes(free), humanBytes(total))
	fix := fmt.Sprintf("free space on the file system of %s, or move it (keep at least %s free)", dir, humanBytes(diskWarnBytes))
	d.add(name, diskStatus(free), fix, "%s", found)
}

// sandbox checks what the plugin sandbox needs without setting it up (that changes file modes and cgroups:
// halley serve does it, and GET /api/v1/plugins/sandbox shows what it found).
func (d *doctor) sandbox(ctx context.Context) {
	cfg := d.cfg
	py := cfg.PluginPython
	path, err := exec.LookPath(py)
	if err != nil {
		d.add("python", checkWarn, "install python3 or set HALLEY_PLUGIN_PYTHON to its absolute path (python plugins fail until then)", "%s: %v", py, err)
	} else {
		vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, err := exec.CommandContext(vctx, path, "--version").CombinedOutput() //nolint:gosec // G204: the interpreter the operator configured, as plugins run it
		cancel()
		if err != nil {
			d.add("python", checkWarn, "check the interpreter HALLEY_PLUGIN_PYTHON names", "%s --version: %v", path, err)
		} else {
			d.add("python", checkOK, "", "%s (%s)", path, strings.TrimSpace(string(out)))
		}
	}

	uid := os.Getuid()
	last := cfg.PluginUID + cfg.PluginWorkers - 1
	switch {
	case cfg.PluginUID == 0 || uid == cfg.PluginUID:
		d.add("plugin uid", checkWarn, "set HALLEY_PLUGIN_UID to a range of its own (default 61000)", "HALLEY_PLUGIN_UID %d: plugins would run as Halley's own uid or root", cfg.PluginUID)
	case uid == 0 || hasCapSetuid():
		d.add("plugin uid", checkOK, "", "plugins run as uids %d-%d (Halley, uid %d, may switch to them)", cfg.PluginUID, last, uid)
	default:
		d.add("plugin uid", checkWarn, "run Halley as root or with CAP_SETUID, CAP_SETGID (docs/security.md \"Plugin isolation\")",
			"Halley runs as uid %d without CAP_SETUID: plugins run as Halley's own uid and can read what it can", uid)
	}

	switch cfg.PluginCgroup {
	case "off":
		d.add("cgroup", checkWarn, "unset HALLEY_PLUGIN_CGROUP (or name a delegated cgroup v2 folder)", "turned off (HALLEY_PLUGIN_CGROUP=off): a run's leftovers are killed by uid, no memory.max or pids.max")
	default:
		dir := cfg.PluginCgroup
		if dir == "" {
			dir = ownCgroupDir()
		}
		if dir == "" {
			d.add("cgroup", checkWarn, "run on a host with cgroup v2 (or set HALLEY_PLUGIN_CGROUP to a delegated folder)", "no cgroup v2 hierarchy found (/proc/self/cgroup)")
		} else if err := canWrite(dir); err != nil { // a cgroup folder holds no files: ask, do not try
			d.add("cgroup", checkWarn, "delegate a cgroup v2 folder to Halley's user (systemd Delegate=yes) and name it in HALLEY_PLUGIN_CGROUP",
				"%s: %v: plugin runs get no cgroup leaf", dir, err)
		} else {
			ctl := readTrim(filepath.Join(dir, "cgroup.controllers"))
			if missing := missingControllers(ctl); len(missing) > 0 {
				d.add("cgroup", checkWarn, "enable the memory and pids controllers for Halley's cgroup (cgroup.subtree_control of its parent; systemd Delegate=yes)",
					"%s (controllers: %s): no %s, so a run gets no memory.max or pids.max from it (rlimits still apply)", dir, ctl, strings.Join(missing, ", "))
			} else {
				d.add("cgroup", checkOK, "", "%s (controllers: %s)", dir, ctl)
			}
		}
	}
}

// missingControllers lists which of the controllers the sandbox sets limits with (memory, pids) are not in a
// cgroup.controllers line.
func missingControllers(line string) []string {
	have := strings.Fields(line)
	var out []string
	for _, c := range []string{"memory", "pids"} {
		if !slices.Contains(have, c) {
			out = append(out, c)
		}
	}
	return out
}

// ownCgroupDir is the folder of this process's cgroup v2, "" when there is none.
func ownCgroupDir() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rel, ok := strings.CutPrefix(l, "0::"); ok {
			for _, mnt := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
				if _, err := os.Stat(filepath.Join(mnt, "cgroup.controllers")); err == nil {
					return filepath.Join(mnt, rel)
				}
			}
		}
	}
	return ""
}

// hasCapSetuid reports whether this process holds CAP_SETUID (bit 7 of CapEff).
func hasCapSetuid() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && n&(1<<7) != 0
		}
	}
	return false
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

// writable reports whether a file can be created in dir (or in its nearest existing parent, which serve would
// create dir in).
func writable(dir string) error {
	for {
		if st, err := os.Stat(dir); err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s is not a folder", dir)
			}
			break
		}
		if filepath.Dir(dir) == dir {
			break
		}
		dir = filepath.Dir(dir)
	}
	f, err := os.CreateTemp(dir, ".halley-doctor-*")
	if err != nil {
		return fmt.Errorf("not writable: %w", err)
	}
	name := f.Name()
	_ = f.Close() // empty: created only to see that it may be
	return os.Remove(name)
}

// databaseBytes is the size of Halley's database, its tables' data and indexes as the server estimates them; 0
// when it cannot be read.
func databaseBytes(ctx context.Context, st *store.Store) uint64 {
	var n *uint64
	if err := st.DB().WithContext(ctx).Raw("SELECT SUM(data_length + index_length) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&n).Error; err != nil || n == nil {
		return 0
	}
	return *n
}

// versionCheck judges the server's version. Halley's queue claims need FOR UPDATE SKIP LOCKED and the outbox's
// batch delete JSON_TABLE: MySQL 8.0.4+, MariaDB 10.6+. MariaDB before 11.8 with the doublewrite buffer on was
// measured to stop every write for 1–4 s now and then once its buffer pool is full (docs/benchmarks.md, "The
// stall is the doublewrite path of MariaDB 10.11"); 11.8 ran the same load without, and so did 10.11 with a pool
// that held the data (a million timers: 9.2 GiB in a 16 GiB pool, "A pool that holds the million"). pool and data
// are the buffer pool's size and the database's (0: unknown); a pool with a quarter of it to spare passes.
func versionCheck(version, doublewrite string, pool, data uint64) (status, fix, detail string) {
	mariadb := strings.Contains(strings.ToLower(version), "mariadb")
	switch doublewrite {
	case "", "1":
		doublewrite = "ON" // "": the default of every MariaDB, unread; 1: how 10.x reports a boolean
	case "0":
		doublewrite = "OFF"
	}
	num := version
	if mariadb {
		num = strings.TrimPrefix(num, "5.5.5-") // the replication-era prefix some MariaDB builds still report
	}
	if i := strings.IndexFunc(num, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		num = num[:i]
	}
	var ver [3]int
	parts := strings.Split(num, ".")
	for i := 0; i < len(ver) && i < len(parts); i++ {
		ver[i], _ = strconv.Atoi(parts[i])
	}
	atLeast := func(major, minor, patch int) bool {
		if ver[0] != major {
			return ver[0] > major
		}
		if ver[1] != minor {
			return ver[1] > minor
		}
		return ver[2] >= patch
	}
	const need = "Halley's queue claims need FOR UPDATE SKIP LOCKED and its outbox JSON_TABLE"
	switch {
	case len(parts) < 2 || ver[0] == 0:
		return checkWarn, "run MySQL 8.0.4+ or MariaDB 10.6+", fmt.Sprintf("%q: not a version Halley knows how to read", version)
	case mariadb && !atLeast(10, 6, 0):
		return checkFail, "upgrade to MariaDB 10.6 or later (11.8 LTS recommended)", fmt.Sprintf("MariaDB %s: %s (MariaDB 10.6+)", num, need)
	case !mariadb && !atLeast(8, 0, 4):
		return checkFail, "upgrade to MySQL 8.0.4 or later", fmt.Sprintf("MySQL %s: %s (MySQL 8.0.4+)", num, need)
	case mariadb && !atLeast(11, 8, 0) && !strings.EqualFold(doublewrite, "OFF"):
		const stall = "once the buffer pool is full, MariaDB 10.11 was measured to stop every write for 1–4 s now and then (steps and timers wait it out; nothing is lost)"
		if pool > 0 && data > 0 && data <= pool/4*3 {
			return checkOK, "", fmt.Sprintf("MariaDB %s with innodb_doublewrite %s; the buffer pool (%s) holds the database (%s) with room to spare: %s, so keep it ahead of the data (or upgrade to 11.8 LTS)",
				num, doublewrite, humanBytes(pool), humanBytes(data), stall)
		}
		sizes := ""
		if pool > 0 && data > 0 {
			sizes = fmt.Sprintf(" (the database is %s, the buffer pool %s)", humanBytes(data), humanBytes(pool))
		}
		return checkWarn, "upgrade to MariaDB 11.8 LTS (the same load ran there without a stall), or give the buffer pool a third more than the database; " +
				"innodb_doublewrite = OFF only where the storage writes 16 KiB pages atomically",
			fmt.Sprintf("MariaDB %s with innodb_doublewrite %s: %s%s", num, doublewrite, stall, sizes)
	}
	flavor := "MySQL"
	if mariadb {
		flavor = "MariaDB"
	}
	return checkOK, "", fmt.Sprintf("%s %s", flavor, num)
}

// redoLogSize is the server's redo log capacity: innodb_redo_log_capacity (MySQL 8.0.30+), else
// innodb_log_file_size × innodb_log_files_in_group (one file on MariaDB 10.5+); 0 when unknown.
func redoLogSize(v map[string]string) uint64 {
	if c, err := strconv.ParseUint(v["global.innodb_redo_log_capacity"], 10, 64); err == nil && c > 0 {
		return c
	}
	size, err := strconv.ParseUint(v["global.innodb_log_file_size"], 10, 64)
	if err != nil {
		return 0
	}
	if files, err := strconv.ParseUint(v["global.innodb_log_files_in_group"], 10, 64); err == nil && files > 1 {
		size *= files
	}
	return size
}

// redoCheck judges the redo log against the buffer pool. InnoDB writes a changed page back before the redo
// since its last checkpoint fills (~85 % of the log): with a log much smaller than the pool, a steady write load
// over many rows (a million instances whose timers fire) has every changed page written back within seconds,
// where a larger log lets a page take many changes per write.
func redoCheck(bufferPool, redo uint64) (status, fix, detail string) {
	want := min(bufferPool/4, uint64(redoWarnCap))
	if redo < want {
		return checkWarn, fmt.Sprintf("raise the redo log to at least %s (MariaDB 10.9+: SET GLOBAL innodb_log_file_size = %d, and in the server's configuration; MySQL 8.0.30+: innodb_redo_log_capacity)", humanBytes(want), want),
			fmt.Sprintf("%s beside a buffer pool of %s: under a steady write load InnoDB writes changed pages back to keep within the redo log instead of gathering changes in memory", humanBytes(redo), humanBytes(bufferPool))
	}
	return checkOK, "", fmt.Sprintf("%s beside a buffer pool of %s", humanBytes(redo), humanBytes(bufferPool))
}

func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
