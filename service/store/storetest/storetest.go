// Package storetest gives tests a freshly migrated store on every backend: SQLite always, MySQL when
// HALLEY_TEST_MYSQL is set (mysql://user:pass@host:port/anydb). Each MySQL store gets its own database, dropped
// when the test ends. Under CI=true a missing HALLEY_TEST_MYSQL fails the test instead of skipping it.
package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	mysqldriver "github.com/go-sql-driver/mysql"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/store"
)

// Dialects lists the backends a suite runs on.
var Dialects = []string{store.SQLite, store.MySQL}

// Each runs fn as a subtest on a fresh store of every backend.
func Each(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(d, func(t *testing.T) {
			fn(t, Open(t, d))
		})
	}
}

// Open returns a fresh, migrated store of the dialect, closed (and for MySQL dropped) at the end of the test.
func Open(t *testing.T, dialect string) *store.Store {
	t.Helper()
	u := URL(t, dialect)
	// A small pool: test packages run in parallel against one MySQL server. A few step groups kept prepared on
	// each connection (MariaDB), so that the store's tests run both the prepared path and its evictions.
	s, err := store.Open(context.Background(), store.Config{URL: u, DataDir: t.TempDir(), Logger: testkit.Quiet(), MaxOpenConns: 16, StmtCache: 4})
	if err != nil {
		t.Fatalf("open %s store: %v", dialect, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate %s store: %v", dialect, err)
	}
	return s
}

// URL returns a database URL for a fresh, empty database of the dialect (created now, dropped at cleanup).
func URL(t testing.TB, dialect string) string {
	t.Helper()
	switch dialect {
	case store.SQLite:
		// Escaped: a test name may put '#' (a URL fragment) or '?' into the temporary directory's path.
		return "sqlite://" + (&url.URL{Path: filepath.Join(t.TempDir(), "halley.db")}).EscapedPath()
	case store.MySQL:
		base := MySQLURL(t)
		name := "halley_t_" + randHex(6)
		admin := adminConn(t, base)
		if _, err := admin.Exec("CREATE DATABASE " + name + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
			t.Fatalf("create test database: %v", err)
		}
		t.Cleanup(func() {
			if _, err := admin.Exec("DROP DATABASE IF EXISTS " + name); err != nil {
				t.Logf("drop test database %s: %v", name, err)
			}
			_ = admin.Close()
		})
		pu, _ := url.Parse(base)
		pu.Path = "/" + name
		return pu.String()
	}
	t.Fatalf("unknown dialect %q", dialect)
	return ""
}

// MySQLURL returns HALLEY_TEST_MYSQL, skipping the test when it is unset (failing it under CI=true).
func MySQLURL(t testing.TB) string {
	t.Helper()
	return Require(t, "HALLEY_TEST_MYSQL")
}

// RedisURL returns HALLEY_TEST_REDIS, skipping the test when it is unset (failing it under CI=true).
func RedisURL(t *testing.T) string {
	t.Helper()
	return Require(t, "HALLEY_TEST_REDIS")
}

// Require returns the environment variable, skipping the test when it is unset, or failing it under CI=true.
func Require(t testing.TB, env string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: under CI=true tests that need this service must run", env)
		}
		t.Skipf("%s is not set; skipping (CI=true would fail)", env)
	}
	return v
}

func adminConn(t testing.TB, base string) *sql.DB {
	t.Helper()
	_, dsn, err := store.ParseURL(base, "")
	if err != nil {
		t.Fatalf("HALLEY_TEST_MYSQL: %v", err)
	}
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("HALLEY_TEST_MYSQL: %v", err)
	}
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("connect to MySQL: %v", err)
	}
	if err := db.Ping(); err != nil {
		t.Fatalf("MySQL at HALLEY_TEST_MYSQL is not reachable: %v", err)
	}
	return db
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
