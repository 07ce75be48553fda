package graph_test

import (
	"strings"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/condition"
	"github.com/halley-bpm/halley/service/graph"
)

func parsed(t *testing.T, raw string) *model.Definition {
	t.Helper()
	d, errs := graph.Parse([]byte(raw))
	if d == nil || len(errs) > 0 {
		t.Fatalf("Parse: %v", errs)
	}
	return d
}

// Every node type has its own shape; ids are generated; conditional, default and branch edges are labelled.
func TestMermaidShapesAndEdges(t *testing.T) {
	d := parsed(t, def([]string{
		node("start", "start", `"name": "Apply"`, `"trigger": {"kind": "manual"}`),
		approval("lead", `"name": "Team lead"`, `"timeout": "1h"`, `"on_timeout": {"branch": "grant"}`),
		node("grant", "auto", `"name": "Grant"`, `"error_handler": {"operation": "catch", "catch": {"branch": "stop"}}`),
		node("wait", "delay", `"interval": 60`),
		node("cb", "callback", `"name": "Wait for CMDB"`, `"timeout": "1h"`, `"timeout_branch": "stop"`),
		node("oops", "error", `"name": "On error"`),
		node("stop", "terminate", `"name": "Stop"`),
		node("end", "end", `"name": "Done"`),
	},
		edge("start", "lead"),
		edge("lead", "grant", `"condition": {"days": {"$gt": 3}}`),
		edge("lead", "wait", `"default": true`),
		edge("grant", "end"), edge("wait", "cb"), edge("cb", "end"), edge("oops", "end"),
	))
	got := graph.Mermaid(d, nil, nil)
	want := `flowchart TD
    n0(["Apply"])
    n1["Team lead"]
    n2[["Grant"]]
    n3{{"wait"}}
    n4[/"Wait for CMDB"/]
    n5>"On error"]
    n6[\"Stop"/]
    n7((("Done")))
    n0 --> n1
    n1 -->|"{#quot;days#quot;:{#quot;$gt#quot;:3}}"| n2
    n1 -->|"default"| n3
    n2 --> n7
    n3 --> n4
    n4 --> n7
    n5 --> n7
    n1 -.->|"on timeout"| n2
    n2 -.->|"on error"| n6
    n4 -.->|"timeout"| n6
`
	if got != want {
		t.Errorf("Mermaid =\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(got, "classDef") {
		t.Error("classDef lines without states")
	}
}

// Any text renders: quotes, brackets, newlines, Mermaid's own syntax, and ids that are Mermaid keywords.
func TestMermaidEscaping(t *testing.T) {
	d := parsed(t, def([]string{
		node("start", "start", `"trigger": {"kind": "manual"}`),
		node("graph", "auto", `"name": "Say \"hi\" [now] {x} (y)\nline 2\r\n#3 | a<b>&c %%{init}%% `+"`md`"+`"`),
		node("end", "auto"),
		node("a-b", "end", `"name": "end"`),
	},
		edge("start", "graph"),
		edge("graph", "end", `"condition": {"name": {"$regex": "^\"x\"|y$"}}`),
		edge("end", "a-b"),
	))
	got := graph.Mermaid(d, nil, nil)
	for _, line := range []string{
		`    n0(["start"])`,
		`    n1[["Say #quot;hi#quot; [now] {x} (y)<br>line 2<br>#35;3 #124; a#lt;b#gt;#amp;c #37;#37;{init}#37;#37; #96;md#96;"]]`,
		`    n2[["end"]]`,
		`    n3((("end")))`,
		`    n1 -->|"{#quot;name#quot;:{#quot;$regex#quot;:#quot;^\#quot;x\#quot;#124;y$#quot;}}"| n2`,
		`    n2 --> n3`,
	} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("missing line %s in\n%s", line, got)
		}
	}
	// No raw node id is used as a Mermaid id, and every label is quoted.
	for _, l := range strings.Split(strings.TrimSpace(got), "\n")[1:] {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "n") {
			t.Errorf("line does not start with a generated id: %q", l)
		}
		if strings.Count(l, `"`)%2 != 0 {
			t.Errorf("unbalanced quotes: %q", l)
		}
		if strings.ContainsAny(l, "\r\t") {
			t.Errorf("control character in %q", l)
		}
	}
}

