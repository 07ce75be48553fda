package store

import (
	"database/sql"

	mysqldriver "github.com/go-sql-driver/mysql"
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
	cfg, err := mysqldriver.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	c, err := mysqldriver.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(&stmtCacheConnector{Connector: c, size: size}), nil
}

// IsGuardFailedForTest is isGuardFailed.
var IsGuardFailedForTest = isGuardFailed
