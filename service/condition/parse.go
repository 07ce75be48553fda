package condition

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

func errAt(loc, op, format string, args ...any) *CompileError {
	return &CompileError{Path: loc, Operator: op, Message: fmt.Sprintf(format, args...)}
}

func joinLoc(loc, key string) string {
	if loc == "" {
		return key
	}
	return loc + "." + key
}

// firstKey returns the first key of a JSON object, and whether it has one.
func firstKey(obj gjson.Result) (string, bool) {
	key, ok := "", false
	obj.ForEach(func(k, _ gjson.Result) bool {
		key, ok = k.Str, true
		return false
	})
	return key, ok
}

// isOperatorObject reports whether v is an operator expression ({"$gt": 5}): an object whose first key
// starts with $, which is how MongoDB tells operators from an embedded document to compare with.
func isOperatorObject(v gjson.Result) bool {
	if !v.IsObject() {
		return false
	}
	k, ok := firstKey(v)
	return ok && strings.HasPrefix(k, "$")
}

// parseQuery compiles a query document: an implicit $and of its fields and top-level operators.
func parseQuery(q gjson.Result, loc string) (node, error) {
	var kids []node
	var err error
	q.ForEach(func(k, v gjson.Result) bool {
		var n node
		if key := k.Str; strings.HasPrefix(key, "$") {
			n, err = parseTopOperator(key, v, loc)
		} else {
			n, err = parseField(key, v, joinLoc(loc, key))
		}
		if err != nil {
			return false
		}
		if n != nil {
			kids = append(kids, n)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(kids) == 1 {
		return kids[0], nil
	}
	return &and{kids: kids}, nil
}

func parseTopOperator(op string, v gjson.Result, loc string) (node, error) {
	switch op {
	case "$and", "$or", "$nor":
		if !v.IsArray() {
			return nil, errAt(loc, op, "needs a non-empty array of query objects, got %s", describeJSON(v))
		}
		var kids []node
		var err error
		i := 0
		v.ForEach(func(_, e gjson.Result) bool {
			if !e.IsObject() {
				err = errAt(loc, op, "element %d must be a query object, got %s", i, describeJSON(e))
				return false
			}
			var n node
			if n, err = parseQuery(e, joinLoc(loc, op+"."+strconv.Itoa(i))); err != nil {
				return false
			}
			kids = append(kids, n)
			i++
			return true
		})
		if err != nil {
			return nil, err
		}
		if len(kids) == 0 {
			return nil, errAt(loc, op, "needs a non-empty array of query objects, got an empty array")
		}
		switch op {
		case "$and":
			return &and{kids: kids}, nil
		case "$or":
			return &or{kids: kids}, nil
		default:
			return &not{child: &or{kids: kids}, op: "$nor"}, nil
		}
	case "$comment":
		return nil, nil // a note for readers, as in MongoDB
	case "$not":
		return nil, errAt(loc, op, `applies to a field: {"field": {"$not": {...}}}, not to a whole query (use $nor)`)
	}
	return nil, errAt(loc, op, "is not a supported top-level operator (use $and, $or, $nor or a field name)")
}

// maxPathIndexes bounds the array indexes in a path: at an array, MongoDB's rules look into an object element
// both with the index and without it, so each index can double the work on a hostile document.
const maxPathIndexes = 8

// parseField compiles the condition on one field path: an operator object or a value to equal.
func parseField(path string, v gjson.Result, loc string) (node, error) {
	indexes := 0
	for _, p := range strings.Split(path, ".") {
		if arrayIndex(p) >= 0 {
			indexes++
		}
	}
	if indexes > maxPathIndexes {
		return nil, errAt(loc, "", "a path may hold at most %d array indexes", maxPathIndexes)
	}
	if isOperatorObject(v) {
		return parseOperators(path, v, loc)
	}
	val, err := literal(v, loc)
	if err != nil {
		return nil, err
	}
	return newLeaf(path, &cmpPred{op: opEq, val: val}), nil
}

// literal converts a value to compare with, refusing objects that hold operators (an operator that is not
// first in its object, or one nested in a value, is a mistake MongoDB would silently compare literally).
func literal(v gjson.Result, loc string) (value, error) {
	if err := checkLiteral(v, loc); err != nil {
		return value{}, err
	}
	return valueOf(v), nil
}

func checkLiteral(v gjson.Result, loc string) error {
	var err error
	switch kindOf(v) {
	case kindObject:
		v.ForEach(func(k, e gjson.Result) bool {
			if strings.HasPrefix(k.Str, "$") {
				err = errAt(loc, k.Str, `a value cannot hold a field starting with $ (operators come first in their object: {"field": {"$op": ...}})`)
				return false
			}
			err = checkLiteral(e, joinLoc(loc, k.Str))
			return err == nil
		})
	case kindArray:
		i := 0
		v.ForEach(func(_, e gjson.Result) bool {
			err = checkLiteral(e, joinLoc(loc, strconv.Itoa(i)))
			i++
			return err == nil
		})
	}
	return err
}

// parseOperators compiles an operator object such as {"$gte": 3, "$lt": 5}: the conjunction of its
// operators on path (path is empty for the value form of $elemMatch).
func parseOperators(path string, obj gjson.Result, loc string) (node, error) {
	var pattern, options gjson.Result
	var err error
	obj.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "$regex":
			if pattern.Exists() {
				err = errAt(loc, "$regex", "appears twice")
			}
			pattern = v
		case "$options":
			if options.Exists() {
				err = errAt(loc, "$options", "appears twice")
			}
			options = v
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	if options.Exists() && !pattern.Exists() {
		return nil, errAt(loc, "$options", "needs a $regex beside it")
	}
	var kids []node
	obj.ForEach(func(k, v gjson.Result) bool {
		var n node
		switch op := k.Str; op {
		case "$options":
			return true
		case "$regex":
			var re *regexPred
			if re, err = compileRegex(pattern, options, loc); err == nil {
				n = newLeaf(path, re)
			}
		default:
			n, err = parseOperator(path, op, v, loc)
		}
		if err != nil {
			return false
		}
		kids = append(kids, n)
		return true
	})
	if err != nil {
		return nil, err
	}
	if len(kids) == 1 {
		return kids[0], nil
	}
	return &and{kids: kids}, nil
}

func parseOperator(path, op string, v gjson.Result, loc string) (node, error) {
	switch op {
	case "$eq", "$ne", "$gt", "$gte", "$lt", "$lte":
		val, err := literal(v, loc)
		if err != nil {
			return nil, err
		}
		c := &cmpPred{val: val}
		switch op {
		case "$gt":
			c.op = opGt
		case "$gte":
			c.op = opGte
		case "$lt":
			c.op = opLt
		case "$lte":
			c.op = opLte
		}
		if op == "$ne" {
			return &not{child: newLeaf(path, c), op: op}, nil
		}
		return newLeaf(path, c), nil
	case "$in", "$nin":
		p, err := parseIn(v, loc, op)
		if err != nil {
			return nil, err
		}
		if op == "$nin" {
			return &not{child: newLeaf(path, p), op: op}, nil
		}
		return newLeaf(path, p), nil
	case "$exists":
		var want bool
		switch kindOf(v) {
		case kindBool:
			want = v.Type == gjson.True
		case kindNumber:
			want = v.Num != 0
		default:
			return nil, errAt(loc, op, "needs true or false, got %s", describeJSON(v))
		}
		l := newLeaf(path, existsPred{})
		if !want {
			return &not{child: l, op: op}, nil
		}
		return l, nil
	case "$type":
		p, err := parseType(v, loc)
		if err != nil {
			return nil, err
		}
		return newLeaf(path, p), nil
	case "$size":
		if kindOf(v) != kindNumber {
			return nil, errAt(loc, op, "needs a non-negative whole number, got %s", describeJSON(v))
		}
		n, ok := numOf(v).whole()
		if !ok {
			return nil, errAt(loc, op, "needs a whole number, got %s", v.Raw)
		}
		if n < 0 {
			return nil, errAt(loc, op, "needs a non-negative number, got %s", v.Raw)
		}
		return newLeaf(path, &sizePred{n: n}), nil
	case "$all":
		return parseAll(path, v, loc)
	case "$elemMatch":
		return parseElemMatch(path, v, loc)
	case "$not":
		if !v.IsObject() {
			return nil, errAt(loc, op, `needs an operator object such as {"$gt": 5} or {"$regex": "^a"}, got %s`, describeJSON(v))
		}
		k, ok := firstKey(v)
		if !ok {
			return nil, errAt(loc, op, "cannot be empty")
		}
		if !strings.HasPrefix(k, "$") {
			return nil, errAt(loc, op, `needs operators such as {"$gt": 5}, not a document`)
		}
		child, err := parseOperators(path, v, joinLoc(loc, op))
		if err != nil {
			return nil, err
		}
		return &not{child: child, op: op}, nil
	}
	if !strings.HasPrefix(op, "$") {
		return nil, errAt(loc, op, "an operator object cannot also hold fields (%q is not an operator)", op)
	}
	return nil, errAt(loc, op, "is not a supported operator")
}

// regexObject reports whether v is {"$regex": ..., "$options": ...}, the form a regular expression takes
// inside $in, $nin and $all (MongoDB's extended JSON).
func regexObject(v gjson.Result) bool {
	if !v.IsObject() {
		return false
	}
	hasRegex, other := false, false
	v.ForEach(func(k, _ gjson.Result) bool {
		switch k.Str {
		case "$regex":
			hasRegex = true
		case "$options":
		default:
			other = true
		}
		return !other
	})
	return hasRegex && !other
}

func compileRegexObject(v gjson.Result, loc string) (*regexPred, error) {
	return compileRegex(v.Get(`\$regex`), v.Get(`\$options`), loc)
}

func parseIn(v gjson.Result, loc, op string) (*inPred, error) {
	if !v.IsArray() {
		return nil, errAt(loc, op, "needs an array, got %s", describeJSON(v))
	}
	p := &inPred{}
	var err error
	i := 0
	v.ForEach(func(_, e gjson.Result) bool {
		eloc := joinLoc(loc, op+"."+strconv.Itoa(i))
		i++
		if regexObject(e) {
			var re *regexPred
			if re, err = compileRegexObject(e, eloc); err == nil {
				p.regexes = append(p.regexes, re)
			}
			return err == nil
		}
		var val value
		if val, err = literal(e, eloc); err != nil {
			return false
		}
		p.hasNull = p.hasNull || val.kind == kindNull
		p.vals = append(p.vals, val)
		return true
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func parseAll(path string, v gjson.Result, loc string) (node, error) {
	const op = "$all"
	if !v.IsArray() {
		return nil, errAt(loc, op, "needs an array, got %s", describeJSON(v))
	}
	a := &allOf{path: path}
	var err error
	i, elemMatches := 0, 0
	v.ForEach(func(_, e gjson.Result) bool {
		eloc := joinLoc(loc, op+"."+strconv.Itoa(i))
		i++
		var n node
		switch {
		case isOperatorObject(e) && e.Get(`\$elemMatch`).Exists():
			if k, _ := firstKey(e); k != "$elemMatch" || len(e.Map()) != 1 {
				err = errAt(eloc, op, `an element of $all must be a value or exactly {"$elemMatch": {...}}`)
				return false
			}
			elemMatches++
			n, err = parseElemMatch(path, e.Get(`\$elemMatch`), eloc)
		case regexObject(e):
			var re *regexPred
			if re, err = compileRegexObject(e, eloc); err == nil {
				n = newLeaf(path, re)
			}
		default:
			var val value
			if val, err = literal(e, eloc); err == nil {
				n = newLeaf(path, &cmpPred{op: opEq, val: val})
			}
		}
		if err != nil {
			return false
		}
		a.kids = append(a.kids, n)
		return true
	})
	if err != nil {
		return nil, err
	}
	if elemMatches > 0 && elemMatches != len(a.kids) {
		return nil, errAt(loc, op, "cannot mix $elemMatch elements with values")
	}
	return a, nil
}

func parseElemMatch(path string, v gjson.Result, loc string) (node, error) {
	const op = "$elemMatch"
	if !v.IsObject() {
		return nil, errAt(loc, op, "needs an object, got %s", describeJSON(v))
	}
	eloc := joinLoc(loc, op)
	p := &elemMatchPred{}
	var err error
	if k, _ := firstKey(v); strings.HasPrefix(k, "$") && k != "$and" && k != "$or" && k != "$nor" {
		// {"$elemMatch": {"$gte": 80, "$lt": 85}}: operators on each element.
		p.valueForm = true
		p.query, err = parseOperators("", v, eloc)
	} else {
		// {"$elemMatch": {"product": "xyz", "score": {"$gte": 8}}}: a query on each element.
		p.query, err = parseQuery(v, eloc)
	}
	if err != nil {
		return nil, err
	}
	return newLeaf(path, p), nil
}

// typeAlias returns the BSON type number of a $type alias that a JSON value can have.
func typeAlias(name string) (int, bool) {
	switch name {
	case "double":
		return typeDouble, true
	case "string":
		return typeString, true
	case "object":
		return typeObject, true
	case "array":
		return typeArray, true
	case "bool":
		return typeBool, true
	case "null":
		return typeNull, true
	case "int":
		return typeInt, true
	case "long":
		return typeLong, true
	case "decimal":
		return typeDecimal, true
	case "number":
		return typeNumber, true
	}
	return 0, false
}

// typeCodeName returns the alias of a BSON type number that a JSON value can have.
func typeCodeName(code int64) (string, bool) {
	for _, name := range []string{"double", "string", "object", "array", "bool", "null", "int", "long", "decimal"} {
		if c, _ := typeAlias(name); int64(c) == code {
			return name, true
		}
	}
	return "", false
}

// bsonType is a BSON type that MongoDB knows but no JSON value has; naming one in a condition is surely a
// mistake.
type bsonType struct {
	name string
	code int64
}

func bsonOnlyTypes() []bsonType {
	return []bsonType{{"binData", 5}, {"undefined", 6}, {"objectId", 7}, {"date", 9}, {"regex", 11},
		{"dbPointer", 12}, {"javascript", 13}, {"symbol", 14}, {"javascriptWithScope", 15}, {"timestamp", 17},
		{"minKey", -1}, {"maxKey", 127}}
}

func parseType(v gjson.Result, loc string) (*typePred, error) {
	const op = "$type"
	p := &typePred{}
	add := func(e gjson.Result) error {
		switch kindOf(e) {
		case kindString:
			if code, ok := typeAlias(e.Str); ok {
				p.types = append(p.types, code)
				p.names = append(p.names, e.Str)
				return nil
			}
			for _, t := range bsonOnlyTypes() {
				if t.name == e.Str {
					return errAt(loc, op, "type %q never occurs in a JSON document", e.Str)
				}
			}
			return errAt(loc, op, "unknown type alias %q", e.Str)
		case kindNumber:
			code, ok := numOf(e).whole()
			if !ok {
				return errAt(loc, op, "type code must be a whole number, got %s", e.Raw)
			}
			if name, ok := typeCodeName(code); ok {
				p.types = append(p.types, int(code))
				p.names = append(p.names, name)
				return nil
			}
			for _, t := range bsonOnlyTypes() {
				if t.code == code {
					return errAt(loc, op, "type %d (%s) never occurs in a JSON document", code, t.name)
				}
			}
			return errAt(loc, op, "unknown type code %d", code)
		}
		return errAt(loc, op, "needs a type alias or number, got %s", describeJSON(e))
	}
	if v.IsArray() {
		var err error
		v.ForEach(func(_, e gjson.Result) bool {
			err = add(e)
			return err == nil
		})
		if err != nil {
			return nil, err
		}
		if len(p.types) == 0 {
			return nil, errAt(loc, op, "needs at least one type")
		}
		return p, nil
	}
	if err := add(v); err != nil {
		return nil, err
	}
	return p, nil
}

// compileRegex compiles $regex with its $options (i, m, s, x and u, as MongoDB accepts them) into Go's RE2
// syntax. RE2 has no x flag, so extended patterns are stripped of their spaces and comments here.
func compileRegex(pattern, options gjson.Result, loc string) (*regexPred, error) {
	if kindOf(pattern) != kindString {
		return nil, errAt(loc, "$regex", "needs a string pattern, got %s", describeJSON(pattern))
	}
	opts := ""
	if options.Exists() {
		if kindOf(options) != kindString {
			return nil, errAt(loc, "$options", "needs a string of flags, got %s", describeJSON(options))
		}
		opts = options.Str
	}
	var flags strings.Builder
	extended := false
	for _, f := range opts {
		switch f {
		case 'i', 'm', 's':
			if !strings.ContainsRune(flags.String(), f) {
				flags.WriteRune(f)
			}
		case 'x':
			extended = true
		case 'u': // UTF-8 is always on, as in MongoDB
		default:
			return nil, errAt(loc, "$options", "unknown flag %q (allowed: i, m, s, x, u)", f)
		}
	}
	src := pattern.Str
	if extended {
		src = stripExtended(src)
	}
	if flags.Len() > 0 {
		src = "(?" + flags.String() + ")" + src
	}
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, errAt(loc, "$regex", "bad regular expression: %v", err)
	}
	return &regexPred{re: re, pattern: pattern.Str, options: opts}, nil
}

// stripExtended removes what PCRE's extended mode ignores: white space outside character classes unless
// escaped, and comments from an unescaped # to the end of the line.
func stripExtended(p string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			b.WriteByte(c)
			b.WriteByte(p[i+1])
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
			b.WriteByte(c)
		case c == '[':
			inClass = true
			b.WriteByte(c)
			if i+1 < len(p) && p[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' { // a ] first in a class is a literal
				b.WriteByte(']')
				i++
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
		case c == '#':
			for i+1 < len(p) && p[i+1] != '\n' {
				i++
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
