package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/halley-bpm/halley/model"
	"github.com/invopop/jsonschema"
	orderedmap "github.com/pb33f/ordered-map/v2"
)

// The extension keywords model's jsonschema_extras tags write (their meaning is in model/definition.go).
const (
	xDiscriminator = "x-discriminator"
	xFor           = "x-for"
	xRequiredFor   = "x-required-for"
	xCode          = "x-code"
	xForms         = "x-forms"
)

// buildSchema reflects model.Definition into a JSON Schema (draft 2020-12). It must run in the repository root:
// the descriptions come from the doc comments of the Go files under model/.
func buildSchema() (*jsonschema.Schema, error) {
	r := &jsonschema.Reflector{
		Anonymous:                  true, // served at a URL of its own; no $id to keep in step with it
		ExpandedStruct:             true, // the root is the definition itself, not a $ref to it
		RequiredFromJSONSchemaTags: true, // only `jsonschema:"required"` makes a field required (omitempty is about output)
		Mapper:                     mapType,
	}
	pkg := reflect.TypeFor[model.Definition]().PkgPath() // github.com/halley-bpm/halley/model
	if err := r.AddGoComments(strings.TrimSuffix(pkg, "/model"), "model"); err != nil {
		return nil, fmt.Errorf("schemagen: reading the doc comments of model/: %w", err)
	}
	s := r.Reflect(&model.Definition{})
	s.Title = "Halley process definition"
	for _, name := range sortedKeys(s.Definitions) {
		if err := discriminate(name, s.Definitions[name]); err != nil {
			return nil, err
		}
	}
	if err := discriminate("Definition", s); err != nil {
		return nil, err
	}
	tidyDescriptions(s)
	return s, nil
}

// tidyDescriptions puts each description on one line: doc comments wrap at 120 columns, help text should not.
func tidyDescriptions(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	s.Description = strings.Join(strings.Fields(s.Description), " ")
	for _, d := range s.Definitions {
		tidyDescriptions(d)
	}
	if s.Properties != nil {
		for _, p := range s.Properties.FromOldest() {
			tidyDescriptions(p)
		}
	}
	tidyDescriptions(s.Items)
	for _, sub := range append(append(s.OneOf, s.AnyOf...), s.AllOf...) {
		tidyDescriptions(sub)
	}
}

// mapType gives the schema of the types whose JSON form is not their Go shape: they have MarshalJSON and
// UnmarshalJSON of their own, and their schema must accept exactly what those accept (service/graph decodes a
// definition the schema accepted without further checks). A union of forms says in "x-forms" how its forms read
// to a template author: a value that fits none is told all of them, not only those of its own JSON type.
func mapType(t reflect.Type) *jsonschema.Schema {
	switch t {
	case reflect.TypeFor[model.Duration]():
		// A Go duration string ("90s", "1h30m") or a number of seconds; the format's checker (service/graph)
		// parses it as Duration.UnmarshalJSON does and refuses negative durations.
		return &jsonschema.Schema{
			AnyOf:  []*jsonschema.Schema{{Type: "string"}, {Type: "number"}},
			Format: model.DurationFormat,
		}
	case reflect.TypeFor[model.OnTimeout]():
		return &jsonschema.Schema{Extras: map[string]any{xForms: `"approve", "reject", "remind" or {"branch": "node-id"}`}, OneOf: []*jsonschema.Schema{
			{Type: "string", Enum: []any{model.TimeoutApprove, model.TimeoutReject, model.TimeoutRemind}},
			{
				Type:                 "object",
				Properties:           withProperty("branch", &jsonschema.Schema{Type: "string", MinLength: ptr(uint64(1)), Description: "The node to go to."}),
				Required:             []string{"branch"},
				AdditionalProperties: jsonschema.FalseSchema,
			},
		}}
	case reflect.TypeFor[model.Completion]():
		return &jsonschema.Schema{
			OneOf: []*jsonschema.Schema{
				{Type: "string", Enum: []any{model.CompletionAll}},
				{Type: "object", Properties: withProperty("min", &jsonschema.Schema{Type: "integer", Minimum: json.Number("1"),
					Description: "How many children must complete; the rest are then terminated."}), Required: []string{"min"}, AdditionalProperties: jsonschema.FalseSchema},
			},
			Default: model.CompletionAll,
			Extras:  map[string]any{xForms: `"all" or {"min": N}`},
		}
	case reflect.TypeFor[model.Join]():
		props := withProperty("min", &jsonschema.Schema{Type: "integer", Minimum: json.Number("1"),
			Description: "How many taken incoming edges activate the node, at least 1 and at most the node's incoming edges."})
		props.Set("cancel_rest", &jsonschema.Schema{Type: "boolean",
			Description: "Cancel the branches still running that can only lead into the node once it activated (cancelling partial join)."})
		return &jsonschema.Schema{
			OneOf: []*jsonschema.Schema{
				{Type: "string", Enum: []any{model.JoinAnd, model.JoinOr}},
				{Type: "object", Properties: props, Required: []string{"min"}, AdditionalProperties: jsonschema.FalseSchema},
			},
			Default: model.JoinAnd,
			Extras:  map[string]any{xForms: `"and", "or" or {"min": N}`},
		}
	}
	return nil
}

