package template

import (
	"encoding/json"
	"testing"

	"github.com/halley-bpm/halley/model"
)

// linearSteps is a typical POST /instances/linear request: three steps, by user, role and relation.
var linearSteps = []LinearStep{
	{Name: "Team lead", Approvers: model.Approvers{Users: []string{"bob"}}},
	{Name: "Finance", Approvers: model.Approvers{Roles: []string{"finance"}}, Sign: model.SignAll},
	{Name: "Manager", Approvers: model.Approvers{Relation: model.RelationInitiatorManager}, Sign: model.SignVote, PassRatio: 0.6},
}

// BenchmarkLinearValidation is what POST /instances/linear spends validating and compiling its hidden template.
func BenchmarkLinearValidation(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		def := linearDefinition(linearSteps)
		raw, err := json.Marshal(&def)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := compile("linear-bench", 1, raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileStored is a template cache miss: a stored 3-step version compiled again.
func BenchmarkCompileStored(b *testing.B) {
	def := linearDefinition(linearSteps)
	raw, _ := json.Marshal(&def)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := compile("linear-bench", 1, raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLinear100Validation is the largest linear process (100 steps).
func BenchmarkLinear100Validation(b *testing.B) {
	steps := make([]LinearStep, 0, 100)
	for len(steps) < 100 {
		steps = append(steps, linearSteps...)
	}
	steps = steps[:100]
	b.ReportAllocs()
	for b.Loop() {
		def := linearDefinition(steps)
		raw, err := json.Marshal(&def)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := compile("linear-bench", 1, raw); err != nil {
			b.Fatal(err)
		}
	}
}
