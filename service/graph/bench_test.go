package graph_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/graph"
)

// bigDefinition builds a valid template of n nodes and about 2n edges: start, a chain of approval, auto, delay and
// callback nodes with a forward skip edge (every 10th one conditional) from each, and an end.
func bigDefinition(n int) *model.Definition {
	d := &model.Definition{Nodes: make([]model.Node, n), Edges: make([]model.Edge, 0, 2*n)}
	d.Nodes[0] = model.Node{ID: "start", Type: model.NodeStart, Trigger: model.Trigger{Kind: model.TriggerManual}}
	d.Nodes[n-1] = model.Node{ID: "end", Type: model.NodeEnd, Join: model.Join{Mode: model.JoinOr}}
	for i := 1; i < n-1; i++ {
		id := fmt.Sprintf("n%d", i)
		switch i % 4 {
		case 0:
			d.Nodes[i] = model.Node{ID: id, Type: model.NodeApproval, Name: "Approve " + id, Join: model.Join{Mode: model.JoinOr},
				Approvers: model.Approvers{Roles: []string{"dba"}}, Sign: model.SignVote, PassRatio: 0.5}
		case 1:
			d.Nodes[i] = model.Node{ID: id, Type: model.NodeAuto, Join: model.Join{Mode: model.JoinOr}, Plugins: model.Plugins{After: []string{"grant"}},
				ErrorHandler: model.ErrorHandler{Operation: model.ErrorOpRetry, Retry: model.RetryPolicy{Count: 3, Period: model.Duration(2e9)}}}
		case 2:
			d.Nodes[i] = model.Node{ID: id, Type: model.NodeDelay, Join: model.Join{Mode: model.JoinOr}, Interval: model.Duration(60e9)}
		case 3:
			d.Nodes[i] = model.Node{ID: id, Type: model.NodeCallback, Join: model.Join{Mode: model.JoinOr}, Timeout: model.Duration(3600e9)}
		}
	}
	id := func(i int) string { return d.Nodes[i].ID }
	for i := 0; i < n-1; i++ {
		d.Edges = append(d.Edges, model.Edge{From: id(i), To: id(i + 1)})
		if j := min(i+2+i%7, n-1); j != i+1 {
			e := model.Edge{From: id(i), To: id(j)}
			if i%10 == 0 {
				e.Condition = json.RawMessage(`{"level": {"$gte": 3}}`)
			}
			d.Edges = append(d.Edges, e)
		}
	}
	return d.Index()
}

func TestBigDefinitionIsValid(t *testing.T) {
	d := bigDefinition(10_000)
	if len(d.Nodes) != 10_000 || len(d.Edges) < 19_990 {
		t.Fatalf("%d nodes, %d edges", len(d.Nodes), len(d.Edges))
	}
	raw, _ := json.Marshal(d)
	if res := graph.Validate(raw, graph.Options{CheckCondition: checkCondition}); !res.Valid {
		t.Fatalf("not valid: %.500v", res.Errors)
	}
}

// BenchmarkValidate10k validates a 10,000-node, 20,000-edge definition built in code: the schema on its JSON form,
// then the graph and field checks.
func BenchmarkValidate10k(b *testing.B) {
	d := bigDefinition(10_000)
	b.ReportAllocs()
	for b.Loop() {
		if errs := graph.ValidateDefinition(d, graph.Options{}); len(errs) != 0 {
			b.Fatal(errs)
		}
	}
}

// BenchmarkCheck10k runs the checks a schema cannot express (the graph and the field rules) on a definition Parse
// returned: what publishing adds to parsing.
func BenchmarkCheck10k(b *testing.B) {
	d := bigDefinition(10_000)
	b.ReportAllocs()
	for b.Loop() {
		if errs := graph.Check(d, graph.Options{}); len(errs) != 0 {
			b.Fatal(errs)
		}
	}
}

// BenchmarkValidate10kRaw is the whole of POST /templates/validate: strict parsing of the JSON, then validation
// with the real condition compiler.
func BenchmarkValidate10kRaw(b *testing.B) {
	raw, _ := json.Marshal(bigDefinition(10_000))
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if res := graph.Validate(raw, graph.Options{CheckCondition: checkCondition}); !res.Valid {
			b.Fatal(res.Errors)
		}
	}
}

// BenchmarkValidate100Raw is POST /templates/validate (or a draft save) for a template of a realistic size: 100
// nodes, about 200 edges.
func BenchmarkValidate100Raw(b *testing.B) {
	raw, _ := json.Marshal(bigDefinition(100))
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if res := graph.Validate(raw, graph.Options{CheckCondition: checkCondition}); !res.Valid {
			b.Fatal(res.Errors)
		}
	}
}

// BenchmarkMermaid10k renders the 10,000-node definition with states.
func BenchmarkMermaid10k(b *testing.B) {
	d := bigDefinition(10_000)
	states := map[string]model.NodeState{}
	for i, n := range d.Nodes {
		states[n.ID] = []model.NodeState{"completed", "active", "waiting", "skipped"}[i%4]
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = graph.Mermaid(d, states, nil)
	}
}
