package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

// countPage is how many index entries one statement of CountInstancesByStatus reads: a few milliseconds of the
// database at a time. A variable for the tests.
var countPage = 10000

// countInstancesSQL counts the instances of the next page of idx_instances_status (tenant_id, status, id) after
// the entry (tenant, status, id), by tenant and status, with the last id of each: a range of the index from the
// cursor (the three disjuncts are its intervals), one page long.
func countInstancesSQL(dialect string) string {
	return "SELECT tenant_id, status, COUNT(*) AS n, MAX(id) AS last FROM (SELECT tenant_id, status, id FROM " +
		useIndex(dialect, "instances", "idx_instances_status") +
		" WHERE tenant_id > ? OR (tenant_id = ? AND status > ?) OR (tenant_id = ? AND status = ? AND id > ?)" +
		" ORDER BY tenant_id, status, id LIMIT ?) page GROUP BY tenant_id, status ORDER BY tenant_id, status"
}

// CountInstancesByStatus counts the instances of every tenant by status (the halley_instances gauge). It walks
// idx_instances_status a page at a time — an index entry per instance, seconds of the database at millions in one
// statement — and calls pace, when set, after each page: the composition root paces the pass so that the count
// runs beside the timers falling due instead of taking a core from them for its whole length (docs/benchmarks.md
// "Nanoseconds, and the instance gauge"). The pass is not one snapshot: an instance that changes status while it
// runs may be counted under both statuses or neither, as a gauge of moving data is.
func (s *Store) CountInstancesByStatus(ctx context.Context, pace func(context.Context) error) (map[model.InstanceStatus]int64, error) {
	out := make(map[model.InstanceStatus]int64)
	var tenant, status, id string // the cursor: the last entry counted
	for {
		var rows []struct {
			TenantID string
			Status   string
			N        int64
			Last     string
		}
		err := s.db.WithContext(ctx).Raw(countInstancesSQL(s.dialect), tenant, tenant, status, tenant, status, id, countPage).Scan(&rows).Error
		if err != nil {
			return nil, fmt.Errorf("store: unable to count instances by status: %w", err)
		}
		var n int64
		for _, r := range rows {
			out[model.InstanceStatus(r.Status)] += r.N
			n += r.N
		}
		if n < int64(countPage) {
			return out, nil
		}
		last := rows[len(rows)-1] // the groups come in index order: the last holds the page's last entry
		tenant, status, id = last.TenantID, last.Status, last.Last
		if pace != nil {
			if err := pace(ctx); err != nil {
				return nil, err
			}
		}
	}
}

// OutboxBacklog returns how many outbox rows wait to be dispatched and when the oldest was written (zero when
// none).
func (s *Store) OutboxBacklog(ctx context.Context) (int64, time.Time, error) {
	var r struct {
		N      int64
		Oldest *int64
	}
	// The oldest row is the lowest seq (rows are written in seq order): a primary-key lookup, not a scan.
	if err := s.db.WithContext(ctx).Model(&outboxRow{}).Select("COUNT(*) AS n, MIN(seq) AS oldest").Scan(&r).Error; err != nil {
		return 0, time.Time{}, fmt.Errorf("store: unable to read the outbox backlog: %w", err)
	}
	if r.N == 0 || r.Oldest == nil {
		return 0, time.Time{}, nil
	}
	var first outboxRow
	if err := s.db.WithContext(ctx).Select("created_at").Where("seq = ?", *r.Oldest).Take(&first).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return r.N, time.Time{}, nil // dispatched since the count
		}
		return 0, time.Time{}, fmt.Errorf("store: unable to read the oldest outbox row: %w", err)
	}
	return r.N, first.CreatedAt.UTC(), nil
}
