package graph_test

import (
	"testing"

	"github.com/halley-bpm/halley/model"
)

// TestValidateSubprocess: what validation says about a subprocess node's own fields (the template's existence and
// cycles are the publish check's, service/subprocess).
func TestValidateSubprocess(t *testing.T) {
	s := []string{"s"}
	runCases(t, []validationCase{
		{"valid", linear(node("s", "subprocess", `"template": "payment"`, `"input": {"amount": "total", "copy": "$"}`,
			`"output": {"paid": "pay.ok"}`, `"for_each": "lines"`, `"completion": {"min": 2}`)), nil},
		{"no template", linear(node("s", "subprocess")), []want{{model.CodeBadNode, s, `needs template`}}},
		{"bad template key", linear(node("s", "subprocess", `"template": "no such key!"`)), []want{{model.CodeBadNode, s, `is not a template key`}}},
		{"completion without for_each", linear(node("s", "subprocess", `"template": "p"`, `"completion": {"min": 1}`)),
			[]want{{model.CodeBadNode, s, `completion applies only with for_each`}}},
		{"completion min 0", linear(node("s", "subprocess", `"template": "p"`, `"for_each": "x"`, `"completion": {"min": 0}`)),
			[]want{{model.CodeBadNode, s, `completion`}}},
		{"completion any", linear(node("s", "subprocess", `"template": "p"`, `"for_each": "x"`, `"completion": "any"`)),
			[]want{{model.CodeBadNode, s, `completion`}}},
		{"bad path", linear(node("s", "subprocess", `"template": "p"`, `"input": {"a": "x|y"}`)), []want{{model.CodeBadNode, s, `not a pair of context paths`}}},
		{"item set by hand", linear(node("s", "subprocess", `"template": "p"`, `"for_each": "x"`, `"input": {"item": "y"}`)),
			[]want{{model.CodeBadNode, s, `item and index are set by the node`}}},
		{"timeout", linear(node("s", "subprocess", `"template": "p"`, `"timeout": "1h"`)),
			[]want{{model.CodeBadNode, s, `timeout does not apply to a subprocess node`}}},
		{"a field of another type", linear(node("s", "subprocess", `"template": "p"`, `"sign": "all"`)), []want{{model.CodeBadNode, s, `sign`}}},
	})
}
