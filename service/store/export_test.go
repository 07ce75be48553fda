package store

import (
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
