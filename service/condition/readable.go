package condition

import (
	"strconv"
	"strings"

	"github.com/halley-bpm/halley/model"
)

// Field names a context path for people in one language: its label (from a form) and the labels of its options
// by value (string values only, as the forms offer them).
type Field struct {
	Label   string
	Options map[string]string
}

// readableWords are the words of the readable form in one language. The patterns hold {f} (the field), {v} (the
// value) and {x} (a negated condition). They are the web UI's (frontend/src/i18n: condBuilder.text), so that the
// designer and the server's diagrams say a condition alike: change them in both places together.
type readableWords struct {
	and, or, yes, no                                            string
	not, in, nin, exists, notExists, regex, typ, size, all, any string
}

var readableByLang = map[string]*readableWords{
	model.LangEN: {
		and: " and ", or: " or ", yes: "yes", no: "no",
		not: "not ({x})", in: "{f} in {v}", nin: "{f} not in {v}", exists: "{f} is filled in", notExists: "{f} is empty",
		regex: "{f} matches {v}", typ: "{f} is of type {v}", size: "number of {f} = {v}", all: "{f} has all of {v}",
		any: "an item of {f}: {v}",
	},
	model.LangZhCN: {
		and: " 且 ", or: " 或 ", yes: "是", no: "否",
		not: "非（{x}）", in: "{f} 属于 {v}", nin: "{f} 不属于 {v}", exists: "{f} 已填写", notExists: "{f} 未填写",
		regex: "{f} 匹配 {v}", typ: "{f} 的类型为 {v}", size: "{f} 的数量 = {v}", all: "{f} 包含全部 {v}",
		any: "{f} 中有一项：{v}",
	},
}

// The comparison symbols of the readable form ($ne is written by writeNot).
var readableSymbols = [...]string{opEq: "=", opGt: ">", opGte: "≥", opLt: "<", opLte: "≤"}

// Readable says the condition as people read it — `天数 > 3 或 领导审批.上报 = 是` — in lang (model.LangZhCN or
// model.LangEN; any other reads as English): each path by its field's label (the path itself when fields has
// none), string values by their option's label, true and false as yes and no, and the operator words in that
// language. Values and lists are cut as String() cuts them; the whole text is not. It is empty for a condition
// that always matches.
func (c *Condition) Readable(lang string, fields map[string]Field) string {
	if c == nil || c.root == nil {
		return ""
	}
	w := readableByLang[lang]
	if w == nil {
		w = readableByLang[model.LangEN]
	}
	r := &readable{w: w, fields: fields}
	var b strings.Builder
	r.node(&b, c.root, "", false)
	return b.String()
}

type readable struct {
	w      *readableWords
	fields map[string]Field
}

// fill writes a pattern with its placeholders replaced.
func fill(b *strings.Builder, pattern string, args ...string) {
	for pattern != "" {
		i := strings.IndexByte(pattern, '{')
		if i < 0 || i+2 >= len(pattern) || pattern[i+2] != '}' {
			b.WriteString(pattern)
			return
		}
		b.WriteString(pattern[:i])
		name := pattern[i+1]
		for j := 0; j+1 < len(args); j += 2 {
			if args[j][0] == name {
				b.WriteString(args[j+1])
			}
		}
		pattern = pattern[i+3:]
	}
}

// fullPath is the path of a leaf inside an $elemMatch on a document (base is the array's path).
func fullPath(base, path string) string {
	switch {
	case base == "":
		return path
	case path == "":
		return base
	}
	return base + "." + path
}

// label names a path: its field's label, else the path; "" for the leaves of a value $elemMatch, which have none.
func (r *readable) label(base, path string) string {
	if path == "" {
		return ""
	}
	if f, ok := r.fields[fullPath(base, path)]; ok && f.Label != "" {
		return f.Label
	}
	return path
}

func (r *readable) node(b *strings.Builder, n node, base string, nested bool) {
	switch n := n.(type) {
	case *leaf:
		r.leaf(b, n, base)
	case *not:
		r.not(b, n, base)
	case *and:
		if len(n.kids) == 0 {
			b.WriteString("true")
			return
		}
		r.joined(b, n.kids, r.w.and, base, nested)
	case *or:
		r.joined(b, n.kids, r.w.or, base, nested)
	case *allOf:
		var v strings.Builder
		writeAllOfList(&v, n, func(b *strings.Builder, l *leaf) { r.operand(b, l, base) })
		fill(b, r.w.all, "f", r.label(base, n.path), "v", v.String())
	}
}

