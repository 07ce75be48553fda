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
	// qsize and nargs are the statements' bytes and arguments in all, hexed the bytes of the values that go as hex
	// literals: exec sizes its buffers once.
	qsize, nargs, hexed int
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
			if len(s) <= maxHexValue {
				b.hexed += 2*len(s) + 3 // at most: spliceHex writes it as a hex literal
			}
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
		sb.Grow(b.qsize + b.hexed + len(blockBegin) + len(beginStmt) + len(";\nEND"))
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
		if b.block {
			args = spliceHex(&sb, q, b.args[i], args)
		} else {
			sb.WriteString(q)
			args = append(args, b.args[i]...)
		}
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

// maxHexValue is the longest string spliceHex writes as hex: a longer one, twice its size as hex, is sent quoted, so
// that a value that fits in MySQL's max_allowed_packet quoted still does.
const maxHexValue = 64 << 10

// spliceHex writes the statement q to sb with its string values written in place of their placeholders as hex
// literals (X'4f4b'), and returns args with the other values appended, for the driver to interpolate. MariaDB
// reads a quoted literal of a compound statement (BEGIN NOT ATOMIC ... END) character by character several times
// over — unescaping it, converting it into the utf8 copy of the block's body it keeps, checking it against the
// connection's character set, naming the item — which was a third of its CPU at 16 clients; a hex literal it reads
// once, two digits a byte. A step group's statement replayed 2,700 times took 10–17 % less of MariaDB's CPU with
// its strings as hex (docs/benchmarks.md, "Strings as hex in a step's round trip").
//
// Only where a hex literal means what the quoted string means: a value that is a whole element of an INSERT's
// VALUES rows — stored into its column, converted to the column's character set and refused, as a quoted string
// is, when it is not utf8mb4 — never inside an expression or a comparison, where a binary string would compare
// bytewise and keep an index from being used; and never a string that reads as a number, which a hex literal
// would not be in a numeric column. Like the driver's interpolation, the placeholders are the ?s outside quotes;
// a statement whose count of them is not its arguments' is left to the driver as it is.
func spliceHex(sb *strings.Builder, q string, qargs []any, args []any) []any {
	marks := valueMarks(q, len(qargs))
	if marks == nil {
		sb.WriteString(q)
		return append(args, qargs...)
	}
	const digits = "0123456789abcdef"
	var buf [512]byte
	last := 0
	for k, a := range qargs {
		s, ok := a.(string)
		if !ok || marks[k] < 0 || len(s) > maxHexValue || numeric(s) {
			args = append(args, a)
			continue
		}
		sb.WriteString(q[last:marks[k]])
		sb.WriteString("X'")
		for len(s) > 0 {
			n := min(len(s), len(buf)/2)
			for j := range n {
				buf[2*j], buf[2*j+1] = digits[s[j]>>4], digits[s[j]&15]
			}
			sb.Write(buf[:2*n])
			s = s[n:]
		}
		sb.WriteByte('\'')
		last = marks[k] + 1
	}
	sb.WriteString(q[last:])
	return args
}

// valueMarks returns, for each of the n placeholders of the INSERT q, its offset when it is a whole element of the
// rows after VALUES ("(?, ?, NULL)") and -1 otherwise (in the column list's expressions, in ON DUPLICATE KEY UPDATE,
// inside a function call); nil when q is no INSERT ... VALUES or has not n placeholders outside quotes.
func valueMarks(q string, n int) []int {
	if n == 0 || !strings.HasPrefix(q, "INSERT ") {
		return nil
	}
	marks := make([]int, 0, n)
	var (
		quote  byte
		values = -1 // the offset after VALUES; -1 before it
		depth  int  // parentheses open after VALUES
		rows   = true
	)
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			switch c {
			case '\\':
				i++
			case quote:
				quote = 0
			}
			continue
		case c == '\'' || c == '"' || c == '`':
			quote = c
			continue
		}
		if values < 0 {
			if c == ' ' && strings.HasPrefix(q[i:], " VALUES ") {
				values = i + len(" VALUES ")
				i = values - 1
			} else if c == '?' {
				marks = append(marks, -1)
			}
			continue
		}
		switch c {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				// The rows go on only with ",(" next.
				j := skipBlanks(q, i+1)
				rows = rows && j < len(q) && q[j] == ',' && skipBlanks(q, j+1) < len(q) && q[skipBlanks(q, j+1)] == '('
				i = j - 1
			}
		case '?':
			if rows && depth == 1 && bare(q, i) {
				marks = append(marks, i)
			} else {
				marks = append(marks, -1)
			}
		}
	}
	if len(marks) != n || values < 0 || quote != 0 {
		return nil
	}
	return marks
}

// bare reports whether the ? at q[i] stands alone between "(" or "," and "," or ")".
func bare(q string, i int) bool {
	b := i - 1
	for b >= 0 && (q[b] == ' ' || q[b] == '\n') {
		b--
	}
	a := skipBlanks(q, i+1)
	return b >= 0 && (q[b] == '(' || q[b] == ',') && a < len(q) && (q[a] == ',' || q[a] == ')')
}

// skipBlanks returns the offset of the first byte of q from i on that is not a space or a newline.
func skipBlanks(q string, i int) int {
	for i < len(q) && (q[i] == ' ' || q[i] == '\n') {
		i++
	}
	return i
}

// numeric reports whether s could be read as a number (digits, sign, point, exponent, blanks): such a string is
// left quoted, as it may be meant for a numeric column.
func numeric(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9', c == '+', c == '-', c == '.', c == 'e', c == 'E', c == ' ', c == '\t':
		default:
			return false
		}
	}
	return true
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
