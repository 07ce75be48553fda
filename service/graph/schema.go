package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"

	gojson "github.com/goccy/go-json"
	"github.com/halley-bpm/halley/model"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The JSON Schema of a definition (model.DefinitionSchema, generated from the Go types) checks its shape: unknown
// fields, JSON types, enumerations, required fields, lengths, patterns, ranges, durations, and the fields that
// belong to another node type, trigger kind or error-handler operation. This file compiles it once and turns what
// it finds into ValidationErrors with API.md's codes, naming the node and field at fault.

// schemaURL names the schema for the compiler (it is never fetched).
const schemaURL = "urn:halley:schemas:definition"

// schemaChecker is the compiled schema with the schema document beside it, whose annotations (x-code, x-for,
// x-pattern-message, examples) make its errors read as a template author needs them.
type schemaChecker struct {
	schema *jsonschema.Schema
	doc    map[string]any
}

// checker compiles the schema on first use. The schema is generated and tested with the code, so a binary whose
// embedded schema does not compile is broken: it panics, and every test says so at once.
var checker = sync.OnceValue(func() *schemaChecker {
	c, err := compileSchema(model.DefinitionSchema)
	if err != nil {
		panic(err)
	}
	return c
})

func compileSchema(text string) (*schemaChecker, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("graph: the definition schema is not JSON: %w", err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("graph: the definition schema is not a JSON object")
	}
	defs := asMap(m["$defs"])
	if m, ok = inlineRefs(m, defs, 0).(map[string]any); !ok {
		return nil, fmt.Errorf("graph: the definition schema is not a JSON object")
	}
	doc = m
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.RegisterFormat(&jsonschema.Format{Name: model.DurationFormat, Validate: checkDuration})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("graph: the definition schema: %w", err)
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("graph: compiling the definition schema: %w", err)
	}
	return &schemaChecker{schema: s, doc: m}, nil
}

// inlineRefs replaces each "$ref": "#/$defs/X" by a copy of X (the $ref's own annotations, such as a field's
// description, kept beside it). The validator then walks one schema per value instead of hopping through a
// reference for every node and edge and every object in them: about a tenth fewer allocations.
func inlineRefs(v any, defs map[string]any, depth int) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		ref, _ := v["$ref"].(string)
		if name, ok := strings.CutPrefix(ref, "#/$defs/"); ok && defs[name] != nil && depth < 16 {
			for k, e := range asMap(inlineRefs(defs[name], defs, depth+1)) {
				out[k] = e
			}
			for k, e := range v {
				if k != "$ref" {
					out[k] = inlineRefs(e, defs, depth+1)
				}
			}
			return out
		}
		for k, e := range v {
			if k == "$defs" {
				out[k] = e // kept for reference; no longer referred to
				continue
			}
			out[k] = inlineRefs(e, defs, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = inlineRefs(e, defs, depth+1)
		}
		return out
	}
	return v
}

// checkDuration accepts what model.Duration decodes, and refuses negative durations.
func checkDuration(v any) error {
	var raw []byte
	switch v := v.(type) {
	case string:
		raw, _ = json.Marshal(v)
	case json.Number:
		raw = []byte(v)
	default:
		return nil // not a string or a number: the schema's anyOf says so
	}
	var d model.Duration
	if err := d.UnmarshalJSON(raw); err != nil {
		if s, ok := v.(string); ok {
			return fmt.Errorf(`%q is not a duration such as "90s" or "1h30m", nor a number of seconds`, s)
		}
		return fmt.Errorf("%s seconds is out of range", v)
	}
	if d < 0 {
		return negativeDuration{d}
	}
	return nil
}

// negativeDuration is the format error of a duration that decodes but is refused.
type negativeDuration struct{ d model.Duration }

func (e negativeDuration) Error() string { return e.d.String() + " is negative" }

