package main

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/invopop/jsonschema"
)

// TestCommittedFilesAreFresh fails when model/definition.schema.json, the field reference in docs/templates.md or
// the state tables of docs/engine.md differ from what the Go types and the transition tables in model/ generate now.
func TestCommittedFilesAreFresh(t *testing.T) {
	t.Chdir("../../..")
	files, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.data) {
			t.Errorf("%s is stale: the Go types or the transition tables in model/ changed. Run `make generate` (it rewrites the "+
				"schema, the field reference of docs/templates.md, the state tables of docs/engine.md and the front end's types) "+
				"and commit the result.\nfirst difference: %s", f.path, firstDifference(got, f.data))
		}
	}
}

func firstDifference(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + itoa(i+1) + ":\n  committed: " + gl + "\n  generated: " + wl
		}
	}
	return "none"
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestSchemaEnumsMatchModelConstants: the enumerations of the schema come from jsonschema tags, the engine compares
// with model's constants; the two lists must not drift apart.
func TestSchemaEnumsMatchModelConstants(t *testing.T) {
	t.Chdir("../../..")
	s, err := buildSchema()
	if err != nil {
		t.Fatal(err)
	}
	enum := func(def, prop string) []string {
		t.Helper()
		d := s
		if def != "Definition" {
			d = s.Definitions[def]
		}
		ps, ok := d.Properties.Get(prop)
		if !ok {
			t.Fatalf("%s has no property %s", def, prop)
		}
		values := ps.Enum
		if len(values) == 0 && len(ps.OneOf) > 0 { // a union of forms (join): its string form
			values = ps.OneOf[0].Enum
		}
		var out []string
		for _, v := range values {
			out = append(out, v.(string))
		}
		return out
	}
	for _, c := range []struct {
		def, prop string
		want      []string
	}{
		{"Node", "type", []string{model.NodeStart, model.NodeApproval, model.NodeAuto, model.NodeDelay, model.NodeCallback, model.NodeSubprocess, model.NodeError, model.NodeEnd, model.NodeTerminate}},
		{"Node", "join", []string{model.JoinAnd, model.JoinOr}},
		{"Node", "sign", []string{model.SignOr, model.SignAll, model.SignSequential, model.SignVote}},
		{"Node", "group_sign", []string{model.SignOr, model.SignAll, model.SignSequential, model.SignVote}},
		{"Trigger", "kind", []string{model.TriggerManual, model.TriggerCrontab, model.TriggerSyncAPI, model.TriggerAsyncAPI, model.TriggerForm, model.TriggerMessage}},
		{"Trigger", "login_verification", []string{model.LoginNone, model.LoginToken, model.LoginPassword}},
		{"ErrorHandler", "operation", []string{model.ErrorOpThrow, model.ErrorOpRetry, model.ErrorOpIgnore, model.ErrorOpCatch}},
		{"Approvers", "relation", []string{model.RelationInitiatorManager, model.RelationInitiatorDepartmentLeader, model.RelationInitiatorManagers}},
	} {
		if got := enum(c.def, c.prop); !slices.Equal(got, c.want) {
			t.Errorf("%s.%s: schema enum %v, model constants %v", c.def, c.prop, got, c.want)
		}
	}
	// Lengths the stores keep.
	for _, c := range []struct {
		def, prop string
		max       int
	}{{"Node", "id", model.MaxNodeIDLen}, {"Node", "name", model.MaxNodeNameLen}, {"Node", "message", model.MaxMessageLen}, {"Trigger", "message", model.MaxMessageLen}} {
		ps, _ := s.Definitions[c.def].Properties.Get(c.prop)
		if ps.MaxLength == nil || int(*ps.MaxLength) != c.max {
			t.Errorf("%s.%s: maxLength %v, the store keeps %d", c.def, c.prop, ps.MaxLength, c.max)
		}
	}
	for _, prop := range []string{"users", "roles"} {
		ps, _ := s.Definitions["Approvers"].Properties.Get(prop)
		if ps.Items.MaxLength == nil || int(*ps.Items.MaxLength) != model.MaxPersonLen {
			t.Errorf("Approvers.%s: maxLength %v, the store keeps %d", prop, ps.Items.MaxLength, model.MaxPersonLen)
		}
	}
}

// TestEveryFieldIsDescribed: descriptions are the designer's help text and the docs' reference; a field without a
// doc comment has neither.
func TestEveryFieldIsDescribed(t *testing.T) {
	t.Chdir("../../..")
	s, err := buildSchema()
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, d *jsonschema.Schema) {
		if d.Properties == nil {
			return
		}
		for prop, ps := range d.Properties.FromOldest() {
			if strings.TrimSpace(ps.Description) == "" {
				t.Errorf("%s.%s has no doc comment", name, prop)
			}
		}
	}
	check("Definition", s)
	for name, d := range s.Definitions {
		check(name, d)
	}
}

// The annotations are checked when the schema is built: a mistake in a tag fails `make generate`.
type (
	twoDiscriminators struct {
		A string `json:"a" jsonschema:"enum=x" jsonschema_extras:"x-discriminator=true"`
		B string `json:"b" jsonschema:"enum=y" jsonschema_extras:"x-discriminator=true"`
	}
	unknownOwner struct {
		Kind string `json:"kind" jsonschema:"enum=x,enum=y" jsonschema_extras:"x-discriminator=true"`
		F    string `json:"f" jsonschema_extras:"x-for=z"`
	}
	requiredElsewhere struct {
		Kind string `json:"kind" jsonschema:"enum=x,enum=y" jsonschema_extras:"x-discriminator=true"`
		F    string `json:"f" jsonschema_extras:"x-for=x,x-required-for=y"`
	}
	ownerWithoutDiscriminator struct {
		F string `json:"f" jsonschema_extras:"x-for=x"`
	}
	unknownCode struct {
		F string `json:"f" jsonschema_extras:"x-code=bad_thing"`
	}
)

func TestDiscriminateRefusesMistakes(t *testing.T) {
	for _, v := range []any{twoDiscriminators{}, unknownOwner{}, requiredElsewhere{}, ownerWithoutDiscriminator{}, unknownCode{}} {
		s := (&jsonschema.Reflector{ExpandedStruct: true}).Reflect(v)
		if err := discriminate(reflect.TypeOf(v).Name(), s); err == nil {
			t.Errorf("%T: no error", v)
		}
	}
}

// TestDiscriminateWritesConditions: on a small type, what the annotations become.
func TestDiscriminateWritesConditions(t *testing.T) {
	type op struct {
		Op string `json:"op" jsonschema:"enum=a,enum=b,enum=c,default=a" jsonschema_extras:"x-discriminator=true"`
		X  string `json:"x" jsonschema_extras:"x-for=b,x-required-for=b"`
		Y  string `json:"y" jsonschema_extras:"x-for=a,x-for=c"`
	}
	s := (&jsonschema.Reflector{ExpandedStruct: true, Anonymous: true}).Reflect(op{})
	if err := discriminate("op", s); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"dependentSchemas": s.DependentSchemas, "if": s.If, "then": s.Then})
	// y belongs to the default, so an absent op is fine for it; x needs op b, which must be given.
	want := `{"dependentSchemas":{"x":{"properties":{"op":{"enum":["b"]}},"required":["op"]},"y":{"properties":{"op":{"enum":["a","c"]}}}},` +
		`"if":{"properties":{"op":{"const":"b"}},"required":["op"]},"then":{"required":["x"]}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
