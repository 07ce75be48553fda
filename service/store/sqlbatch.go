package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

// The hot path of the engine (lock an instance, write back a step) runs on database/sql with prebuilt SQL instead
// of gorm's statement builder, and sends a step's writes to MySQL as one multi-statement round trip. gorm was
// ~45 % of Halley's CPU per step and every statement a round trip of its own (docs/benchmarks.md).

// conn is what a transaction or a pool offers for raw SQL.
type conn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// rawTx returns the database/sql transaction under a gorm transaction handle.
func rawTx(tx *gorm.DB) (conn, error) {
	c, ok := tx.Statement.ConnPool.(conn)
	if !ok {
		return nil, fmt.Errorf("store: transaction handle %T offers no raw SQL", tx.Statement.ConnPool)
	}
	return c, nil
}

// maxBatchBytes bounds the SQL text of one round trip, well under MySQL's max_allowed_packet (16 MiB by default
// on MariaDB, 64 MiB on MySQL 8).
const maxBatchBytes = 1 << 20

// blockBegin opens a MariaDB compound statement. MariaDB answers each statement of a multi-statement round trip
// with a packet of its own, a send and a wake-up on both sides a statement; the statements of a compound statement
// (BEGIN NOT ATOMIC ... END) run as they would one by one — the first error stops them, with its own error number —
// and are answered once. A step group's round trip of nine statements cost the client 336 us of CPU as a
// multi-statement and 142 as one block, MariaDB the same both ways (557 and 551 us; docs/benchmarks.md, "One
// answer a round trip").
const blockBegin = "BEGIN NOT ATOMIC\n"

// batch collects write statements whose results are not inspected, to send them together.
type batch struct {
	dialect string
	// block: send each round trip as one MariaDB compound statement (Store.blocks).
	block bool
	stmts []string
	args  [][]any
	size  int
	// qsize and nargs are the statements' bytes and arguments in all: exec sizes its buffers once.
	qsize, nargs int
	// commit, when set, is the transaction's connection: the batch is the transaction's last work and ends with
	// its COMMIT (in the same round trip as the last writes).
	commit *hotConn
	// claims are the new instances whose correlation ids the batch claims (claimCorrelations).
	claims []*model.Work
}

func (b *batch) add(query string, args ...any) {
	b.stmts = append(b.stmts, query)
	b.args = append(b.args, args)
	b.size += len(query)
	b.qsize += len(query) + 2
	b.nargs += len(args)
	for _, a := range args {
		if s, ok := a.(string); ok {
			b.size += len(s)
		}
	}
}

// maxBindVars bounds the values of one statement: SQLite refuses more than 32766 ("too many SQL variables");
// MySQL's driver interpolates them, but the same bound keeps one statement well under maxBatchBytes' spirit.
const maxBindVars = 30000

// addRows adds "head VALUES (...),(...) tail" for the rows in args (width values each), as several statements
// when the rows bind more than maxBindVars values: a step that creates thousands of tasks (an "all" sign over a
// large role) is written, not refused by SQLite.
func (b *batch) addRows(head string, width int, tail string, args []any) {
	per := max(maxBindVars/width, 1)
	for n := len(args) / width; n > 0; {
		k := min(n, per)
		b.add(head+" VALUES "+rowsOf(k, width)+tail, args[:k*width]...)
		args, n = args[k*width:], n-k
	}
}

// exec sends the statements in order: on MySQL joined into as few multi-statement round trips as the size bound
// allows (the driver interpolates the arguments, escaped, client-side); on SQLite one by one (no network).
// The first failing statement stops the rest; the caller's transaction is then rolled back.
func (b *batch) exec(ctx context.Context, c conn) error {
	if b.dialect != MySQL {
		for i, q := range b.stmts {
			if _, err := c.ExecContext(ctx, q, b.args[i]...); err != nil {
				return err
			}
		}
		return nil
	}
	var (
		sb    strings.Builder
		args  []any
		n     int
		stmts int // in sb
	)
	flush := func() error {
		if stmts == 0 {
			return nil
		}
		if b.block {
			sb.WriteString(";\nEND")
		}
		_, err := c.ExecContext(ctx, sb.String(), args...)
		sb.Reset()
		args, n, stmts = args[:0], 0, 0
		return err
	}
	if b.commit != nil {
		b.add("COMMIT")
	}
	if b.size <= maxBatchBytes {
		// One round trip (the common case): the text and the arguments in buffers of their final size. Grown by
		// appending, they were a tenth of the bytes Halley allocates a step.
		sb.Grow(b.qsize + len(blockBegin) + len(beginStmt) + len(";\nEND"))
		args = make([]any, 0, b.nargs)
	}
	for i, q := range b.stmts {
		sz := len(q)
		for _, a := range b.args[i] {
			if s, ok := a.(string); ok {
				sz += len(s)
			}
		}
		if n > 0 && n+sz > maxBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		switch {
		case stmts > 0:
			sb.WriteString(";\n")
		case b.block:
			sb.WriteString(blockBegin)
			if h, ok := c.(*hotConn); ok && !h.began {
				sb.WriteString(beginStmt) // inside the block: one answer for the transaction's start, writes and commit
				h.began = true
			}
		}
		sb.WriteString(q)
		args = append(args, b.args[i]...)
		n += sz
		stmts++
	}
	if err := flush(); err != nil {
		return err
	}
	if b.commit != nil {
		b.commit.committed = true
	}
	return nil
}

// placeholders returns "?,?,?" for n values.
func placeholders(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?,", n-1) + "?"
}

// rowsOf returns "(?,?),(?,?)" for n rows of width values.
func rowsOf(n, width int) string {
	one := "(" + placeholders(width) + ")"
	return strings.Repeat(one+",", n-1) + one
}

// useIndex names the index a statement on table must read it by: "table FORCE INDEX (index)" on MySQL, "table
// INDEXED BY index" on SQLite. For the statements of a step, which name a few hundred keys of one index: with
// statistics taken while a table was small (a table that grew by thousands of rows a second), MariaDB judged a
// full scan cheaper than 256 lookups and read the whole bookmarks and tasks tables for a group of steps.
// SQLite names no PRIMARY index: there the table alone is returned for it.
func useIndex(dialect, table, index string) string {
	switch {
	case dialect == MySQL:
		return table + " FORCE INDEX (" + index + ")"
	case index == "PRIMARY":
		return table
	default:
		return table + " INDEXED BY " + index
	}
}

// upsertSuffix makes an INSERT replace the row with the same primary key (id), setting cols from the new row.
func upsertSuffix(dialect string, cols ...string) string {
	var sb strings.Builder
	if dialect == MySQL {
		sb.WriteString(" ON DUPLICATE KEY UPDATE ")
		for i, c := range cols {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(c + " = VALUES(" + c + ")")
		}
		return sb.String()
	}
	sb.WriteString(" ON CONFLICT(id) DO UPDATE SET ")
	for i, c := range cols {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(c + " = excluded." + c)
	}
	return sb.String()
}

// ignoreDuplicates makes an INSERT leave out the rows whose unique key exists (and only those: unlike INSERT
// IGNORE, every other error still fails it).
func ignoreDuplicates(dialect string) string {
	if dialect == MySQL {
		return " ON DUPLICATE KEY UPDATE id = id"
	}
	return " ON CONFLICT DO NOTHING"
}

func strArgs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