// Parse decodes a definition sent by a user and checks it against the definition schema. Every problem is
// reported, each naming its node; a field with a problem that keeps it from decoding (wrong JSON type, a field of
// another node type, an unparsable duration) is left out of the result. A field set to null counts as absent,
// and field names match as encoding/json matches them (case-insensitively).
//
// The definition is returned (indexed) whenever its top level is usable, so that the graph checks can go on and
// report everything at once; it is nil only when it is not. Parse checks the shape only: Check checks the
// meaning.
func Parse(raw []byte) (*model.Definition, []model.ValidationError) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, []model.ValidationError{model.NewValidationError(model.CodeBadDefinition, nil,
			"the definition must be a JSON object with nodes and edges, got %s", jsonKind(trimmed))}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
	if err != nil {
		return nil, []model.ValidationError{model.NewValidationError(model.CodeBadDefinition, nil,
			"the definition is not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))}
	}
	c := checker()
	if c.schema.Validate(doc) == nil {
		// The common case: the schema accepts exactly what the Go types decode. goccy/go-json decodes it several
		// times faster than encoding/json, with the same result (TestParseDecodersAgree).
		var w wireDefinition
		if err := gojson.Unmarshal(trimmed, &w); err == nil {
			return (*model.Definition)(&w).Index(), nil
		}
	}
	obj := doc.(map[string]any)
	c.normalize(obj, c.doc)
	probs := c.problems(obj)
	errs := make([]model.ValidationError, 0, len(probs))
	for _, p := range probs {
		errs = append(errs, c.explain(obj, p)...)
	}
	d, err := decodePruned(obj, probs)
	if err != nil {
		// The schema accepted a value the Go types cannot decode: a schema out of step with model/.
		errs = append(errs, model.NewValidationError(model.CodeBadDefinition, nil, "the definition cannot be read: %v", err))
	}
	return d, errs
}

// wireDefinition is model.Definition without its UnmarshalJSON (which decodes with encoding/json).
type wireDefinition model.Definition

// schemaErrors checks an already decoded definition (built in code, or read leniently) against the schema.
func schemaErrors(d *model.Definition) []model.ValidationError {
	b, err := json.Marshal(d)
	if err != nil {
		return []model.ValidationError{model.NewValidationError(model.CodeBadDefinition, nil, "the definition cannot be written as JSON: %v", err)}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return []model.ValidationError{model.NewValidationError(model.CodeBadDefinition, nil, "the definition cannot be written as JSON: %v", err)}
	}
	c := checker()
	obj := doc.(map[string]any)
	var errs []model.ValidationError
	for _, p := range c.problems(obj) {
		errs = append(errs, c.explain(obj, p)...)
	}
	return errs
}

// normalize makes a decoded definition what encoding/json would read into the Go types: in every object the
// schema types (not inside free-form values such as meta or a condition), members set to null are dropped and
// keys are renamed to the property they match regardless of case.
func (c *schemaChecker) normalize(v any, s map[string]any) {
	s = c.resolve(s)
	switch v := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		if props == nil {
			return
		}
		var renames [][2]string
		for k, val := range v {
			if val == nil {
				delete(v, k)
				continue
			}
			if _, ok := props[k]; ok {
				continue
			}
			for p := range props {
				if strings.EqualFold(p, k) {
					if _, taken := v[p]; !taken {
						renames = append(renames, [2]string{k, p})
					}
					break
				}
			}
		}
		for _, r := range renames {
			v[r[1]] = v[r[0]]
			delete(v, r[0])
		}
		for k, val := range v {
			if ps, ok := props[k].(map[string]any); ok {
				c.normalize(val, ps)
			}
		}
	case []any:
		items, _ := s["items"].(map[string]any)
		if items == nil {
			return
		}
		for _, e := range v {
			c.normalize(e, items)
		}
	}
}

// resolve follows a local $ref ("#/$defs/Node").
func (c *schemaChecker) resolve(s map[string]any) map[string]any {
	for range 8 {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		t, ok := c.pointer(strings.TrimPrefix(ref, "#")).(map[string]any)
		if !ok {
			return s
		}
		s = t
	}
	return s
}

// pointer resolves a JSON pointer in the schema document.
func (c *schemaChecker) pointer(ptr string) any {
	var cur any = c.doc
	if ptr == "" {
		return cur
	}
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = unescapePointer(tok)
		switch v := cur.(type) {
		case map[string]any:
			cur = v[tok]
		case []any:
			i := 0
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(v) {
				return nil
			}
			cur = v[i]
		default:
			return nil
		}
	}
	return cur
}

// jsonKind names the JSON kind of a raw value for messages.
func jsonKind(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// isWhole reports whether a JSON number is an integer (for messages: 1 rather than 1.0).
func isWhole(f float64) bool { return f == math.Trunc(f) && math.Abs(f) < 1e15 }
