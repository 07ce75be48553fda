package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

// The engine's step transactions on MySQL save two round trips: BEGIN travels with the transaction's first
// statement and COMMIT with its last batch of writes, as statements of one multi-statement round trip. A step is
// then two round trips in all (lock and read; write and commit) instead of four.

// hotConn is one pooled connection running a transaction whose BEGIN is sent with the first statement. It serves
// as gorm's connection pool too, so that gorm statements inside the transaction (rare paths) run on it, after
// the BEGIN.
type hotConn struct {
	c         *sql.Conn
	began     bool // START TRANSACTION was sent (whatever came of it)
	committed bool // COMMIT ran as the last statement of a batch
}

const beginStmt = "START TRANSACTION;\n"

func (h *hotConn) prefix(query string) string {
	if h.began {
		return query
	}
	h.began = true
	return beginStmt + query
}

func (h *hotConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return h.c.ExecContext(ctx, h.prefix(query), args...)
}

// QueryContext answers the rows of query: the driver skips the leading result of START TRANSACTION, which has no
// rows.
func (h *hotConn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return h.c.QueryContext(ctx, h.prefix(query), args...)
}

func (h *hotConn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return h.c.QueryRowContext(ctx, h.prefix(query), args...)
}

func (h *hotConn) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	if !h.began {
		if _, err := h.ExecContext(ctx, "DO 0"); err != nil {
			return nil, err
		}
	}
	return h.c.PrepareContext(ctx, query)
}

// hotTx runs fn in a transaction, retried like inTx. On MySQL it runs on a hotConn (see above); fn reaches it
// through rawTx(tx). Elsewhere it is inTx.
func (s *Store) hotTx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	if tx := txFrom(ctx); tx != nil {
		// A handler of the outbox dispatch (a child's end resuming its parent): the step is part of the
		// dispatch's transaction, so the outbox row is deleted exactly when the step commits.
		return fn(tx)
	}
	if s.dialect != MySQL {
		return s.inTx(ctx, fn)
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		err = s.hotTxOnce(ctx, fn)
		if !isRetryable(err) {
			return err
		}
		s.log.Warn("store: retrying transaction", "attempt", attempt+1, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		}
	}
	return err
}

func (s *Store) hotTxOnce(ctx context.Context, fn func(tx *gorm.DB) error) (err error) {
	if s.stepSlots != nil && !model.IsTimerFiring(ctx) {
		// A step waits here, not in the pool, when the steps hold their share of it: the rest is the timers'.
		select {
		case s.stepSlots <- struct{}{}:
			defer func() { <-s.stepSlots }()
		case <-ctx.Done():
			return fmt.Errorf("store: no database connection: %w", ctx.Err())
		}
	}
	c, release, err := s.stepConn(ctx)
	if err != nil {
		return fmt.Errorf("store: no database connection: %w", err)
	}
	if release != nil {
		defer release() // after the connection is back in its pool (deferred functions run last in, first out)
	}
	h := &hotConn{c: c}
	defer func() {
		if p := recover(); p != nil {
			h.abort()
			panic(p)
		}
		if err != nil {
			h.abort()
			return
		}
		_ = c.Close() // returns the connection to the pool; it fails only on one already closed
	}()
	tx := s.db.Session(&gorm.Session{NewDB: true, Context: ctx, SkipDefaultTransaction: true})
	tx.Statement.ConnPool = h
	if err := fn(tx); err != nil {
		return err
	}
	if h.began && !h.committed {
		if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
			return fmt.Errorf("store: unable to commit: %w", err)
		}
	}
	return nil
}

// abort rolls back what the connection has begun and returns it to the pool, or, when even the rollback fails,
// has the pool discard it: a connection must never go back with a transaction open.
func (h *hotConn) abort() {
	defer h.c.Close() //nolint:errcheck // returns the connection to the pool (or has it discarded); fails only on one already closed
	if !h.began || h.committed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := h.c.ExecContext(ctx, "ROLLBACK"); err != nil {
		_ = h.c.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// stepConn answers a connection for a step: one that keeps step groups prepared when one is free (stmtcache.go),
// with the function that frees it again, else one of the main pool (release nil) — also when the free one could not
// be opened: a step does not fail for want of a connection the pool can give.
func (s *Store) stepConn(ctx context.Context) (c *sql.Conn, release func(), err error) {
	if s.prepared != nil {
		c, release, err := s.prepared.conn(ctx)
		if c != nil {
			return c, release, nil
		}
		if err != nil {
			s.log.Warn("store: unable to open a connection that keeps step groups prepared; steps use the pool for a while", "err", err, "for", preparedRest)
		}
	}
	c, err = s.sqlDB.Conn(ctx)
	return c, nil, err
}
