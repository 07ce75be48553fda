package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/halley-bpm/halley/model"
)

var (
	_ model.TimerStore  = (*Store)(nil)
	_ model.OutboxStore = (*Store)(nil)
)

// GetTimers returns the timers with these ids.
func (s *Store) GetTimers(ctx context.Context, ids []string) ([]*model.Timer, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var rows []timerRow
	if err := s.db.WithContext(ctx).Where("id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to load timers: %w", err)
	}
	out := make([]*model.Timer, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, nil
}

// PendingTimers pages through pending timers by id.
func (s *Store) PendingTimers(ctx context.Context, afterID string, limit int) ([]*model.Timer, error) {
	var rows []timerRow
	if err := s.db.WithContext(ctx).Where("status = ? AND id > ?", model.TimerPending, afterID).Order("id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to list pending timers: %w", err)
	}
	out := make([]*model.Timer, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, nil
}

// SaveTimer writes or replaces a timer row that belongs to no instance.
func (s *Store) SaveTimer(ctx context.Context, t *model.Timer) error {
	p := string(t.Payload)
	if p == "" {
		p = "{}"
	}
	row := timerRow{ID: t.ID, TenantID: t.TenantID, InstanceID: t.InstanceID, NodeID: t.NodeID, NodeInstanceID: t.NodeInstanceID, Kind: t.Kind,
		DueAt: t.DueAt.UTC(), Status: t.Status, Payload: p, CreatedAt: s.now()}
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{UpdateAll: true}).Create(&row).Error; err != nil {
		return fmt.Errorf("store: unable to save timer %s: %w", t.ID, err)
	}
	return nil
}

// MarkTimerFired marks a pending timer fired; false when it was not pending.
func (s *Store) MarkTimerFired(ctx context.Context, id string, at time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Model(&timerRow{}).Where("id = ? AND status = ?", id, model.TimerPending).
		Updates(map[string]any{"status": model.TimerFired, "fired_at": at.UTC()})
	if res.Error != nil {
		return false, fmt.Errorf("store: unable to mark timer %s fired: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// DispatchOutbox hands up to limit outbox rows to fn and deletes them when it succeeds. On MySQL rows held by
// another dispatcher are skipped (FOR UPDATE SKIP LOCKED), so replicas share the outbox without a leader.
func (s *Store) DispatchOutbox(ctx context.Context, limit int, fn func(ctx context.Context, items []model.OutboxItem) error) (int, error) {
	n := 0
	err := s.inTxOpts(ctx, readCommitted, func(tx *gorm.DB) error {
		q := tx.Order("seq").Limit(limit)
		if s.dialect == MySQL {
			q = q.Clauses(clause.Locking{Strength: "UPDATE", Options: "SKIP LOCKED"})
		}
		var rows []outboxRow
		if err := q.Find(&rows).Error; err != nil {
			return fmt.Errorf("store: unable to read outbox: %w", err)
		}
		if len(rows) == 0 {
			n = 0
			return nil
		}
		items := make([]model.OutboxItem, len(rows))
		seqs := make([]int64, len(rows))
		for i, r := range rows {
			items[i] = model.OutboxItem{Seq: r.Seq, TenantID: r.TenantID, Kind: r.Kind, Ref: r.Ref, Payload: json.RawMessage(r.Payload), CreatedAt: r.CreatedAt.UTC()}
			seqs[i] = r.Seq
		}
		if err := fn(withTx(ctx, tx), items); err != nil {
			return err
		}
		if err := tx.Where("seq IN ?", seqs).Delete(&outboxRow{}).Error; err != nil {
			return fmt.Errorf("store: unable to delete dispatched outbox rows: %w", err)
		}
		n = len(rows)
		return nil
	})
	return n, err
}
