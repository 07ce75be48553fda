package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/halley-bpm/halley/model"
	"github.com/invopop/jsonschema"
)

// The markers around the generated field reference in docs/templates.md.
const (
	refBegin = "<!-- BEGIN field reference: generated from model/definition.schema.json by `make generate`; edit the Go types in model/, not this table -->"
	refEnd   = "<!-- END field reference -->"
)

// spliceReference replaces what stands between the markers of page with ref.
func spliceReference(page, ref []byte) ([]byte, error) {
	b := bytes.Index(page, []byte(refBegin))
	e := bytes.Index(page, []byte(refEnd))
	if b < 0 || e < b {
		return nil, fmt.Errorf("schemagen: %s lacks the markers %q and %q around the field reference", docsFile, refBegin, refEnd)
	}
	var out bytes.Buffer
	out.Write(page[:b+len(refBegin)])
	out.WriteString("\n")
	out.Write(ref)
	out.Write(page[e:])
	return out.Bytes(), nil
}

// reference renders one table per object of the schema: the definition, then the objects it refers to, in the
// order they are first referred to.
func reference(root *jsonschema.Schema) []byte {
	var b strings.Builder
	names := []string{"Definition"}
	schemas := map[string]*jsonschema.Schema{"Definition": root}
	for i := 0; i < len(names); i++ {
		s := schemas[names[i]]
		for _, ps := range s.Properties.FromOldest() {
			for _, ref := range refs(ps) {
				if _, seen := schemas[ref]; !seen {
					names = append(names, ref)
					schemas[ref] = root.Definitions[ref]
				}
			}
		}
	}
	for _, name := range names {
		s := schemas[name]
		fmt.Fprintf(&b, "\n#### `%s`\n\n%s\n\n", name, oneLine(s.Description))
		b.WriteString("| field | type | required | applies to | meaning |\n|---|---|---|---|---|\n")
		for prop, ps := range s.Properties.FromOldest() {
			req := ""
			switch {
			case slices.Contains(s.Required, prop):
				req = "yes"
			case len(list(ps.Extras[xRequiredFor])) > 0:
				req = "for " + codes(list(ps.Extras[xRequiredFor]))
			}
			desc := oneLine(ps.Description)
			if ps.Default != nil {
				desc += fmt.Sprintf(" Default: `%v`.", ps.Default)
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", prop, typeName(ps), req, codes(list(ps.Extras[xFor])), cell(desc))
		}
	}
	b.WriteString("\n")
	return []byte(b.String())
}

// refs returns the names of the $defs a property schema refers to.
func refs(s *jsonschema.Schema) []string {
	if s == nil {
		return nil
	}
	if name, ok := strings.CutPrefix(s.Ref, "#/$defs/"); ok {
		return []string{name}
	}
	var out []string
	for _, sub := range append(append([]*jsonschema.Schema{s.Items}, s.OneOf...), s.AnyOf...) {
		out = append(out, refs(sub)...)
	}
	return out
}

// typeName says in a few words what a property holds.
func typeName(s *jsonschema.Schema) string {
	switch {
	case s.Ref != "":
		name := strings.TrimPrefix(s.Ref, "#/$defs/")
		return fmt.Sprintf("[`%s`](#%s)", name, strings.ToLower(name))
	case s.Format == model.DurationFormat:
		return "duration"
	case len(s.Enum) > 0:
		vals := make([]string, len(s.Enum))
		for i, v := range s.Enum {
			vals[i] = fmt.Sprint(v)
		}
		return "one of " + codes(vals)
	case len(s.OneOf) > 0 || len(s.AnyOf) > 0:
		var alts []string
		for _, a := range append(s.OneOf, s.AnyOf...) {
			alts = append(alts, typeName(a))
		}
		return strings.Join(alts, ", or ")
	case s.Type == "array" && s.Items != nil:
		return "array of " + typeName(s.Items)
	case s.Type == "object" && s.Properties != nil:
		var props []string
		for p := range s.Properties.KeysFromOldest() {
			props = append(props, p)
		}
		return "object with " + codes(props)
	case s.Type != "":
		return s.Type
	}
	return "any"
}

func codes(vals []string) string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = "`" + v + "`"
	}
	return strings.Join(out, ", ")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cell escapes what would end a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
