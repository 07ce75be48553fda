package condition

import (
	"regexp"

	"github.com/tidwall/gjson"
)

// node is a compiled query expression: a *leaf, *not, *and, *or or *allOf. Documents are matched by
// matchDoc, a type switch rather than a method, so that the per-match index of top-level fields stays on the
// stack.
type node interface {
	// matchValue evaluates the expression against one value, as MongoDB's matchesSingleElement does for
	// the operators of an $elemMatch on values ({"$elemMatch": {"$gte": 80, "$lt": 85}}).
	matchValue(v gjson.Result) bool
}

// The expressions and the predicates of leaves.
var (
	_ node      = (*leaf)(nil)
	_ node      = (*not)(nil)
	_ node      = (*and)(nil)
	_ node      = (*or)(nil)
	_ node      = (*allOf)(nil)
	_ predicate = (*cmpPred)(nil)
	_ predicate = (*inPred)(nil)
	_ predicate = existsPred{}
	_ predicate = (*typePred)(nil)
	_ predicate = (*regexPred)(nil)
	_ predicate = (*sizePred)(nil)
	_ predicate = (*elemMatchPred)(nil)
)

// matchDoc evaluates n against a document (or, inside $elemMatch, an array element read as a document).
// top holds the top-level fields of the document found in one pass, or is nil.
func matchDoc(n node, doc gjson.Result, top *topFields) bool {
	switch n := n.(type) {
	case *leaf:
		if top != nil && n.slot >= 0 {
			return walkFrom(top.vals[n.slot], n.parts, n.traverseLeaf, n.pred)
		}
		return walk(doc, n.parts, n.traverseLeaf, n.pred)
	case *not:
		return !matchDoc(n.child, doc, top)
	case *and:
		for _, k := range n.kids {
			if !matchDoc(k, doc, top) {
				return false
			}
		}
		return true
	case *or:
		for _, k := range n.kids {
			if matchDoc(k, doc, top) {
				return true
			}
		}
		return false
	case *allOf:
		for _, k := range n.kids {
			if !matchDoc(k, doc, top) {
				return false
			}
		}
		return len(n.kids) > 0
	}
	return false
}

// leaf applies a predicate to the values a path reaches.
type leaf struct {
	path         string
	parts        []pathPart
	pred         predicate
	traverseLeaf bool // false for $size and $elemMatch, which look at a leaf array as a whole
	slot         int  // index of parts[0] in the condition's top-level fields, or -1
}

func newLeaf(path string, pred predicate) *leaf {
	l := &leaf{path: path, parts: splitPath(path), pred: pred, traverseLeaf: true, slot: -1}
	switch pred.(type) {
	case *sizePred, *elemMatchPred:
		l.traverseLeaf = false
	}
	return l
}

func (l *leaf) matchValue(v gjson.Result) bool { return l.pred.test(v) }

// not negates a whole expression: {"a": {"$ne": 1}} is not({"a": 1}), so that it holds when no value
// of a matches, as in MongoDB.
type not struct {
	child node
	op    string // "$ne", "$nin", "$exists", "$not" or "$nor", for String()
}

func (n *not) matchValue(v gjson.Result) bool { return !n.child.matchValue(v) }

type and struct{ kids []node }

func (a *and) matchValue(v gjson.Result) bool {
	for _, k := range a.kids {
		if !k.matchValue(v) {
			return false
		}
	}
	return true
}

type or struct{ kids []node }

func (o *or) matchValue(v gjson.Result) bool {
	for _, k := range o.kids {
		if k.matchValue(v) {
			return true
		}
	}
	return false
}

// allOf is $all: every value must match. {"$all": []} matches nothing, as in MongoDB.
type allOf struct {
	kids []node
	path string
}

func (a *allOf) matchValue(v gjson.Result) bool {
	for _, k := range a.kids {
		if !k.matchValue(v) {
			return false
		}
	}
	return len(a.kids) > 0
}

// isAlways reports whether n is the empty conjunction (the condition {}).
func isAlways(n node) bool {
	a, ok := n.(*and)
	return ok && len(a.kids) == 0
}

// cmpOp is a comparison operator.
type cmpOp uint8