// discriminate turns the x-discriminator / x-for / x-required-for annotations of an object schema into
// keywords. A field that belongs to some values of the discriminator gets a dependentSchemas entry (when the field
// is present, the discriminator must be one of its values); a value that needs fields gets an if/then. A
// discriminator value equal to its default also applies when the discriminator is absent.
//
// dependentSchemas rather than one if/then per value keeps validation fast: its checks run only for the fields a
// node has, not for every node type on every node.
func discriminate(name string, s *jsonschema.Schema) error {
	if s.Properties == nil {
		return nil
	}
	var disc string
	var values []string
	owners := map[string][]string{}     // property → the discriminator values it belongs to
	requiredBy := map[string][]string{} // property → the values that need it
	var owned []string                  // properties with x-for, in order
	for prop, ps := range s.Properties.FromOldest() {
		if ps.Extras[xDiscriminator] == true {
			if disc != "" {
				return fmt.Errorf("schemagen: %s has two discriminators, %s and %s", name, disc, prop)
			}
			disc = prop
			for _, v := range ps.Enum {
				values = append(values, v.(string))
			}
		}
		if code, ok := ps.Extras[xCode].(string); ok && !slices.Contains(knownCodes, code) {
			return fmt.Errorf("schemagen: %s.%s: x-code %q is not a validation code", name, prop, code)
		}
		if f := list(ps.Extras[xFor]); len(f) > 0 {
			owners[prop] = f
			ps.Extras[xFor] = f
			owned = append(owned, prop)
		}
		if rf := list(ps.Extras[xRequiredFor]); len(rf) > 0 {
			requiredBy[prop] = rf
			ps.Extras[xRequiredFor] = rf
		}
	}
	if disc == "" {
		if len(owned) > 0 {
			return fmt.Errorf("schemagen: %s has x-for fields (%s) but no x-discriminator field", name, strings.Join(owned, ", "))
		}
		return nil
	}
	if len(values) == 0 {
		return fmt.Errorf("schemagen: %s.%s is the discriminator but has no enum", name, disc)
	}
	discSchema, _ := s.Properties.Get(disc)
	byDefault := func(vs ...string) bool {
		return discSchema.Default != nil && slices.Contains(vs, fmt.Sprint(discSchema.Default))
	}
	s.DependentSchemas = nil
	for _, p := range owned {
		var enum []any
		for _, v := range owners[p] {
			if !slices.Contains(values, v) {
				return fmt.Errorf("schemagen: %s.%s: x-for %q is not a value of %s", name, p, v, disc)
			}
			enum = append(enum, v)
		}
		for _, v := range requiredBy[p] {
			if !slices.Contains(owners[p], v) {
				return fmt.Errorf("schemagen: %s.%s: x-required-for %q is not among its x-for", name, p, v)
			}
		}
		dep := &jsonschema.Schema{Properties: withProperty(disc, &jsonschema.Schema{Enum: enum})}
		if !byDefault(owners[p]...) {
			dep.Required = []string{disc}
		}
		if s.DependentSchemas == nil {
			s.DependentSchemas = map[string]*jsonschema.Schema{}
		}
		s.DependentSchemas[p] = dep
	}
	s.AllOf = nil
	for _, v := range values {
		var needed []string
		for _, p := range owned {
			if slices.Contains(requiredBy[p], v) {
				needed = append(needed, p)
			}
		}
		if len(needed) == 0 {
			continue
		}
		cond := &jsonschema.Schema{Properties: withProperty(disc, &jsonschema.Schema{Const: v})}
		if !byDefault(v) {
			cond.Required = []string{disc}
		}
		s.AllOf = append(s.AllOf, &jsonschema.Schema{If: cond, Then: &jsonschema.Schema{Required: needed}})
	}
	if len(s.AllOf) == 1 { // one condition needs no allOf around it (a node is checked a little faster)
		s.If, s.Then, s.AllOf = s.AllOf[0].If, s.AllOf[0].Then, nil
	}
	return nil
}

// knownCodes are the validation codes a field's x-code may name.
var knownCodes = []string{model.CodeBadNode, model.CodeBadCron, model.CodeBadCondition, model.CodeUnknownNode, model.CodeBadDefinition}

// list reads an extras value: one string, or several (a repeated key).
func list(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []string:
		return v
	}
	return nil
}

// withProperty returns properties holding just this one.
func withProperty(name string, s *jsonschema.Schema) *orderedmap.OrderedMap[string, *jsonschema.Schema] {
	p := jsonschema.NewProperties()
	p.Set(name, s)
	return p
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func ptr[T any](v T) *T { return &v }

// marshal writes the schema as the committed file holds it: indented, one trailing newline.
func marshal(s *jsonschema.Schema) ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("schemagen: %w", err)
	}
	return append(b, '\n'), nil
}
