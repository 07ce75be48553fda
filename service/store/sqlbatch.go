package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

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
	// inline: write the values into the text (inlineValues) instead of leaving them to the driver (Store.inline).
	inline bool
	stmts  []string
	args   [][]any
	size   int
	// qsize and nargs are the statements' bytes and arguments in all, vsize the most the values take written into
	// the text: exec sizes its buffers once.
	qsize, nargs, vsize int
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
		switch v := a.(type) {
		case string:
			b.size += len(v)
			b.vsize += 2*len(v) + 3
		case json.RawMessage:
			b.vsize += 2*len(v) + 3
		case []byte:
			b.vsize += 2*len(v) + 10
		default:
			b.vsize += 32
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
		sb.Grow(b.qsize + b.vsize + len(blockBegin) + len(beginStmt) + len(";\nEND"))
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
		if !b.inline || !inlineValues(&sb, q, b.args[i]) {
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

// maxHexValue is the longest value inlineValues writes as hex: a longer one, twice its size as hex, goes quoted,
// so that a value that fits in MySQL's max_allowed_packet quoted still does.
const maxHexValue = 64 << 10

// inlineValues writes the statement q with its values in place of its placeholders, as the driver's interpolation
// would — but for the strings that are whole elements of an INSERT's VALUES rows, which go as hex literals
// (X'4f4b') — and reports whether it did; when a value is of a type it does not know, or the placeholders are not
// as many as the values, it writes nothing and the statement is left to the driver.
//
// MariaDB reads a quoted literal of a compound statement (BEGIN NOT ATOMIC ... END) character by character several
// times over — unescaping it, converting it into the utf8 copy of the block's body it keeps, checking it against
// the connection's character set, naming the item — a third of its CPU at 16 clients; a bare hex literal is a
// binary string, converted once into its column's character set when it is stored (docs/benchmarks.md, "Strings
// as hex in a step's round trip"). Halley writes the values itself so that the driver, handed a text with no
// placeholders, passes it on as it is instead of scanning it again.
//
// A hex literal goes only where it means what the quoted string means: a value that is a whole element of the
// rows after VALUES — stored into its column, converted to the column's character set and refused, as a quoted
// string is, when it is not utf8mb4 — never inside an expression, a comparison or ON DUPLICATE KEY UPDATE, where a
// binary string compares bytewise and keeps an index from being used; never a string that reads as a number,
// which a hex literal would not be in a numeric column. Times are written as the driver writes them on Halley's
// connections (UTC, to the microsecond: ParseURL).
func inlineValues(sb *strings.Builder, q string, qargs []any) bool {
	if len(qargs) == 0 {
		sb.WriteString(q)
		return true
	}
	var mstack [64]int
	var vstack [64]any
	marks := scanMarks(q, mstack[:0])
	if len(marks) != len(qargs) {
		return false
	}
	vals := vstack[:0]
	for _, a := range qargs {
		v, ok := sqlValue(a)
		if !ok {
			return false
		}
		vals = append(vals, v)
	}
	var buf [64]byte
	last := 0
	for k, v := range vals {
		at, row := marks[k], false
		if at < 0 {
			at, row = -at-1, true
		}
		sb.WriteString(q[last:at])
		last = at + 1
		switch v := v.(type) {
		case nil:
			sb.WriteString("NULL")
		case int64:
			sb.Write(strconv.AppendInt(buf[:0], v, 10))
		case uint64:
			sb.Write(strconv.AppendUint(buf[:0], v, 10))
		case float64:
			sb.Write(strconv.AppendFloat(buf[:0], v, 'g', -1, 64))
		case bool:
			if v {
				sb.WriteByte('1')
			} else {
				sb.WriteByte('0')
			}
		case time.Time:
			if v.IsZero() {
				sb.WriteString("'0000-00-00'")
				break
			}
			sb.WriteByte('\'')
			sb.Write(v.UTC().Truncate(time.Microsecond).AppendFormat(buf[:0], "2006-01-02 15:04:05.999999"))
			sb.WriteByte('\'')
		case json.RawMessage:
			if v == nil {
				sb.WriteString("NULL")
			} else {
				writeString(sb, string(v), row)
			}
		case []byte:
			switch {
			case v == nil:
				sb.WriteString("NULL")
			case row && len(v) <= maxHexValue:
				writeHex(sb, string(v))
			default:
				sb.WriteString("_binary")
				writeQuoted(sb, string(v))
			}
		case string:
			writeString(sb, v, row)
		}
	}
	sb.WriteString(q[last:])
	return true
}

// sqlValue turns a value into one of the types inlineValues writes, as database/sql and the driver would (a
// pointer is what it points to, a named type its kind); false for a value it cannot (a driver.Valuer other than
// database/sql's Null types, a time outside the years 1 to 9999, which the driver refuses).
func sqlValue(a any) (any, bool) {
	switch v := a.(type) {
	case nil, string, int64, uint64, float64, bool, []byte, json.RawMessage:
		return v, true
	case int:
		return int64(v), true
	case time.Time:
		return v, v.IsZero() || v.UTC().Year() >= 1 && v.UTC().Year() <= 9999
	case *time.Time:
		if v == nil {
			return nil, true
		}
		return sqlValue(*v)
	case sql.NullString:
		if !v.Valid {
			return nil, true
		}
		return v.String, true
	case sql.NullTime:
		if !v.Valid {
			return nil, true
		}
		return sqlValue(v.Time)
	case sql.NullInt64:
		if !v.Valid {
			return nil, true
		}
		return v.Int64, true
	case sql.NullBool:
		if !v.Valid {
			return nil, true
		}
		return v.Bool, true
	case driver.Valuer:
		return nil, false
	}
	rv := reflect.ValueOf(a)
	switch rv.Kind() {
	case reflect.Pointer:
		if rv.IsNil() {
			return nil, true
		}
		return sqlValue(rv.Elem().Interface())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return rv.Uint(), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	case reflect.Bool:
		return rv.Bool(), true
	case reflect.String:
		return rv.String(), true
	case reflect.Slice:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return rv.Bytes(), true
		}
	}
	return nil, false
}

// writeString writes s as a hex literal when row allows it (a whole element of VALUES rows) and s neither reads as
// a number nor is longer than maxHexValue, quoted otherwise.
func writeString(sb *strings.Builder, s string, row bool) {
	if row && len(s) <= maxHexValue && !numeric(s) {
		writeHex(sb, s)
	} else {
		writeQuoted(sb, s)
	}
}

// writeHex writes s as X'...'.
func writeHex(sb *strings.Builder, s string) {
	const digits = "0123456789abcdef"
	var buf [512]byte
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
}

// writeQuoted writes s quoted with backslash escapes, as the driver does on a connection without
// NO_BACKSLASH_ESCAPES (Store.inline is off with it).
func writeQuoted(sb *strings.Builder, s string) {
	sb.WriteByte('\'')
	last := 0
	for i := 0; i < len(s); i++ {
		var esc byte
		switch s[i] {
		case 0:
			esc = '0'
		case '\n':
			esc = 'n'
		case '\r':
			esc = 'r'
		case '\x1a':
			esc = 'Z'
		case '\'', '"', '\\':
			esc = s[i]
		default:
			continue
		}
		sb.WriteString(s[last:i])
		sb.WriteByte('\\')
		sb.WriteByte(esc)
		last = i + 1
	}
	sb.WriteString(s[last:])
	sb.WriteByte('\'')
}

// scanMarks appends to marks the offset of each placeholder of q — a ? outside quotes — as -(offset+1) when it is a
// whole element of the rows after an INSERT's VALUES ("(?, ?, NULL)"), as the offset otherwise (in the column
// list's expressions, in ON DUPLICATE KEY UPDATE, inside a function call, in any other statement).
func scanMarks(q string, marks []int) []int {
	insert := strings.HasPrefix(q, "INSERT ")
	var (
		quote  byte
		values bool // after VALUES
		depth  int  // parentheses open after VALUES
		rows   = true
	)
	for i := 0; i < len(q); i++ {
		c := q[i]
		if quote != 0 {
			switch c {
			case '\\':
				i++
			case quote:
				quote = 0
			}
			continue
		}
		switch c {
		case '\'', '"', '`':
			quote = c
		case ' ':
			if insert && !values && strings.HasPrefix(q[i:], " VALUES ") {
				values = true
				i += len(" VALUES ") - 1
			}
		case '(':
			if values {
				depth++
			}
		case ')':
			if values {
				depth--
				if depth == 0 {
					// The rows go on only with ",(" next.
					j := skipBlanks(q, i+1)
					rows = rows && j < len(q) && q[j] == ',' && skipBlanks(q, j+1) < len(q) && q[skipBlanks(q, j+1)] == '('
				}
			}
		case '?':
			if values && rows && depth == 1 && bare(q, i) {
				marks = append(marks, -i-1)
			} else {
				marks = append(marks, i)
			}
		}
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
// written quoted, as it may be meant for a numeric column.
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