const (
	opEq cmpOp = iota
	opGt
	opGte
	opLt
	opLte
)

// cmpPred is $eq, $gt, $gte, $lt or $lte.
type cmpPred struct {
	op  cmpOp
	val value
}

func (c *cmpPred) test(v gjson.Result) bool {
	k := kindOf(v)
	if k == kindMissing {
		// A missing field compares as null: {"a": null} matches documents without a.
		if c.val.kind != kindNull {
			return false
		}
		return c.op == opEq || c.op == opGte || c.op == opLte
	}
	if k.rank() != c.val.kind.rank() {
		return false // type bracketing: a number is never $gt a string
	}
	x := compareValue(v, k, &c.val)
	switch c.op {
	case opEq:
		return x == 0
	case opGt:
		return x > 0
	case opGte:
		return x >= 0
	case opLt:
		return x < 0
	default:
		return x <= 0
	}
}

// inPred is $in (and, negated, $nin).
type inPred struct {
	vals    []value
	regexes []*regexPred
	hasNull bool
}

func (p *inPred) test(v gjson.Result) bool {
	k := kindOf(v)
	if k == kindMissing {
		return p.hasNull
	}
	for i := range p.vals {
		if equalValue(v, k, &p.vals[i]) {
			return true
		}
	}
	if k == kindString {
		for _, re := range p.regexes {
			if re.re.MatchString(v.Str) {
				return true
			}
		}
	}
	return false
}

type existsPred struct{}

func (existsPred) test(v gjson.Result) bool { return kindOf(v) != kindMissing }

// BSON type numbers, as $type accepts them.
const (
	typeDouble  = 1
	typeString  = 2
	typeObject  = 3
	typeArray   = 4
	typeBool    = 8
	typeNull    = 10
	typeInt     = 16
	typeLong    = 18
	typeDecimal = 19
	typeNumber  = -2 // the "number" alias: any numeric type
)

// typePred is $type. A JSON number that is integral (and fits in 64 bits) is an int and a long; any other
// number is a double; no JSON value is a decimal.
type typePred struct {
	types []int
	names []string // as written, for String()
}

func (p *typePred) test(v gjson.Result) bool {
	var want1, want2 int
	switch kindOf(v) {
	case kindMissing:
		return false
	case kindNull:
		want1 = typeNull
	case kindBool:
		want1 = typeBool
	case kindString:
		want1 = typeString
	case kindObject:
		want1 = typeObject
	case kindArray:
		want1 = typeArray
	case kindNumber:
		if _, ok := numOf(v).whole(); ok {
			want1, want2 = typeInt, typeLong
		} else {
			want1 = typeDouble
		}
		for _, t := range p.types {
			if t == typeNumber || t == want1 || t == want2 {
				return true
			}
		}
		return false
	}
	for _, t := range p.types {
		if t == want1 {
			return true
		}
	}
	return false
}

// regexPred is $regex: it matches strings only.
type regexPred struct {
	re      *regexp.Regexp
	pattern string
	options string
}

func (p *regexPred) test(v gjson.Result) bool {
	return kindOf(v) == kindString && p.re.MatchString(v.Str)
}

// sizePred is $size: it matches arrays of exactly n elements.
type sizePred struct{ n int64 }

func (p *sizePred) test(v gjson.Result) bool {
	return kindOf(v) == kindArray && int64(countElems(v)) == p.n
}

// elemMatchPred is $elemMatch. In the document form ({"$elemMatch": {"qty": 5}}) the query applies to each
// element that is an object or an array; in the value form ({"$elemMatch": {"$gt": 5}}) the operators apply
// to each element itself.
type elemMatchPred struct {
	query     node
	valueForm bool
}

func (p *elemMatchPred) test(v gjson.Result) bool {
	if kindOf(v) != kindArray {
		return false
	}
	found := false
	v.ForEach(func(_, e gjson.Result) bool {
		if p.valueForm {
			found = p.query.matchValue(e)
		} else if k := kindOf(e); k == kindObject || k == kindArray {
			found = matchDoc(p.query, e, nil)
		}
		return !found
	})
	return found
}
