package condition

import (
	"math"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// kind is the JSON type of a value, or kindMissing for a field that is not there.
type kind uint8

const (
	kindMissing kind = iota
	kindNull
	kindNumber
	kindString
	kindObject
	kindArray
	kindBool
)

// rank is the position of the kind in MongoDB's BSON comparison order; values of different ranks never
// compare equal, and inequalities only hold between values of the same rank (type bracketing).
func (k kind) rank() int {
	switch k {
	case kindNull:
		return 5
	case kindNumber:
		return 10
	case kindString:
		return 15
	case kindObject:
		return 20
	case kindArray:
		return 25
	case kindBool:
		return 40
	default:
		return 0
	}
}

// kindOf returns the kind of a value read from a document.
func kindOf(r gjson.Result) kind {
	switch r.Type {
	case gjson.Null:
		if len(r.Raw) == 0 {
			return kindMissing
		}
		return kindNull
	case gjson.False, gjson.True:
		return kindBool
	case gjson.Number:
		return kindNumber
	case gjson.String:
		return kindString
	case gjson.JSON:
		if len(r.Raw) > 0 && r.Raw[0] == '{' {
			return kindObject
		}
		if len(r.Raw) > 0 && r.Raw[0] == '[' {
			return kindArray
		}
	}
	return kindMissing
}

// num is a JSON number: integers that fit in int64 are kept exact, everything else is a float64.
type num struct {
	isInt bool
	i     int64
	f     float64
}

// numOf reads the number in r (which must be of kind number).
func numOf(r gjson.Result) num {
	if isIntLiteral(r.Raw) {
		if i, err := strconv.ParseInt(r.Raw, 10, 64); err == nil {
			return num{isInt: true, i: i}
		}
	}
	return num{f: r.Num}
}

func isIntLiteral(s string) bool {
	if s == "" || s == "-" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && !(c == '-' && i == 0) {
			return false
		}
	}
	return true
}

// whole returns n as an int64 when it is integral and in range.
func (n num) whole() (int64, bool) {
	if n.isInt {
		return n.i, true
	}
	if n.f != math.Trunc(n.f) || n.f < -(1<<63) || n.f >= 1<<63 {
		return 0, false
	}
	return int64(n.f), true
}

// compareNum orders numbers exactly across int64 and float64, with NaN below every number as in MongoDB.
func compareNum(a, b num) int {
	switch {
	case a.isInt && b.isInt:
		return cmp3(a.i, b.i)
	case a.isInt:
		return compareIntFloat(a.i, b.f)
	case b.isInt:
		return -compareIntFloat(b.i, a.f)
	}
	an, bn := math.IsNaN(a.f), math.IsNaN(b.f)
	switch {
	case an && bn:
		return 0
	case an:
		return -1
	case bn:
		return 1
	}
	return cmp3(a.f, b.f)
}

func compareIntFloat(i int64, f float64) int {
	switch {
	case math.IsNaN(f):
		return 1
	case f >= 1<<63:
		return -1
	case f < -(1 << 63):
		return 1
	}
	t := int64(f) // truncates toward zero; in range after the checks above
	if c := cmp3(i, t); c != 0 {
		return c
	}
	frac := f - float64(t)
	switch {
	case frac > 0:
		return -1
	case frac < 0:
		return 1
	}
	return 0
}

func cmp3[T int | int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// value is a literal from a condition: the operand of $eq, $gt, $in...
type value struct {
	kind  kind
	b     bool
	n     num
	raw   string   // a number's literal, for String()
	s     string   // string value
	keys  []string // object keys, in order
	elems []value  // array elements, or object values (parallel to keys)
}

// valueOf converts a JSON value from a condition. The caller has checked that it holds no operators.
func valueOf(r gjson.Result) value {
	k := kindOf(r)
	v := value{kind: k}
	switch k {
	case kindBool:
		v.b = r.Type == gjson.True
	case kindNumber:
		v.n = numOf(r)
		v.raw = r.Raw
	case kindString:
		v.s = r.Str
	case kindObject:
		r.ForEach(func(key, val gjson.Result) bool {
			v.keys = append(v.keys, key.Str)
			v.elems = append(v.elems, valueOf(val))
			return true
		})
	case kindArray:
		r.ForEach(func(_, val gjson.Result) bool {
			v.elems = append(v.elems, valueOf(val))
			return true
		})
	}
	return v
}

// compareValue orders a document value of kind dk against a literal the way MongoDB's BSON comparison
// does: first by type rank, then by value; objects field by field (type, then name, then value), arrays
// element by element, a prefix before a longer sequence.
func compareValue(d gjson.Result, dk kind, q *value) int {
	if c := cmp3(dk.rank(), q.kind.rank()); c != 0 {
		return c
	}
	switch q.kind {
	case kindBool:
		db := d.Type == gjson.True
		switch {
		case db == q.b:
			return 0
		case q.b:
			return -1
		default:
			return 1
		}
	case kindNumber:
		return compareNum(numOf(d), q.n)
	case kindString:
		return strings.Compare(d.Str, q.s)
	case kindObject:
		return compareSequence(d, q, true)
	case kindArray:
		return compareSequence(d, q, false)
	}
	return 0 // null
}

// compareSequence compares a document object or array with a literal one, element by element.
func compareSequence(d gjson.Result, q *value, withKeys bool) int {
	j, res := 0, 0
	d.ForEach(func(key, val gjson.Result) bool {
		if j >= len(q.elems) {
			res = 1
			return false
		}
		vk := kindOf(val)
		qv := &q.elems[j]
		if res = cmp3(vk.rank(), qv.kind.rank()); res != 0 {
			return false
		}
		if withKeys {
			if res = strings.Compare(key.Str, q.keys[j]); res != 0 {
				return false
			}
		}
		if res = compareValue(val, vk, qv); res != 0 {
			return false
		}
		j++
		return true
	})
	if res == 0 && j < len(q.elems) {
		res = -1
	}
	return res
}

// equalValue reports whether a document value equals a literal (same type rank and compares equal).
func equalValue(d gjson.Result, dk kind, q *value) bool {
	return dk.rank() == q.kind.rank() && compareValue(d, dk, q) == 0
}

// countElems returns the number of elements in a document array.
func countElems(arr gjson.Result) int {
	n := 0
	arr.ForEach(func(_, _ gjson.Result) bool {
		n++
		return true
	})
	return n
}
