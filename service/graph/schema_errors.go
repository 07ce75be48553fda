package graph

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/halley-bpm/halley/model"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// problem is one thing the schema found, at a place in the definition.
type problem struct {
	at    []string             // instance location: ["nodes", "3", "approvers", "users", "0"]
	kind  jsonschema.ErrorKind // what failed
	loc   string               // JSON pointer of the failing schema in the schema document
	prune []string             // what to leave out before decoding (a value that cannot decode), or nil
	alts  []string             // for a union no alternative of which fits: the JSON types it takes
}

// problems validates doc and returns what the schema found, in definition order: the definition's own fields,
// then node by node, then edge by edge.
func (c *schemaChecker) problems(doc map[string]any) []problem {
	err := c.schema.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []problem{{kind: &kind.Schema{Location: err.Error()}}}
	}
	var all []problem
	flatten(ve, nil, &all)
	// Fields of a node of an unknown type (a trigger of an unknown kind...) are not foreign to it: the unknown
	// value is the problem, and is reported.
	all = slices.DeleteFunc(all, func(p problem) bool {
		_, isForeign := p.kind.(*kind.FalseSchema)
		if !isForeign {
			return false
		}
		base := parentObject(p.loc)
		disc, value := c.discriminator(base, asMap(valueAt(doc, p.at[:len(p.at)-1])))
		return disc != "" && !slices.Contains(stringList(asMap(c.pointer(base + "/properties/" + pointerToken(disc)))["enum"]), value)
	})
	// A field that does not belong where it is (a false schema) is reported once, not also for what it holds;
	// an empty string that must not be is reported as missing, not also as not matching its pattern. (Sets of
	// locations: an invalid definition may have thousands of problems.)
	foreign, empty := map[string]bool{}, map[string]bool{}
	for _, p := range all {
		switch p.kind.(type) {
		case *kind.FalseSchema:
			foreign[locationKey(p.at)] = true
		case *kind.MinLength:
			empty[locationKey(p.at)] = true
		}
	}
	underForeign := func(at []string) bool {
		for i := 1; i <= len(at); i++ {
			if foreign[locationKey(at[:i])] {
				return true
			}
		}
		return false
	}
	out := all[:0]
	for _, p := range all {
		_, isForeign := p.kind.(*kind.FalseSchema)
		_, isPattern := p.kind.(*kind.Pattern)
		switch {
		case !isForeign && underForeign(p.at):
		case isPattern && empty[locationKey(p.at)]:
		default:
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b problem) int { return compareLocations(a.at, b.at) })
	return out
}

// flatten collects the leaves of an error tree. For a union (oneOf, anyOf) it follows the alternative the value
// was meant for, the one of its JSON type; inside a union, the whole union's value is what cannot decode.
func flatten(e *jsonschema.ValidationError, union []string, out *[]problem) {
	prune := union
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		for _, ce := range e.Causes {
			flatten(ce, union, out)
		}
		return
	case *kind.OneOf, *kind.AnyOf:
		if union == nil {
			union = e.InstanceLocation
		}
		var meant []*jsonschema.ValidationError
		var types []string
		for _, ce := range e.Causes {
			if t, ok := ce.ErrorKind.(*kind.Type); ok && slices.Equal(ce.InstanceLocation, e.InstanceLocation) {
				types = append(types, t.Want...)
				continue
			}
			meant = append(meant, ce)
		}
		if len(meant) == 1 {
			flatten(meant[0], union, out)
			return
		}
		*out = append(*out, problem{at: e.InstanceLocation, kind: k, loc: fragment(e.SchemaURL), prune: union, alts: types})
		return
	case *kind.Format:
		var neg negativeDuration
		if prune == nil && !errors.As(k.Err, &neg) { // a negative duration decodes; Check need not see it again
			prune = e.InstanceLocation
		}
	case *kind.Type, *kind.FalseSchema:
		if prune == nil {
			prune = e.InstanceLocation
		}
	}
	loc := fragment(e.SchemaURL)
	if m := dependentLoc.FindStringSubmatch(loc); m != nil {
		// A field present where its object's discriminator has another value (or none): the schema reports the
		// discriminator; the problem is the field. It cannot stay: it would be decoded into the definition.
		at := e.InstanceLocation
		if m[3] != "" {
			at = at[:len(at)-1]
		}
		at = append(slices.Clip(at), unescapePointer(m[2]))
		*out = append(*out, problem{at: at, kind: &kind.FalseSchema{}, loc: m[1] + "/properties/" + m[2], prune: at})
		return
	}
	*out = append(*out, problem{at: e.InstanceLocation, kind: e.ErrorKind, loc: loc, prune: prune})
}