func (r *readable) joined(b *strings.Builder, kids []node, sep, base string, nested bool) {
	if len(kids) == 1 {
		r.node(b, kids[0], base, nested)
		return
	}
	if nested {
		b.WriteByte('(')
	}
	for i, k := range kids {
		if i > 0 {
			b.WriteString(sep)
		}
		r.node(b, k, base, true)
	}
	if nested {
		b.WriteByte(')')
	}
}

// subject writes "label " before an operator symbol; nothing for the operators of a value $elemMatch.
func (r *readable) subject(b *strings.Builder, base, path string) {
	if path != "" {
		b.WriteString(r.label(base, path))
		b.WriteByte(' ')
	}
}

func (r *readable) not(b *strings.Builder, n *not, base string) {
	if l, ok := n.child.(*leaf); ok {
		full := fullPath(base, l.path)
		switch p := l.pred.(type) {
		case *cmpPred:
			if n.op == "$ne" && p.op == opEq {
				r.subject(b, base, l.path)
				b.WriteString("≠ ")
				r.value(b, full, &p.val)
				return
			}
		case *inPred:
			if n.op == "$nin" {
				fill(b, r.w.nin, "f", r.label(base, l.path), "v", r.inList(full, p))
				return
			}
		case existsPred:
			if n.op == "$exists" {
				fill(b, r.w.notExists, "f", r.label(base, l.path))
				return
			}
		}
	}
	var x strings.Builder
	r.node(&x, n.child, base, false)
	fill(b, r.w.not, "x", x.String())
}

func (r *readable) leaf(out *strings.Builder, l *leaf, base string) {
	f, full := r.label(base, l.path), fullPath(base, l.path)
	var b strings.Builder // a leaf of a value $elemMatch has no subject: trimmed of the space before it
	defer func() { out.WriteString(strings.TrimSpace(b.String())) }()
	switch p := l.pred.(type) {
	case *cmpPred:
		r.subject(&b, base, l.path)
		b.WriteString(readableSymbols[p.op])
		b.WriteByte(' ')
		r.value(&b, full, &p.val)
	case *inPred:
		fill(&b, r.w.in, "f", f, "v", r.inList(full, p))
	case existsPred:
		fill(&b, r.w.exists, "f", f)
	case *typePred:
		v := "[" + strings.Join(p.names, ",") + "]"
		if len(p.names) == 1 {
			v = p.names[0]
		}
		fill(&b, r.w.typ, "f", f, "v", v)
	case *sizePred:
		fill(&b, r.w.size, "f", f, "v", strconv.FormatInt(p.n, 10))
	case *regexPred:
		var v strings.Builder
		writeRegex(&v, p)
		fill(&b, r.w.regex, "f", f, "v", v.String())
	case *elemMatchPred:
		// The paths of a document $elemMatch lie under the array's; the leaves of a value $elemMatch have none
		// and read the array's options.
		var v strings.Builder
		r.node(&v, p.query, full, false)
		fill(&b, r.w.any, "f", f, "v", v.String())
	}
}

// operand writes what an element of $all stands for: a value, a regex or an $elemMatch.
func (r *readable) operand(b *strings.Builder, l *leaf, base string) {
	full := fullPath(base, l.path)
	switch p := l.pred.(type) {
	case *cmpPred:
		r.value(b, full, &p.val)
	case *regexPred:
		writeRegex(b, p)
	case *elemMatchPred:
		b.WriteByte('(')
		r.node(b, p.query, full, false)
		b.WriteByte(')')
	}
}

func (r *readable) inList(path string, p *inPred) string {
	var b strings.Builder
	writeInList(&b, p, func(b *strings.Builder, v *value) { r.value(b, path, v) })
	return b.String()
}

// value writes a value for people: yes/no for booleans, an option's label for a string the field offers, a list
// item by item; anything else as String() writes it.
func (r *readable) value(b *strings.Builder, path string, v *value) {
	switch v.kind {
	case kindBool:
		if v.b {
			b.WriteString(r.w.yes)
		} else {
			b.WriteString(r.w.no)
		}
		return
	case kindString:
		if l, ok := r.fields[path].Options[v.s]; ok && l != "" {
			b.WriteString(truncate(l))
			return
		}
	case kindArray:
		b.WriteByte('[')
		for i := range v.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			if elided(i, len(v.elems)) {
				b.WriteString("…")
				break
			}
			r.value(b, path, &v.elems[i])
		}
		b.WriteByte(']')
		return
	}
	writeValue(b, v)
}
