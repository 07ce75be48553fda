package store

import (
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

// TestSpliceHex: the string values that are whole elements of an INSERT's VALUES rows go as hex literals in place
// of their own placeholders, whatever they hold; every other value — in an expression, a comparison, ON DUPLICATE
// KEY UPDATE, a string that reads as a number, a value not a string — and every other statement is left to the
// driver. A ? inside quotes is no placeholder.
func TestSpliceHex(t *testing.T) {
	hostile := `O'Brien"; -- ? \' \\ 李 (?, ?)`
	x := func(s string) string { return "X'" + hex.EncodeToString([]byte(s)) + "'" }
	for _, c := range []struct {
		name, q  string
		args     []any
		wantQ    string
		wantArgs []any
	}{
		{"strings hexed, other values left", "INSERT INTO t (a, b, c, d, e) VALUES (?, ?, ?, ?, ?)", []any{"id", hostile, 7, nil, ""},
			"INSERT INTO t (a, b, c, d, e) VALUES (" + x("id") + ", " + x(hostile) + ", ?, ?, X'')", []any{7, nil}},
		{"several rows", "INSERT INTO t (a, b) VALUES (?,?),(?,?)", []any{"1x", "b", "2x", hostile},
			"INSERT INTO t (a, b) VALUES (" + x("1x") + "," + x("b") + "),(" + x("2x") + "," + x(hostile) + ")", nil},
		{"numbers stay quoted", "INSERT INTO t (a, b, c) VALUES (?, ?, ?)", []any{"42", "-1.5e3", "4 2x"},
			"INSERT INTO t (a, b, c) VALUES (?, ?, " + x("4 2x") + ")", []any{"42", "-1.5e3"}},
		{"expressions and the update clause stay quoted",
			"INSERT INTO t (a, b, c) VALUES (?, COALESCE(?, 'x'), ? ) ON DUPLICATE KEY UPDATE b = IF(a = ?, VALUES(b), b), c = ?",
			[]any{"a", "b", "c", "d", "e"},
			"INSERT INTO t (a, b, c) VALUES (" + x("a") + ", COALESCE(?, 'x'), " + x("c") + " ) ON DUPLICATE KEY UPDATE b = IF(a = ?, VALUES(b), b), c = ?",
			[]any{"b", "d", "e"}},
		{"a quoted ? is no placeholder", "INSERT INTO t (a, b) VALUES ('?', ?), ('\\'?', ?)", []any{"s", "t"},
			"INSERT INTO t (a, b) VALUES ('?', " + x("s") + "), ('\\'?', " + x("t") + ")", nil},
		{"too long to double", "INSERT INTO t (a, b) VALUES (?, ?)", []any{strings.Repeat("x", maxHexValue+1), strings.Repeat("y", maxHexValue)},
			"INSERT INTO t (a, b) VALUES (?, " + x(strings.Repeat("y", maxHexValue)) + ")", []any{strings.Repeat("x", maxHexValue+1)}},
		{"arithmetic", "INSERT INTO t (a, b) VALUES (? + 1, ?)", []any{"s", "t"}, "INSERT INTO t (a, b) VALUES (? + 1, " + x("t") + ")", []any{"s"}},
		{"INSERT ... SELECT", "INSERT INTO t (a) SELECT ? FROM DUAL WHERE b = ?", []any{"s", "t"}, "INSERT INTO t (a) SELECT ? FROM DUAL WHERE b = ?", []any{"s", "t"}},
		{"not an INSERT", "UPDATE t SET a = ? WHERE b = ?", []any{"s", "t"}, "UPDATE t SET a = ? WHERE b = ?", []any{"s", "t"}},
		{"placeholders not as counted", "INSERT INTO t (a) VALUES (?)", []any{"s", "extra"}, "INSERT INTO t (a) VALUES (?)", []any{"s", "extra"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sb strings.Builder
			args := spliceHex(&sb, c.q, c.args, []any{"before"})
			if sb.String() != c.wantQ {
				t.Errorf("query\n got %s\nwant %s", sb.String(), c.wantQ)
			}
			if want := append([]any{"before"}, c.wantArgs...); !reflect.DeepEqual(args, want) {
				t.Errorf("args = %v, want %v", args, want)
			}
		})
	}
}