// dependentLoc matches the schema location of a field's dependentSchemas entry (schemagen writes one for each
// field that belongs to some values of its object's discriminator), or of the discriminator inside it.
var dependentLoc = regexp.MustCompile(`^(.*)/dependentSchemas/([^/]+)(/properties/[^/]+)?$`)

func unescapePointer(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

// fragment returns the JSON pointer of a schema location ("urn:...#/$defs/Node/properties/sign").
func fragment(url string) string {
	if _, f, ok := strings.Cut(url, "#"); ok {
		return f
	}
	return ""
}

func locationKey(at []string) string { return strings.Join(at, "\x00") }

// compareLocations orders instance locations: the definition's own fields, then nodes, then edges; array indices
// by number.
func compareLocations(a, b []string) int {
	rank := func(at []string) int {
		if len(at) >= 2 {
			switch at[0] {
			case "nodes":
				return 1
			case "edges":
				return 2
			}
		}
		return 0
	}
	if r := cmp.Compare(rank(a), rank(b)); r != 0 {
		return r
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		ai, aErr := strconv.Atoi(a[i])
		bi, bErr := strconv.Atoi(b[i])
		var r int
		if aErr == nil && bErr == nil {
			r = cmp.Compare(ai, bi)
		} else {
			r = cmp.Compare(a[i], b[i])
		}
		if r != 0 {
			return r
		}
	}
	return cmp.Compare(len(a), len(b))
}

// scope is where a problem is: a node, an edge or the definition itself.
type scope struct {
	prefix string         // `node "a"`, `node #2`, `edge #1 (a → b)`; "" for the definition
	nodes  []string       // the node ids to blame
	code   string         // the code of its problems unless the field says otherwise
	rel    []string       // the location inside the node, edge or definition
	elem   map[string]any // the node or edge object, or the definition
	isNode bool
}

func scopeOf(doc map[string]any, at []string) scope {
	if len(at) >= 2 && (at[0] == "nodes" || at[0] == "edges") {
		i, _ := strconv.Atoi(at[1])
		arr, _ := doc[at[0]].([]any)
		var elem map[string]any
		if i < len(arr) {
			elem, _ = arr[i].(map[string]any)
		}
		sc := scope{code: model.CodeBadNode, rel: at[2:], elem: elem, nodes: []string{}}
		if at[0] == "nodes" {
			sc.isNode = true
			if id, _ := elem["id"].(string); id != "" {
				sc.prefix, sc.nodes = fmt.Sprintf("node %q", id), []string{id}
			} else {
				sc.prefix = fmt.Sprintf("node #%d", i+1)
			}
			return sc
		}
		from, _ := elem["from"].(string)
		to, _ := elem["to"].(string)
		switch id, _ := elem["id"].(string); {
		case elem == nil:
			sc.prefix = fmt.Sprintf("edge #%d", i+1)
		case id != "":
			sc.prefix = fmt.Sprintf("edge %q (%s → %s)", id, from, to)
		default:
			sc.prefix = fmt.Sprintf("edge #%d (%s → %s)", i+1, from, to)
		}
		for _, n := range []string{from, to} {
			if n != "" && !slices.Contains(sc.nodes, n) {
				sc.nodes = append(sc.nodes, n)
			}
		}
		return sc
	}
	return scope{code: model.CodeBadDefinition, rel: at, elem: doc, nodes: []string{}}
}

// say prefixes a message with the node or edge it is about.
func (sc scope) say(format string, args ...any) string {
	msg := fmt.Sprintf(format, args...)
	if sc.prefix == "" {
		return msg
	}
	return sc.prefix + ": " + msg
}

// fieldPath renders a location inside a node as a template author writes it: approvers.users[0].
func fieldPath(rel []string) string {
	var b strings.Builder
	for _, tok := range rel {
		if _, err := strconv.Atoi(tok); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// thenSuffix matches the schema location of a discriminator value's conditions, below the object's own schema.
var thenSuffix = regexp.MustCompile(`(/allOf/\d+)?/then$`)

// explain turns a problem into the errors a template author reads.
func (c *schemaChecker) explain(doc map[string]any, p problem) []model.ValidationError {
	sc := scopeOf(doc, p.at)
	f := fieldPath(sc.rel)
	code := sc.code
	if x, ok := c.fieldAnnotation(p.loc, "x-code").(string); ok {
		if _, foreign := p.kind.(*kind.FalseSchema); !foreign { // a misplaced field is a node problem, whatever it holds
			code = x
		}
	}
	one := func(msg string) []model.ValidationError {
		return []model.ValidationError{{Code: code, Message: msg, Nodes: sc.nodes}}
	}
	switch k := p.kind.(type) {
	case *kind.Type:
		if len(sc.rel) == 0 && sc.prefix != "" {
			return one(fmt.Sprintf("%s must be a JSON object, got %s", sc.prefix, article(k.Got)))
		}
		return one(sc.say("field %q: expected %s, got %s", f, wantList(k.Want), k.Got))
	case *kind.Enum:
		if forms, ok := c.fieldAnnotation(p.loc, "x-forms").(string); ok { // one form of several: name them all
			return one(sc.say("%s must be %s, not %s", f, forms, display(k.Got)))
		}
		if s, ok := k.Got.(string); ok && s == "" {
			return one(sc.say("%s is empty (one of %s)", f, enumList(k.Want)))
		}
		return one(sc.say("unknown %s %s (one of %s)", f, display(k.Got), enumList(k.Want)))
	case *kind.Required:
		var out []model.ValidationError
		for _, m := range k.Missing {
			out = append(out, c.missing(doc, sc, sc.rel, p.loc, m))
		}
		return out
	case *kind.MinLength:
		if k.Want <= 1 && len(sc.rel) > 0 {
			return []model.ValidationError{c.missing(doc, sc, sc.rel[:len(sc.rel)-1], parentObject(p.loc), sc.rel[len(sc.rel)-1])}
		}
		return one(sc.say("%s must be at least %d characters long", f, k.Want))
	case *kind.MaxLength:
		return one(sc.say("%s may be at most %d characters long", f, k.Want))
	case *kind.Pattern:
		msg, _ := c.fieldAnnotation(p.loc, "x-pattern-message").(string)
		switch {
		case msg == "":
			return one(sc.say("%s %q does not match %s", f, k.Got, k.Want))
		case strings.TrimSpace(k.Got) == "":
			return one(sc.say("%s %s", f, msg))
		}
		return one(sc.say("%s %q %s", f, k.Got, msg))
	case *kind.Minimum:
		return one(sc.say("%s must be at least %s, got %s", f, ratString(k.Want), ratString(k.Got)))
	case *kind.Maximum:
		return one(sc.say("%s must be at most %s, got %s", f, ratString(k.Want), ratString(k.Got)))
	case *kind.ExclusiveMinimum:
		return one(sc.say("%s must be more than %s, got %s", f, ratString(k.Want), ratString(k.Got)))
	case *kind.ExclusiveMaximum:
		return one(sc.say("%s must be less than %s, got %s", f, ratString(k.Want), ratString(k.Got)))
	case *kind.MinItems:
		return one(sc.say("%s needs at least %d item(s)", f, k.Want))
	case *kind.MaxItems:
		return one(sc.say("%s may have at most %d item(s)", f, k.Want))
	case *kind.Format:
		return one(sc.say("%s %v", f, k.Err))
	case *kind.FalseSchema:
		return one(c.foreign(doc, sc, p.loc))
	case *kind.AdditionalProperties:
		var out []model.ValidationError
		known := c.propertyNames(p.loc)
		hint := ""
		if len(known) <= 8 {
			hint = " (it has " + andList(known) + ")"
		}
		for _, name := range slices.Sorted(slices.Values(k.Properties)) {
			var msg string
			switch {
			case sc.prefix == "" && len(sc.rel) == 0:
				msg = fmt.Sprintf("unknown field %q in the definition%s", name, hint)
			case len(sc.rel) == 0:
				msg = sc.say("unknown field %q%s", name, hint)
			default:
				msg = sc.say("field %q: unknown field %q%s", f, name, hint)
			}
			out = append(out, model.ValidationError{Code: code, Message: msg, Nodes: sc.nodes})
		}
		return out
	case *kind.OneOf, *kind.AnyOf:
		if len(p.alts) == 0 {
			return one(sc.say("field %q matches more than one of its forms", f))
		}
		if forms, ok := c.fieldAnnotation(p.loc, "x-forms").(string); ok {
			return one(sc.say("%s must be %s, got %s", f, forms, article(jsonType(valueAt(doc, p.at)))))
		}
		return one(sc.say("field %q: expected %s, got %s", f, wantList(p.alts), jsonType(valueAt(doc, p.at))))
	}
	return one(sc.say("field %q: %v", f, p.kind))
}

// missing renders a field that is absent (or an empty string) where the object at rel needs one.
func (c *schemaChecker) missing(doc map[string]any, sc scope, rel []string, loc, prop string) model.ValidationError {
	base := thenSuffix.ReplaceAllString(loc, "")
	ps := asMap(c.pointer(base + "/properties/" + pointerToken(prop))) // its annotations sit beside any $ref
	code := sc.code
	if x, ok := ps["x-code"].(string); ok {
		code = x
	}
	obj := asMap(valueAt(sc.elem, rel))
	disc, value := c.discriminator(base, obj)
	needed := prop
	// A required object with a single field of its own is named by that field: catch.branch.
	if props := asMap(c.resolve(ps)["properties"]); len(props) == 1 {
		for sub := range props {
			needed = prop + "." + sub
		}
	}
	hint := ""
	if ex, ok := ps["examples"].([]any); ok && len(ex) > 0 {
		hint = ", e.g. " + display(ex[0])
	} else if d, _ := ps["description"].(string); d != "" && len(d) <= 80 && !strings.Contains(strings.TrimSuffix(d, "."), ".") {
		hint = ": " + strings.ToLower(d[:1]) + strings.TrimSuffix(d[1:], ".") // the field's help text, as a reminder
	}
	var msg string
	switch {
	case disc != "" && slices.Contains(stringList(ps["x-required-for"]), value) && len(rel) == 0 && sc.isNode:
		msg = fmt.Sprintf("%s %s needs %s%s", value, sc.prefix, needed, hint)
	case disc != "" && slices.Contains(stringList(ps["x-required-for"]), value):
		msg = sc.say("%s with %s %s needs %s%s", fieldPath(rel), disc, value, needed, hint)
	case len(rel) == 0 && sc.prefix == "":
		msg = fmt.Sprintf("the definition has no %s", needed)
	case len(rel) == 0:
		msg = fmt.Sprintf("%s has no %s", sc.prefix, needed)
	default:
		msg = sc.say("%s has no %s", fieldPath(rel), needed)
	}
	return model.ValidationError{Code: code, Message: msg, Nodes: sc.nodes}
}

// foreign renders a field that belongs to other values of its object's discriminator.
func (c *schemaChecker) foreign(doc map[string]any, sc scope, loc string) string {
	base := parentObject(loc)
	prop := sc.rel[len(sc.rel)-1]
	rel := sc.rel[:len(sc.rel)-1]
	owners := stringList(asMap(c.pointer(base + "/properties/" + pointerToken(prop)))["x-for"])
	disc, value := c.discriminator(base, asMap(valueAt(sc.elem, rel)))
	if len(rel) == 0 && sc.isNode {
		return sc.say("field %q does not apply to %s nodes (it belongs to %s nodes)", prop, value, strings.Join(owners, ", "))
	}
	return sc.say("field %q does not apply to %s %s (it belongs to %s %s)", fieldPath(sc.rel), disc, value, disc, strings.Join(owners, ", "))
}

// discriminator returns the name of the discriminator field of the object schema at base and its value in obj
// (its default when obj lacks it).
func (c *schemaChecker) discriminator(base string, obj map[string]any) (name, value string) {
	for p, ps := range asMap(c.pointer(base + "/properties")) {
		s := asMap(ps)
		if s["x-discriminator"] != true {
			continue
		}
		v, ok := obj[p].(string)
		if !ok {
			v, _ = s["default"].(string)
		}
		return p, v
	}
	return "", ""
}

// fieldAnnotation looks up an annotation on the schema at loc, or on the property schema around it (through
// items, anyOf and oneOf), stopping at the object the property belongs to.
func (c *schemaChecker) fieldAnnotation(loc, key string) any {
	for {
		if v, ok := asMap(c.pointer(loc))[key]; ok {
			return v
		}
		i := strings.LastIndex(loc, "/")
		if i < 0 {
			return nil
		}
		last, parent := loc[i+1:], loc[:i]
		switch {
		case last == "items":
			loc = parent
		case strings.HasSuffix(parent, "/anyOf"), strings.HasSuffix(parent, "/oneOf"):
			loc = parent[:strings.LastIndex(parent, "/")]
		default:
			return nil
		}
	}
}

// propertyNames lists the properties of the object schema at loc, sorted.
func (c *schemaChecker) propertyNames(loc string) []string {
	props := asMap(asMap(c.pointer(thenSuffix.ReplaceAllString(loc, "")))["properties"])
	return slices.Sorted(func(yield func(string) bool) {
		for k := range props {
			if !yield(k) {
				return
			}
		}
	})
}

// parentObject returns the location of the object schema a property schema belongs to.
func parentObject(loc string) string {
	if i := strings.LastIndex(loc, "/properties/"); i >= 0 {
		return loc[:i]
	}
	return loc
}

// decodePruned leaves out the values that cannot decode and decodes the rest. It returns nil when the
// definition's top level is not usable (nodes or edges are not arrays).
func decodePruned(doc map[string]any, probs []problem) (*model.Definition, error) {
	for _, p := range probs {
		switch {
		case p.prune == nil:
		case len(p.prune) == 1 && (p.prune[0] == "nodes" || p.prune[0] == "edges"):
			return nil, nil
		default:
			mark(doc, p.prune)
		}
	}
	b, err := json.Marshal(sweep(doc))
	if err != nil {
		return nil, err
	}
	var d model.Definition
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// pruned stands in for a value left out, until sweep removes it.
type pruned struct{}

func mark(v any, at []string) {
	if len(at) == 0 {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v[at[0]]; !ok {
			return
		}
		if len(at) == 1 {
			v[at[0]] = pruned{}
			return
		}
		mark(v[at[0]], at[1:])
	case []any:
		i, err := strconv.Atoi(at[0])
		if err != nil || i < 0 || i >= len(v) {
			return
		}
		if len(at) == 1 {
			v[i] = pruned{}
			return
		}
		mark(v[i], at[1:])
	}
}

func sweep(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if _, gone := e.(pruned); gone {
				delete(v, k)
				continue
			}
			v[k] = sweep(e)
		}
	case []any:
		out := v[:0]
		for _, e := range v {
			if _, gone := e.(pruned); !gone {
				out = append(out, sweep(e))
			}
		}
		return out
	}
	return v
}

func valueAt(v any, at []string) any {
	for _, tok := range at {
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func stringList(v any) []string {
	var out []string
	switch v := v.(type) {
	case string:
		out = append(out, v)
	case []any:
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// jsonType names the JSON type of a decoded value as the schema does.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "number"
}

func article(t string) string {
	switch t {
	case "null":
		return "null"
	case "array", "object", "integer":
		return "an " + t
	}
	return "a " + t
}

// wantList renders the JSON types a value may have: "a string", "true or false", "a string or a number".
func wantList(types []string) string {
	out := make([]string, 0, len(types))
	for _, t := range types {
		s := article(t)
		if t == "boolean" {
			s = "true or false"
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, " or ")
}

func enumList(vals []any) string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = fmt.Sprint(v)
	}
	return strings.Join(out, ", ")
}

// andList renders a, b and c.
func andList(items []string) string {
	switch len(items) {
	case 0:
		return "no fields"
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// display renders a JSON value in a message: strings quoted, the rest as JSON.
func display(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	if isWhole(f) {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}
