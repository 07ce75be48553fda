package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/halley-bpm/halley/model"
)

// purgeBatch is how many rows one purge statement deletes: each statement is its own short transaction, so a
// purge of a year's backlog never holds many row locks or a long undo log while the engine works.
const purgeBatch = 1000

// A purge deletes the rows of table whose indexed time column is before a cutoff, with an optional extra filter
// on the same rows. Every purge's condition is an index range (MaintenanceQueries lists them for the EXPLAIN test).
type purge struct {
	name   string
	table  string
	column string // indexed DATETIME column compared with the cutoff
	filter string // extra condition, or ""
	args   []any  // arguments of filter

	// timeID: column is the primary key, ids that model.TimeIDs stamps with the row's created_at, and the cutoff is
	// model.TimeIDFloor of the time. created_at < the time is checked too, so that a row is never purged early
	// whatever its id (created_at has no index of its own: the key range is what the scan reads).
	timeID bool
}

var (
	purgeMessagesExpired  = purge{name: "purge messages (expired)", table: "messages", column: "expires_at"}
	purgeMessagesConsumed = purge{name: "purge messages (consumed)", table: "messages", column: "consumed_at"}
	purgeBookmarks        = purge{name: "purge closed bookmarks", table: "bookmarks", column: "closed_at"}
	purgeTimers           = purge{name: "purge fired timers", table: "timers", column: "created_at", filter: "status <> ?", args: []any{model.TimerPending}}
	purgeDeliveries       = purge{name: "purge finished deliveries", table: "subscription_deliveries", column: "created_at",
		filter: "status <> ?", args: []any{model.DeliveryPending}}
	purgeIdempotencyKeys    = purge{name: "purge idempotency keys", table: "idempotency_keys", column: "created_at"}
	purgeIdempotencyCommits = purge{name: "purge idempotency commits", table: "idempotency_commits", column: "created_at"}
	purgeRunLogs            = purge{name: "purge plugin run logs", table: "plugin_run_logs", column: "created_at"}
	purgeMessageIDs         = purge{name: "purge message ids", table: "message_receipts", column: "created_at"}
	purgeAudit              = purge{name: "purge audit log", table: "audit_log", column: "at"}
	purgeNotifications      = purge{name: "purge notifications", table: "notifications", column: "id", timeID: true}
	purgeNotifyDeliveries   = purge{name: "purge finished notification deliveries", table: "notification_deliveries", column: "id",
		timeID: true, filter: "status <> ?", args: []any{model.DeliveryPending}}
)

// purges are every purge, for MaintenanceQueries (and so for the EXPLAIN test): a new purge goes here too.
var purges = []purge{purgeMessagesExpired, purgeMessagesConsumed, purgeBookmarks, purgeTimers, purgeDeliveries,
	purgeIdempotencyKeys, purgeIdempotencyCommits, purgeRunLogs, purgeMessageIDs, purgeAudit, purgeNotifications, purgeNotifyDeliveries}

// sql returns the statement that deletes one batch of at most limit rows, and its arguments for the cutoff. The
// batch is the oldest rows (ORDER BY the indexed column: the range scan reads them in that order anyway).
func (p purge) sql(dialect string, before time.Time, limit int) (string, []any) {
	where := p.column + " < ?"
	args := []any{before.UTC()}
	if p.timeID {
		where += " AND created_at < ?"
		args = []any{model.TimeIDFloor(before), before.UTC()}
	}
	if p.filter != "" {
		where += " AND " + p.filter
	}
	args = append(args, p.args...)
	if dialect == MySQL {
		return fmt.Sprintf("DELETE FROM %s WHERE %s ORDER BY %s LIMIT %d", p.table, where, p.column, limit), args
	}
	// SQLite is built without DELETE ... LIMIT: delete the batch's rowids, found through the same index range.
	return fmt.Sprintf("DELETE FROM %s WHERE rowid IN (SELECT rowid FROM %s WHERE %s ORDER BY %s LIMIT %d)", p.table, p.table, where, p.column, limit), args
}

