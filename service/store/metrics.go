package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

// CountInstancesByStatus counts the instances of every tenant by status (the halley_instances gauge; an index
// scan of idx_instances_status, run by one replica at a time).
func (s *Store) CountInstancesByStatus(ctx context.Context) (map[model.InstanceStatus]int64, error) {
	var rows []struct {
		Status string
		N      int64
	}
	if err := s.db.WithContext(ctx).Model(&instanceRow{}).Select("status, COUNT(*) AS n").Group("status").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to count instances by status: %w", err)
	}
	out := make(map[model.InstanceStatus]int64, len(rows))
	for _, r := range rows {
		out[model.InstanceStatus(r.Status)] = r.N
	}
	return out, nil
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
