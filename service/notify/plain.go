package notify

import (
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
)

// A plain template is text and {{.Field}} actions only — every built-in message and most of an admin's. It is
// written by concatenation, exactly what text/template writes for it (TestPlainTemplatesWriteWhatTextTemplateWrites),
// at a fraction of the cost: executing the subject was most of a notification's rendering, ~4 % of Halley's CPU in
// the steps suite (docs/benchmarks.md). Anything else — if, range, pipes, functions — runs through text/template.
type plain []plainPart

type plainPart struct {
	text  string
	field int // index of a string or int field of Data; -1: text
}

// dataFields are the fields of Data a plain template may name, by name.
var dataFields = func() map[string]int {
	m := map[string]int{}
	t := reflect.TypeFor[Data]()
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() && (f.Type.Kind() == reflect.String || f.Type.Kind() == reflect.Int) {
			m[f.Name] = i
		}
	}
	return m
}()

// plainOf is t as a plain template, or nil when it is not one.
func plainOf(t *template.Template) plain {
	if t == nil || t.Tree == nil || t.Root == nil || len(t.Root.Nodes) == 0 {
		return nil // text/template's own answer (an empty template is an error when executed)
	}
	p := make(plain, 0, len(t.Root.Nodes))
	for _, n := range t.Root.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			p = append(p, plainPart{text: string(n.Text), field: -1})
		case *parse.ActionNode:
			if len(n.Pipe.Decl) > 0 || len(n.Pipe.Cmds) != 1 || len(n.Pipe.Cmds[0].Args) != 1 {
				return nil
			}
			f, ok := n.Pipe.Cmds[0].Args[0].(*parse.FieldNode)
			if !ok || len(f.Ident) != 1 {
				return nil
			}
			i, ok := dataFields[f.Ident[0]]
			if !ok {
				return nil // text/template reports the unknown field
			}
			p = append(p, plainPart{field: i})
		default:
			return nil
		}
	}
	return p
}

func (p plain) write(b *strings.Builder, d *Data) {
	v := reflect.ValueOf(d).Elem()
	for _, part := range p {
		if part.field < 0 {
			b.WriteString(part.text)
			continue
		}
		if f := v.Field(part.field); f.Kind() == reflect.Int {
			b.WriteString(strconv.FormatInt(f.Int(), 10))
		} else {
			b.WriteString(f.String())
		}
	}
}