func TestMermaidStates(t *testing.T) {
	d := parsed(t, linear(node("a", "auto"), node("b", "auto"), node("c", "auto")))
	got := graph.Mermaid(d, map[string]model.NodeState{
		"start": "completed", "a": "completed", "b": "active", "c": "waiting", "end": "weird", "ghost": "failed",
	}, nil)
	for _, line := range []string{
		"    classDef active fill:#dbeafe,stroke:#2563eb,stroke-width:2px",
		"    classDef waiting fill:#fef9c3,stroke:#ca8a04,stroke-width:2px",
		"    classDef completed fill:#dcfce7,stroke:#16a34a",
		"    classDef rejected fill:#fee2e2,stroke:#dc2626",
		"    classDef skipped fill:#f3f4f6,stroke:#9ca3af,color:#6b7280,stroke-dasharray: 4 3",
		"    classDef failed fill:#fecaca,stroke:#b91c1c,stroke-width:2px",
		"    classDef cancelled fill:#e5e7eb,stroke:#6b7280,color:#6b7280",
		"    class n2 active",
		"    class n3 waiting",
		"    class n0,n1 completed",
	} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("missing line %q in\n%s", line, got)
		}
	}
	if strings.Contains(got, "weird") || strings.Contains(got, "class n4") || strings.Contains(got, " failed\n") {
		t.Errorf("unknown state or unknown node styled:\n%s", got)
	}
	// No entity may end a classDef: "#...;" would be read as an entity code.
	if strings.Contains(got, ";\n") {
		t.Errorf("a line ends in ';':\n%s", got)
	}
	// An empty, non-nil map still defines the classes (an instance with no node states yet).
	if got := graph.Mermaid(d, map[string]model.NodeState{}, nil); !strings.Contains(got, "classDef completed") || strings.Contains(got, "    class ") {
		t.Errorf("empty states:\n%s", got)
	}
}

func TestMermaidEdgeLabels(t *testing.T) {
	long := `{"department": {"$in": ["finance", "human-resources", "legal", "security", "audit"]}}`
	d := parsed(t, def([]string{start, node("a", "auto"), node("b", "auto"), end},
		edge("start", "a", `"condition": `+long),
		edge("start", "b", `"condition": {"level": {"$gte": 3}}`),
		edge("a", "end"), edge("b", "end"),
		edge("a", "ghost"), // an invalid draft: edges to missing nodes are left out
	))
	got := graph.Mermaid(d, nil, nil)
	// 59 characters of the compact JSON and an ellipsis.
	wantLabel := strings.ReplaceAll(`{"department":{"$in":["finance","human-resources","legal","…`, `"`, "#quot;")
	if !strings.Contains(got, `    n0 -->|"`+wantLabel+`"| n1`+"\n") {
		t.Errorf("long condition not cut to 60 characters:\n%s", got)
	}
	if strings.Contains(got, "ghost") || strings.Count(got, "-->") != 4 {
		t.Errorf("edge to a missing node drawn:\n%s", got)
	}

	// The server passes the condition compiler's text.
	label := func(e model.Edge) string {
		c, err := condition.Compile(e.Condition)
		if err != nil {
			return "invalid condition"
		}
		return c.String()
	}
	got = graph.Mermaid(d, nil, label)
	if !strings.Contains(got, `    n0 -->|"level #gt;= 3"| n2`+"\n") || !strings.Contains(got, `    n0 -->|"department in [finance,`) {
		t.Errorf("custom label not used:\n%s", got)
	}
	if !strings.Contains(got, "    n1 --> n3\n") {
		t.Errorf("an edge without condition got a label:\n%s", got)
	}
}

// Duplicate ids: the first node keeps the id; the diagram still has every node.
func TestMermaidDuplicateIDs(t *testing.T) {
	d := &model.Definition{
		Nodes: []model.Node{{ID: "a", Type: model.NodeStart}, {ID: "a", Type: model.NodeEnd}, {Type: model.NodeEnd}},
		Edges: []model.Edge{{From: "a", To: "a"}},
	}
	got := graph.Mermaid(d.Index(), map[string]model.NodeState{"a": "completed"}, nil)
	for _, line := range []string{`    n0(["a"])`, `    n1((("a")))`, `    n2((("end")))`, `    n0 --> n0`, `    class n0 completed`} {
		if !strings.Contains(got, line+"\n") {
			t.Errorf("missing %q in\n%s", line, got)
		}
	}
}

