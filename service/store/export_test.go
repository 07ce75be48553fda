package store

import (
	"context"
	"database/sql"
	"fmt"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

// ListInstancesSQL is the statement ListInstances sends for f, for the EXPLAIN test (listpages_test.go).
func (s *Store) ListInstancesSQL(f model.InstanceFilter) string {
	return s.db.ToSQL(func(tx *gorm.DB) *gorm.DB {
		var rows []instanceRow
		return s.instancesQuery(tx, f).Find(&rows)
	})
}

// The statements of the re-arm, for the EXPLAIN test (timers_test.go).
var (
	PendingTimersSQL        = pendingTimersSQL
	PendingTimersCreatedSQL = pendingTimersCreatedSQL
)

// CountInstancesSQL is the page statement of CountInstancesByStatus, for the EXPLAIN test (metrics_test.go).
var CountInstancesSQL = countInstancesSQL

// SetCountPage sets how many index entries a page of CountInstancesByStatus reads, until the test ends.
func SetCountPage(t interface{ Cleanup(func()) }, n int) {
	old := countPage
	countPage = n
	t.Cleanup(func() { countPage = old })
}

// Blocks reports whether the store sends a batch as one compound statement (MariaDB); SetBlocks turns it on or
// off, so that tests run the plain multi-statement path of MySQL too.
func (s *Store) Blocks() bool      { return s.blocks }
func (s *Store) SetBlocks(on bool) { s.blocks = on }

// OpenStmtCacheDB opens a pool whose connections keep size block statements prepared (stmtcache.go).
func OpenStmtCacheDB(dsn string, size int) (*sql.DB, error) {
	c, err := newStmtCacheConnector(dsn, size, &groupCounts{})
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// IsGuardFailedForTest is isGuardFailed.
var IsGuardFailedForTest = isGuardFailed

// OneConnectionForTest has the store run on one connection of its main pool and one of those that keep step
// groups prepared, so that a test's steps reuse the connection the one before used.
func (s *Store) OneConnectionForTest() {
	s.sqlDB.SetMaxOpenConns(1)
	if s.prepared != nil {
		s.prepared.db.SetMaxOpenConns(1)
	}
}

// PreparedConnsDo runs fn on each idle connection that keeps step groups prepared, holding them all meanwhile.
func (s *Store) PreparedConnsDo(ctx context.Context, fn func(c *sql.Conn) error) error {
	if s.prepared == nil {
		return nil
	}
	var conns []*sql.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	for n := s.prepared.db.Stats().Idle; n > 0; n-- {
		c, err := s.prepared.db.Conn(ctx)
		if err != nil {
			return err
		}
		conns = append(conns, c)
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// TakePreparedConnsForTest takes every connection that keeps step groups prepared, as busy steps would, until
// release.
func (s *Store) TakePreparedConnsForTest(ctx context.Context) (release func(), err error) {
	var frees []func()
	release = func() {
		for _, f := range frees {
			f()
		}
	}
	for range cap(s.prepared.slots) {
		c, free, err := s.prepared.conn(ctx)
		if c == nil {
			release()
			return nil, fmt.Errorf("taking a connection: %v", err)
		}
		frees = append(frees, func() { _ = c.Close(); free() })
	}
	return release, nil
}

// PreparedStats is the statistics of the connections that keep step groups prepared (zero when there are none).
func (s *Store) PreparedStats() sql.DBStats {
	if s.prepared == nil {
		return sql.DBStats{}
	}
	return s.prepared.db.Stats()
}

// BreakPreparedConnsForTest has the connections that keep step groups prepared open to a port nobody listens on.
func (s *Store) BreakPreparedConnsForTest(dsn string) error {
	c, err := newStmtCacheConnector(dsn, 4, s.groups)
	if err != nil {
		return err
	}
	old := s.prepared.db
	s.prepared.db = sql.OpenDB(c)
	return old.Close()
}
