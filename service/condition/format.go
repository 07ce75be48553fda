package condition

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits that keep String() short enough for an edge label.
const (
	maxLabelString = 32 // runes of a string value
	maxLabelList   = 6  // elements of a list; longer lists show the first ones and "…"
)

// format renders a compiled condition as short human text, e.g. `level >= 3 and dept in [a,b]`.
func format(n node) string {
	var b strings.Builder
	writeNode(&b, n, false)
	return b.String()
}

// writeNode writes n; nested says whether n sits inside another and/or, where a compound needs brackets.
func writeNode(b *strings.Builder, n node, nested bool) {
	switch n := n.(type) {
	case *leaf:
		writeLeaf(b, n)
	case *not:
		writeNot(b, n)
	case *and:
		if len(n.kids) == 0 {
			b.WriteString("true")
			return
		}
		writeJoined(b, n.kids, " and ", nested)
	case *or:
		writeJoined(b, n.kids, " or ", nested)
	case *allOf:
		writeSubject(b, n.path)
		b.WriteString("all ")
		writeAllOfList(b, n, writeOperand)
	}
}

// writeAllOfList writes an $all's items as "[a,b,…]", each written by writeItem; both renderers use it.
func writeAllOfList(b *strings.Builder, n *allOf, writeItem func(*strings.Builder, *leaf)) {
	b.WriteByte('[')
	for i, k := range n.kids {
		if i > 0 {
			b.WriteByte(',')
		}
		if elided(i, len(n.kids)) {
			b.WriteString("…")
			break
		}
		if l, ok := k.(*leaf); ok {
			writeItem(b, l)
		}
	}
	b.WriteByte(']')
}

func writeJoined(b *strings.Builder, kids []node, sep string, nested bool) {
	if len(kids) == 1 {
		writeNode(b, kids[0], nested)
		return
	}
	if nested {
		b.WriteByte('(')
	}
	for i, k := range kids {
		if i > 0 {
			b.WriteString(sep)
		}
		writeNode(b, k, true)
	}
	if nested {
		b.WriteByte(')')
	}
}

func writeNot(b *strings.Builder, n *not) {
	if l, ok := n.child.(*leaf); ok {
		switch p := l.pred.(type) {
		case *cmpPred:
			if n.op == "$ne" {
				writeSubject(b, l.path)
				b.WriteString("!= ")
				writeValue(b, &p.val)
				return
			}
		case *inPred:
			if n.op == "$nin" {
				writeSubject(b, l.path)
				b.WriteString("not in ")
				writeInList(b, p, writeValue)
				return
			}
		case existsPred:
			if n.op == "$exists" {
				writeSubject(b, l.path)
				b.WriteString("not exists")
				return
			}
		}
	}
	b.WriteString("not (")
	writeNode(b, n.child, false)
	b.WriteByte(')')
}

// writeSubject writes the path a leaf applies to; it is empty for the operators of a value $elemMatch.
func writeSubject(b *strings.Builder, path string) {
	if path != "" {
		b.WriteString(path)
		b.WriteByte(' ')
	}
}

func writeLeaf(b *strings.Builder, l *leaf) {
	if p, ok := l.pred.(*sizePred); ok {
		if l.path == "" {
			b.WriteString("size = ")
		} else {
			b.WriteString("size(" + l.path + ") = ")
		}
		b.WriteString(strconv.FormatInt(p.n, 10))
		return
	}
	writeSubject(b, l.path)
	switch p := l.pred.(type) {
	case *cmpPred:
		b.WriteString([...]string{"= ", "> ", ">= ", "< ", "<= "}[p.op])
		writeValue(b, &p.val)
	case *inPred:
		b.WriteString("in ")
		writeInList(b, p, writeValue)
	case existsPred:
		b.WriteString("exists")
	case *typePred:
		b.WriteString("is ")
		if len(p.names) == 1 {
			b.WriteString(p.names[0])
		} else {
			b.WriteString("[" + strings.Join(p.names, ",") + "]")
		}
	default:
		writeOperand(b, l)
	}
}

// writeOperand writes what a leaf compares with: the value of $eq, a regex, or an $elemMatch.
func writeOperand(b *strings.Builder, l *leaf) {
	switch p := l.pred.(type) {
	case *cmpPred:
		writeValue(b, &p.val)
	case *regexPred:
		b.WriteString("~ ")
		writeRegex(b, p)
	case *elemMatchPred:
		b.WriteString("any (")
		writeNode(b, p.query, false)
		b.WriteByte(')')
	}
}

func writeRegex(b *strings.Builder, p *regexPred) {
	b.WriteByte('/')
	b.WriteString(truncate(p.pattern))
	b.WriteByte('/')
	b.WriteString(p.options)
}

// writeInList writes the items of an $in/$nin list, each value with writeVal, eliding past the limit.
func writeInList(b *strings.Builder, p *inPred, writeVal func(*strings.Builder, *value)) {
	b.WriteByte('[')
	n := 0
	item := func() bool {
		if n > 0 {
			b.WriteByte(',')
		}
		if elided(n, len(p.vals)+len(p.regexes)) {
			b.WriteString("…")
			return false
		}
		n++
		return true
	}
	for i := range p.vals {
		if !item() {
			b.WriteByte(']')
			return
		}
		writeVal(b, &p.vals[i])
	}
	for _, re := range p.regexes {
		if !item() {
			break
		}
		writeRegex(b, re)
	}
	b.WriteByte(']')
}

func writeValue(b *strings.Builder, v *value) {
	switch v.kind {
	case kindNull:
		b.WriteString("null")
	case kindBool:
		b.WriteString(strconv.FormatBool(v.b))
	case kindNumber:
		b.WriteString(v.raw)
	case kindString:
		if v.s == "" {
			b.WriteString(`""`)
		} else {
			b.WriteString(truncate(v.s))
		}
	case kindArray, kindObject:
		open, end := byte('['), byte(']')
		if v.kind == kindObject {
			open, end = '{', '}'
		}
		b.WriteByte(open)
		for i := range v.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			if elided(i, len(v.elems)) {
				b.WriteString("…")
				break
			}
			if v.kind == kindObject {
				b.WriteString(truncate(v.keys[i]) + ":")
			}
			writeValue(b, &v.elems[i])
		}
		b.WriteByte(end)
	}
}

// elided reports whether the i-th of n list items is where a long list is cut short.
func elided(i, n int) bool { return i == maxLabelList-1 && n > maxLabelList }

func truncate(s string) string {
	if utf8.RuneCountInString(s) <= maxLabelString {
		return s
	}
	r := []rune(s)
	return string(r[:maxLabelString-1]) + "…"
}