// run deletes the purge's rows before the cutoff, batch by batch, until a batch deletes fewer than purgeBatch.
func (s *Store) runPurge(ctx context.Context, p purge, before time.Time) (int64, error) {
	q, args := p.sql(s.dialect, before, purgeBatch)
	var total int64
	for {
		n, err := s.purgeBatch(ctx, q, args)
		if err != nil {
			return total, fmt.Errorf("store: %s: %w", p.name, err)
		}
		total += n
		if n < purgeBatch {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// purgeBatch runs one batch's DELETE in a transaction of its own, READ COMMITTED on MySQL: it locks the rows it
// deletes and no gaps, so inserts of new rows beside the purged range never wait for it.
func (s *Store) purgeBatch(ctx context.Context, q string, args []any) (int64, error) {
	var opts *sql.TxOptions
	if s.dialect == MySQL {
		opts = readCommitted
	}
	tx, err := s.sqlDB.BeginTx(ctx, opts)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

func (s *Store) runPurges(ctx context.Context, before time.Time, ps ...purge) (int64, error) {
	var total int64
	for _, p := range ps {
		n, err := s.runPurge(ctx, p, before)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// PurgeMessages deletes queued messages that expired, or were consumed, before t.
func (s *Store) PurgeMessages(ctx context.Context, before time.Time) (int64, error) {
	return s.runPurges(ctx, before, purgeMessagesExpired, purgeMessagesConsumed)
}

// PurgeFinished deletes bookmarks closed, and timers fired or cancelled, before t (their instances' history keeps
// what happened).
func (s *Store) PurgeFinished(ctx context.Context, before time.Time) (int64, error) {
	return s.runPurges(ctx, before, purgeBookmarks, purgeTimers)
}

// PurgeDeliveries deletes finished webhook deliveries created before t.
func (s *Store) PurgeDeliveries(ctx context.Context, before time.Time) (int64, error) {
	return s.runPurges(ctx, before, purgeDeliveries)
}

// PurgeIdempotent deletes idempotency records and commit records created before t and returns how many records
// it deleted.
func (s *Store) PurgeIdempotent(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.runPurge(ctx, purgeIdempotencyKeys, before)
	if err != nil {
		return n, err
	}
	_, err = s.runPurge(ctx, purgeIdempotencyCommits, before)
	return n, err
}

// PurgeNotifications deletes notifications, and finished notification deliveries, created before t.
func (s *Store) PurgeNotifications(ctx context.Context, before time.Time) (int64, error) {
	return s.runPurges(ctx, before, purgeNotifications, purgeNotifyDeliveries)
}

// PurgeMessageIDs deletes the message ids (POST /messages' message_id) recorded before t.
func (s *Store) PurgeMessageIDs(ctx context.Context, before time.Time) (int64, error) {
	return s.runPurge(ctx, purgeMessageIDs, before)
}

// PurgeAudit deletes up to batch audit entries older than before, the oldest first, and says how many it did
// (audit.Recorder.Purge calls it until a batch comes back short).
func (s *Store) PurgeAudit(ctx context.Context, before time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = purgeBatch
	}
	q, args := purgeAudit.sql(s.dialect, before, batch)
	n, err := s.purgeBatch(ctx, q, args)
	if err != nil {
		return n, fmt.Errorf("store: %s: %w", purgeAudit.name, err)
	}
	return n, nil
}

// PurgeRunLogs deletes plugin run logs stored before t (HALLEY_RETENTION_DAYS).
func (s *Store) PurgeRunLogs(ctx context.Context, before time.Time) (int64, error) {
	return s.runPurge(ctx, purgeRunLogs, before)
}

// MaintenanceQuery is one statement a purge or the retention sweep runs, with example arguments.
type MaintenanceQuery struct {
	Name string
	SQL  string
	Args []any
}

// MaintenanceQueries returns the statements of every purge and of the retention sweep as this store runs them,
// with before as their cutoff, so that a test can EXPLAIN each on MySQL and prove it an index range scan, not a
// full scan (docs/operations.md).
func (s *Store) MaintenanceQueries(before time.Time) []MaintenanceQuery {
	now := before.UTC()
	var out []MaintenanceQuery
	for _, p := range purges {
		q, args := p.sql(s.dialect, now, purgeBatch)
		out = append(out, MaintenanceQuery{Name: p.name, SQL: q, Args: args})
	}
	return append(out, s.sweepQueries(now)...)
}
