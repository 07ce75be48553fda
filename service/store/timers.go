package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
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
	return timerModels(rows), nil
}

// pendingTimersSQL pages through the pending timers by id: a range of idx_timers_pending (status, id), which holds
// the pending rows alone in page order (not the fired and cancelled ones kept for the retention period). The index
// is named: MariaDB's estimate often prefers a ref of the status alone, which starts every page at the first
// pending timer (a pass over a million read 250 million index entries).
func pendingTimersSQL(dialect string) string {
	return "SELECT * FROM " + useIndex(dialect, "timers", "idx_timers_pending") + " WHERE status = ? AND id > ? ORDER BY status, id LIMIT ?"
}

// pendingTimersCreatedSQL pages through the pending timers created in [from, to), by (created_at, id) after a
// cursor: a range of idx_timers_created (created_at; InnoDB appends the primary key), whose rows are those armed in
// the window, pending or not; the status is checked on the row.
func pendingTimersCreatedSQL(dialect string) string {
	return "SELECT * FROM " + useIndex(dialect, "timers", "idx_timers_created") +
		" WHERE created_at >= ? AND created_at < ? AND (created_at > ? OR (created_at = ? AND id > ?)) AND status = ? ORDER BY created_at, id LIMIT ?"
}

// PendingTimers pages through pending timers by id.
func (s *Store) PendingTimers(ctx context.Context, afterID string, limit int) ([]*model.Timer, error) {
	var rows []timerRow
	if err := s.db.WithContext(ctx).Raw(pendingTimersSQL(s.dialect), model.TimerPending, afterID, limit).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to list pending timers: %w", err)
	}
	return timerModels(rows), nil
}

// PendingTimersCreated pages through the pending timers created (armed, or re-armed) in [from, to), in the order of
// (created_at, id), after the row (afterCreated, afterID) — the last of the previous page; a zero time and ""
// start at from. It reads the timers armed in the window, not every pending timer: the periodic re-arm checks
// what was armed lately with it (scheduler.RearmCreated).
func (s *Store) PendingTimersCreated(ctx context.Context, from, to, afterCreated time.Time, afterID string, limit int) ([]*model.Timer, error) {
	if afterCreated.Before(from) {
		afterCreated, afterID = from, ""
	}
	var rows []timerRow
	at := afterCreated.UTC()
	if err := s.db.WithContext(ctx).Raw(pendingTimersCreatedSQL(s.dialect), from.UTC(), to.UTC(), at, at, afterID, model.TimerPending, limit).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to list pending timers: %w", err)
	}
	return timerModels(rows), nil
}

func timerModels(rows []timerRow) []*model.Timer {
	out := make([]*model.Timer, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out
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
		if err := s.deleteOutbox(tx, seqs); err != nil {
			return fmt.Errorf("store: unable to delete dispatched outbox rows: %w", err)
		}
		n = len(rows)
		return nil
	})
	return n, err
}

// deleteOutbox deletes the claimed rows by their keys. On MySQL a plain DELETE … WHERE seq IN (…) is planned as a
// scan of the whole table when the list is a large part of it — the usual case, the outbox being drained — and a
// scan in a locking statement waits on every row another dispatcher claimed, so two replicas' deletes deadlock
// (each holds rows the other's scan reaches). Joining the keys first, in that order, makes every row an eq_ref
// lookup of the primary key: the delete touches only its own rows.
func (s *Store) deleteOutbox(tx *gorm.DB, seqs []int64) error {
	if s.dialect != MySQL {
		return tx.Where("seq IN ?", seqs).Delete(&outboxRow{}).Error
	}
	keys := make([]byte, 0, 2+8*len(seqs))
	keys = append(keys, '[')
	for i, seq := range seqs {
		if i > 0 {
			keys = append(keys, ',')
		}
		keys = strconv.AppendInt(keys, seq, 10)
	}
	keys = append(keys, ']')
	return tx.Exec("DELETE o FROM JSON_TABLE(?, '$[*]' COLUMNS (seq BIGINT PATH '$')) AS k STRAIGHT_JOIN outbox AS o ON o.seq = k.seq",
		string(keys)).Error
}