func TestMermaidInstanceEdgeStates(t *testing.T) {
	d, errs := graph.Parse([]byte(`{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
		{"id":"m","type":"approval","approvers":{"users":["mia"]}},{"id":"dir","type":"approval","approvers":{"users":["dan"]}},{"id":"end","type":"end"}],
		"edges":[{"from":"start","to":"m"},{"from":"m","to":"dir","condition":{"days":{"$gt":3}}},{"from":"m","to":"end","default":true},{"from":"dir","to":"end"}]}`))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	out := graph.MermaidInstance(d, map[string]model.NodeState{"start": "completed", "m": "completed", "dir": "rejected", "end": "skipped"},
		[]string{graph.EdgeTaken, graph.EdgeTaken, graph.EdgePruned, graph.EdgeKilled}, "dir", nil, nil)
	for _, line := range []string{
		`n1 -->|"default · pruned"| n3`,
		`n2 -->|"killed"| n3`,
		"linkStyle 0,1 " + graph.EdgeStyles[graph.EdgeTaken],
		"linkStyle 2 " + graph.EdgeStyles[graph.EdgePruned],
		"linkStyle 3 " + graph.EdgeStyles[graph.EdgeKilled],
		"style n2 " + graph.ErrorNodeStyle,
	} {
		if !strings.Contains(out, line) {
			t.Errorf("diagram lacks %q:\n%s", line, out)
		}
	}
	// Pruned and killed are drawn differently; without edge states no link is styled.
	if graph.EdgeStyles[graph.EdgePruned] == graph.EdgeStyles[graph.EdgeKilled] {
		t.Error("pruned and killed edges look the same")
	}
	if plain := graph.Mermaid(d, nil, nil); strings.Contains(plain, "linkStyle") {
		t.Errorf("a template diagram styles links:\n%s", plain)
	}
}

// TestMermaidIn: in a language, nodes are named by their label there (else their plain name, else their id), the
// edge words are that language's and every text stays escaped; "" is MermaidInstance's plain output.
func TestMermaidIn(t *testing.T) {
	d := parsed(t, `{"nodes":[
		{"id":"s","type":"start","trigger":{"kind":"manual"},"name":"Start","i18n":{"zh-CN":{"name":"提交 \"申请\" <#1>"}}},
		{"id":"a","type":"approval","approvers":{"users":["bob"]},"name":"Lead","timeout":"1h","on_timeout":{"branch":"e"},
		 "i18n":{"en":{"name":"Team lead"}}},
		{"id":"e","type":"end","join":"or"}],
	 "edges":[{"from":"s","to":"a"},{"from":"a","to":"e","condition":{"x":1}},{"from":"a","to":"e","default":true}]}`)
	label := func(model.Edge) string { return "x | y" }
	states := []string{graph.EdgeTaken, graph.EdgePruned, graph.EdgeKilled}
	if got, want := graph.MermaidIn("", d, nil, states, "", label, nil), graph.MermaidInstance(d, nil, states, "", label, nil); got != want {
		t.Fatalf("MermaidIn(\"\") differs from MermaidInstance:\n%s\n%s", got, want)
	}
	zh := graph.MermaidIn(model.LangZhCN, d, nil, states, "", label, map[string]string{"a": "1 已完成"})
	for _, line := range []string{`n0(["提交 #quot;申请#quot; #lt;#35;1#gt;"])`, `n1["Lead · 1 已完成"]`, `n2((("e")))`,
		`n1 -->|"x #124; y · 未选中"| n2`, `n1 -->|"默认 · 已中止"| n2`, `n1 -.->|"超时时"| n2`} {
		if !strings.Contains(zh, line) {
			t.Fatalf("zh-CN diagram lacks %q:\n%s", line, zh)
		}
	}
	en := graph.MermaidIn(model.LangEN, d, nil, states, "", label, nil)
	for _, line := range []string{`n0(["Start"])`, `n1["Team lead"]`, `n1 -->|"default · killed"| n2`, `n1 -.->|"on timeout"| n2`} {
		if !strings.Contains(en, line) {
			t.Fatalf("en diagram lacks %q:\n%s", line, en)
		}
	}
	if got := graph.CutLabel(strings.Repeat("天", 61)); got != strings.Repeat("天", 59)+"…" {
		t.Fatalf("CutLabel: %q", got)
	}
}
