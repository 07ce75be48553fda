package model_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
)

// mustParse parses a definition that must have no shape errors.
func mustParse(t *testing.T, raw string) *model.Definition {
	t.Helper()
	d, errs := model.ParseDefinition([]byte(raw))
	if len(errs) > 0 || d == nil {
		t.Fatalf("ParseDefinition: %v", errs)
	}
	return d
}

const fullDefinition = `{
  "meta": {"zoom": 1},
  "nodes": [
    {"id": "start", "type": "start", "name": "Apply", "trigger": {"kind": "manual"}},
    {"id": "lead", "type": "approval", "name": "Team lead", "join": "or",
     "approvers": {"users": ["bob"], "roles": ["lead"], "context": "approvers.lead", "relation": "initiator.manager"},
     "sign": "vote", "pass_ratio": 0.6, "timeout": "1h30m", "on_timeout": {"branch": "esc"},
     "form": {"fields": []}, "cc": {"roles": ["hr"]}, "is_ignore": false,
     "plugins": {"pre": ["notify"], "after": ["audit"]},
     "error_handler": {"operation": "retry", "retry": {"count": 3, "period": 2}},
     "meta": {"x": 10, "y": 20}},
    {"id": "groups", "type": "approval", "approvers": {"groups": [["a", "b"], ["c"]]}, "group_sign": "all"},
    {"id": "esc", "type": "approval", "approvers": {"groups_context": "chain.groups"}, "on_timeout": "approve", "timeout": "2h"},
    {"id": "wait", "type": "delay", "interval": 30},
    {"id": "until", "type": "delay", "until": "due_at"},
    {"id": "cb", "type": "callback", "timeout": "10m", "timeout_branch": "end", "message": "paid",
     "error_handler": {"operation": "catch", "catch": {"branch": "end"}}},
    {"id": "auto", "type": "auto", "plugins": {"after": ["grant"]}},
    {"id": "oops", "type": "error"},
    {"id": "stop", "type": "terminate"},
    {"id": "end", "type": "end"}
  ],
  "edges": [
    {"id": "e1", "from": "start", "to": "lead"},
    {"from": "lead", "to": "wait", "condition": {"days": {"$gt": 3}}, "meta": {"points": []}},
    {"from": "lead", "to": "end", "default": true}
  ]
}`

func TestParseDefinitionReadsEveryField(t *testing.T) {
	d := mustParse(t, fullDefinition)
	lead := d.Node("lead")
	if lead == nil {
		t.Fatal("Node(lead) = nil")
	}
	want := model.Node{
		ID: "lead", Type: model.NodeApproval, Name: "Team lead", Join: model.JoinOr,
		Plugins:      model.Plugins{Pre: []string{"notify"}, After: []string{"audit"}},
		Timeout:      model.Duration(90 * time.Minute),
		ErrorHandler: model.ErrorHandler{Operation: model.ErrorOpRetry, Retry: model.RetryPolicy{Count: 3, Period: model.Duration(2 * time.Second)}},
		CC:           model.Approvers{Roles: []string{"hr"}},
		Meta:         json.RawMessage(`{"x": 10, "y": 20}`),
		Approvers:    model.Approvers{Users: []string{"bob"}, Roles: []string{"lead"}, Context: "approvers.lead", Relation: model.RelationInitiatorManager},
		Sign:         model.SignVote, PassRatio: 0.6,
		OnTimeout: model.OnTimeout{Branch: "esc"},
		Form:      json.RawMessage(`{"fields": []}`),
	}
	if !reflect.DeepEqual(*lead, want) {
		t.Errorf("lead =\n%+v\nwant\n%+v", *lead, want)
	}
	if g := d.Node("groups"); !reflect.DeepEqual(g.Approvers.Groups, [][]string{{"a", "b"}, {"c"}}) || g.GroupSignMode() != model.SignAll || g.SignMode() != model.SignOr {
		t.Errorf("groups node = %+v", g)
	}
	if e := d.Node("esc"); e.OnTimeout != (model.OnTimeout{Action: model.TimeoutApprove}) || e.Approvers.GroupsContext != "chain.groups" {
		t.Errorf("esc node = %+v", e)
	}
	if w := d.Node("wait"); w.Interval.Std() != 30*time.Second {
		t.Errorf("interval = %v, want 30s", w.Interval)
	}
	if cb := d.Node("cb"); cb.TimeoutBranch != "end" || cb.Message != "paid" || cb.Timeout.Std() != 10*time.Minute ||
		cb.ErrorHandler.Op() != model.ErrorOpCatch || cb.ErrorHandler.Catch.Branch != "end" {
		t.Errorf("cb node = %+v", cb)
	}
	if a := d.Node("auto"); a.ErrorHandler.Op() != model.ErrorOpThrow || a.JoinMode() != model.JoinAnd {
		t.Errorf("defaults of auto node: op %q join %q", a.ErrorHandler.Op(), a.JoinMode())
	}
	if string(d.Meta) != `{"zoom": 1}` {
		t.Errorf("meta = %s", d.Meta)
	}
	if got := d.Edges[1]; string(got.Condition) != `{"days": {"$gt": 3}}` || !got.HasCondition() || got.Default {
		t.Errorf("edge 1 = %+v", got)
	}
	if !d.Edges[2].Default || d.Edges[2].HasCondition() || d.Edges[0].ID != "e1" {
		t.Errorf("edges = %+v", d.Edges)
	}
}

func TestDefinitionJSONRoundTrip(t *testing.T) {
	d := mustParse(t, fullDefinition)
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	again := mustParse(t, string(out))
	if !reflect.DeepEqual(normalize(t, d), normalize(t, again)) {
		t.Errorf("round trip changed the definition:\n%s", out)
	}
	// Zero values stay out of the JSON: an end node is just its id and type.
	if !strings.Contains(string(out), `{"id":"end","type":"end"}`) {
		t.Errorf("end node not minimal in %s", out)
	}
	if !strings.Contains(string(out), `"timeout":"1h30m0s"`) || !strings.Contains(string(out), `"on_timeout":{"branch":"esc"}`) {
		t.Errorf("durations or on_timeout not in their string forms: %s", out)
	}
}

// normalize re-encodes raw JSON fields so that whitespace does not matter to DeepEqual.
func normalize(t *testing.T, d *model.Definition) string {
	t.Helper()
	var v any
	b, _ := json.Marshal(d)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(v)
	return string(b)
}

func TestParseDefinitionStrict(t *testing.T) {
	node := func(fields string) string {
		return `{"nodes": [{"id": "start", "type": "start", "trigger": {"kind": "manual"}}, ` + fields + `], "edges": []}`
	}
	tests := []struct {
		name     string
		raw      string
		code     string
		nodes    []string
		contains string
	}{
		{"array instead of object", `[1, 2]`, model.CodeBadDefinition, nil, "must be a JSON object"},
		{"string", `"nodes"`, model.CodeBadDefinition, nil, "must be a JSON object"},
		{"empty input", ``, model.CodeBadDefinition, nil, "must be a JSON object"},
		{"broken JSON", `{"nodes": [`, model.CodeBadDefinition, nil, "not valid JSON"},
		{"nodes not an array", `{"nodes": {"a": 1}}`, model.CodeBadDefinition, nil, "nodes must be an array"},
		{"unknown top-level field", `{"nodes": [], "edges": [], "layout": {}}`, model.CodeBadDefinition, nil, `unknown field "layout"`},
		{"options not an object", `{"nodes": [], "options": "720h"}`, model.CodeBadDefinition, nil, "options must be an object, got a string"},
		{"unknown option", `{"nodes": [], "options": {"retention": "1h", "colour": "red"}}`, model.CodeBadDefinition, nil, `unknown option "colour"`},
		{"bad retention", `{"nodes": [], "options": {"retention": "a month"}}`, model.CodeBadDefinition, nil, `options.retention: invalid duration "a month"`},
		{"negative retention", `{"nodes": [], "options": {"retention": "-1h"}}`, model.CodeBadDefinition, nil, "options.retention must not be negative"},
		{"unknown node field", node(`{"id": "a", "type": "auto", "colour": "red"}`), model.CodeBadNode, []string{"a"}, `node "a": unknown field "colour"`},
		{"unknown node type", node(`{"id": "a", "type": "gateway"}`), model.CodeBadNode, []string{"a"}, `unknown type "gateway"`},
		{"field of another type", node(`{"id": "d", "type": "delay", "interval": "1m", "sign": "all"}`), model.CodeBadNode, []string{"d"},
			`node "d": field "sign" does not apply to delay nodes (it belongs to approval nodes)`},
		{"trigger on an approval", node(`{"id": "a", "type": "approval", "approvers": {"users": ["x"]}, "trigger": {"kind": "manual"}}`), model.CodeBadNode, []string{"a"},
			`field "trigger" does not apply to approval nodes`},
		{"string where a number goes", node(`{"id": "a", "type": "approval", "approvers": {"users": ["x"]}, "sign": "vote", "pass_ratio": "half"}`), model.CodeBadNode, []string{"a"},
			`field "pass_ratio": expected a number, got string`},
		{"number where a string goes", node(`{"id": "a", "type": "approval", "approvers": {"users": ["x"]}, "sign": 2}`), model.CodeBadNode, []string{"a"},
			`field "sign": expected a string, got number`},
		{"wrong type inside approvers", node(`{"id": "a", "type": "approval", "approvers": {"users": "bob"}}`), model.CodeBadNode, []string{"a"},
			`field "approvers.users": expected an array, got string`},
		{"unknown approvers field", node(`{"id": "a", "type": "approval", "approvers": {"user": ["bob"]}}`), model.CodeBadNode, []string{"a"},
			`field "approvers": unknown field "user"`},
		{"unknown error_handler field", node(`{"id": "a", "type": "auto", "error_handler": {"operation": "retry", "retry": {"count": 1, "delay": "1s"}}}`), model.CodeBadNode, []string{"a"},
			`unknown field "delay"`},
		{"unknown plugins field", node(`{"id": "a", "type": "auto", "plugins": {"before": ["x"]}}`), model.CodeBadNode, []string{"a"},
			`field "plugins": unknown field "before"`},
		{"unknown cc field", node(`{"id": "a", "type": "auto", "cc": {"emails": ["x@y"]}}`), model.CodeBadNode, []string{"a"},
			`field "cc": unknown field "emails"`},
		{"bad duration", node(`{"id": "a", "type": "auto", "timeout": "soon"}`), model.CodeBadNode, []string{"a"},
			`field "timeout": invalid duration "soon"`},
		{"bad on_timeout shape", node(`{"id": "a", "type": "approval", "approvers": {"users": ["x"]}, "timeout": "1h", "on_timeout": {"node": "b"}}`), model.CodeBadNode, []string{"a"},
			`unknown field "node"`},
		{"unknown trigger field", `{"nodes": [{"id": "s", "type": "start", "trigger": {"kind": "manual", "cron": "x"}}]}`, model.CodeBadNode, []string{"s"},
			`node "s": trigger: unknown field "cron"`},
		{"trigger field of another kind", `{"nodes": [{"id": "s", "type": "start", "trigger": {"kind": "manual", "expr": "* * * * *"}}]}`, model.CodeBadNode, []string{"s"},
			`node "s": trigger field "expr" does not apply to a manual trigger (it belongs to crontab)`},
		{"trigger field of the wrong type", `{"nodes": [{"id": "s", "type": "start", "trigger": {"kind": "crontab", "expr": "* * * * *", "allow_repeated": "yes"}}]}`, model.CodeBadNode, []string{"s"},
			`field "trigger.allow_repeated": expected true or false, got string`},
		{"node not an object", `{"nodes": [42]}`, model.CodeBadNode, nil, "node #1 must be a JSON object, got a number"},
		{"node id not a string", `{"nodes": [{"id": 7, "type": "end"}]}`, model.CodeBadNode, nil, "node #1: id must be a string"},
		{"unknown edge field", node(`{"id": "a", "type": "end"}`)[:len(node(`{"id": "a", "type": "end"}`))-3] + `[{"from": "start", "to": "a", "when": {}}]}`,
			model.CodeBadNode, []string{"start", "a"}, `edge #1 (start → a): unknown field "when"`},
		{"edge default not a bool", node(`{"id": "a", "type": "end"}`)[:len(node(`{"id": "a", "type": "end"}`))-3] + `[{"from": "start", "to": "a", "default": "yes"}]}`,
			model.CodeBadNode, []string{"start", "a"}, `field "default": expected true or false, got string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := model.ParseDefinition([]byte(tt.raw))
			for _, e := range errs {
				if e.Code == tt.code && strings.Contains(e.Message, tt.contains) {
					if want := orEmpty(tt.nodes); !slices.Equal(e.Nodes, want) {
						t.Errorf("nodes = %q, want %q", e.Nodes, want)
					}
					return
				}
			}
			t.Errorf("no %s error containing %q in %v", tt.code, tt.contains, errs)
		})
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func TestParseDefinitionReportsEveryProblemAndKeepsTheRest(t *testing.T) {
	raw := `{"nodes": [
	  {"id": "d", "type": "delay", "interval": "1m", "sign": "all", "colour": "red", "timeout": "x"},
	  {"id": "e", "type": "end"}
	], "edges": [{"from": "d", "to": "e"}]}`
	d, errs := model.ParseDefinition([]byte(raw))
	if d == nil {
		t.Fatal("definition is nil for a usable top level")
	}
	if len(errs) != 3 {
		t.Fatalf("want 3 errors (colour, sign, timeout), got %v", errs)
	}
	n := d.Node("d")
	if n.Sign != "" {
		t.Errorf("the foreign field sign was kept: %q", n.Sign)
	}
	if n.Interval.Std() != time.Minute || len(d.Outgoing("d")) != 1 || d.Node("e") == nil {
		t.Errorf("valid fields were lost: %+v", d)
	}
}

func TestParseDefinitionNilOnlyWhenUnusable(t *testing.T) {
	if d, errs := model.ParseDefinition([]byte(`{"nodes": "x"}`)); d != nil || len(errs) != 1 {
		t.Errorf("nodes not an array: d = %v, errs = %v", d, errs)
	}
	d, errs := model.ParseDefinition([]byte(`{}`))
	if d == nil || len(errs) != 0 || len(d.Nodes) != 0 {
		t.Errorf("empty object: d = %v, errs = %v", d, errs)
	}
}

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
	}{
		{`"2s"`, 2 * time.Second},
		{`"1h30m"`, 90 * time.Minute},
		{`"0"`, 0},
		{`""`, 0},
		{`"  "`, 0},
		{`null`, 0},
		{`30`, 30 * time.Second},
		{`1.5`, 1500 * time.Millisecond},
		{`"45"`, 45 * time.Second},
		{`0`, 0},
		{`"-5s"`, -5 * time.Second},
	}
	for _, tt := range tests {
		var d model.Duration
		if err := json.Unmarshal([]byte(tt.in), &d); err != nil {
			t.Errorf("Unmarshal(%s): %v", tt.in, err)
			continue
		}
		if d.Std() != tt.want {
			t.Errorf("Unmarshal(%s) = %v, want %v", tt.in, d.Std(), tt.want)
		}
		out, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if want := `"` + tt.want.String() + `"`; string(out) != want {
			t.Errorf("Marshal(%v) = %s, want %s", d, out, want)
		}
		var back model.Duration
		if err := json.Unmarshal(out, &back); err != nil || back != d {
			t.Errorf("round trip of %s: %v, %v", out, back, err)
		}
	}
	for _, bad := range []string{`"soon"`, `"5 parsecs"`, `true`, `{}`, `[]`, `1e300`} {
		var d model.Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("Unmarshal(%s) = %v, want an error", bad, d)
		}
	}
}

func TestOnTimeoutJSON(t *testing.T) {
	tests := []struct {
		in   string
		want model.OnTimeout
		out  string
	}{
		{`"approve"`, model.OnTimeout{Action: model.TimeoutApprove}, `"approve"`},
		{`"reject"`, model.OnTimeout{Action: model.TimeoutReject}, `"reject"`},
		{`"remind"`, model.OnTimeout{Action: model.TimeoutRemind}, `"remind"`},
		{`{"branch": "escalate"}`, model.OnTimeout{Branch: "escalate"}, `{"branch":"escalate"}`},
		{`null`, model.OnTimeout{}, `null`},
	}
	for _, tt := range tests {
		var o model.OnTimeout
		if err := json.Unmarshal([]byte(tt.in), &o); err != nil {
			t.Errorf("Unmarshal(%s): %v", tt.in, err)
			continue
		}
		if o != tt.want {
			t.Errorf("Unmarshal(%s) = %+v, want %+v", tt.in, o, tt.want)
		}
		out, err := json.Marshal(o)
		if err != nil || string(out) != tt.out {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", o, out, err, tt.out)
		}
	}
	for _, bad := range []string{`{"branch": ""}`, `{"branch": "a", "after": "1h"}`, `{}`, `3`, `["approve"]`} {
		var o model.OnTimeout
		if err := json.Unmarshal([]byte(bad), &o); err == nil {
			t.Errorf("Unmarshal(%s) = %+v, want an error", bad, o)
		}
	}
	// An unknown action still loads (a draft may hold one); validation reports it.
	var o model.OnTimeout
	if err := json.Unmarshal([]byte(`"escalate"`), &o); err != nil || o.Action != "escalate" {
		t.Errorf(`Unmarshal("escalate") = %+v, %v`, o, err)
	}
}

func TestDefinitionMarshalsArrays(t *testing.T) {
	b, err := json.Marshal(model.Definition{})
	if err != nil || string(b) != `{"nodes":[],"edges":[]}` {
		t.Errorf("Marshal(Definition{}) = %s, %v", b, err)
	}
	b, _ = json.Marshal(&model.Definition{Nodes: []model.Node{{ID: "e", Type: model.NodeEnd}}})
	if string(b) != `{"nodes":[{"id":"e","type":"end"}],"edges":[]}` {
		t.Errorf("Marshal = %s", b)
	}
}

func TestValidationErrorNodesNeverNull(t *testing.T) {
	b, err := json.Marshal(model.ValidationError{Code: model.CodeNoStart, Message: "m"})
	if err != nil || string(b) != `{"code":"no_start","message":"m","nodes":[]}` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
	b, _ = json.Marshal([]model.ValidationError{model.NewValidationError(model.CodeCycle, []string{"x", "y"}, "cycle %d", 1)})
	if string(b) != `[{"code":"cycle","message":"cycle 1","nodes":["x","y"]}]` {
		t.Errorf("Marshal = %s", b)
	}
}

func TestDefinitionLookups(t *testing.T) {
	d := mustParse(t, `{"nodes": [
	  {"id": "oops", "type": "error"},
	  {"id": "start", "type": "start", "trigger": {"kind": "manual"}},
	  {"id": "a", "type": "auto"}, {"id": "b", "type": "auto"}, {"id": "end", "type": "end"}
	], "edges": [
	  {"id": "1", "from": "start", "to": "a"}, {"id": "2", "from": "start", "to": "b"},
	  {"id": "3", "from": "a", "to": "end"}, {"id": "4", "from": "b", "to": "end"}, {"id": "5", "from": "oops", "to": "end"}
	]}`)
	check := func(t *testing.T, d *model.Definition) {
		t.Helper()
		if d.Start() == nil || d.Start().ID != "start" {
			t.Errorf("Start() = %v", d.Start())
		}
		if d.ErrorNode() == nil || d.ErrorNode().ID != "oops" {
			t.Errorf("ErrorNode() = %v", d.ErrorNode())
		}
		if n := d.Node("b"); n == nil || n.ID != "b" || n != &d.Nodes[3] {
			t.Errorf("Node(b) = %v", n)
		}
		if d.Node("nope") != nil {
			t.Error("Node(nope) != nil")
		}
		if got := edgeIDs(d.Outgoing("start")); !slices.Equal(got, []string{"1", "2"}) {
			t.Errorf("Outgoing(start) = %v", got)
		}
		if got := edgeIDs(d.Incoming("end")); !slices.Equal(got, []string{"3", "4", "5"}) {
			t.Errorf("Incoming(end) = %v", got)
		}
		if d.Outgoing("end") != nil || d.Incoming("start") != nil {
			t.Error("edges where there are none")
		}
	}
	check(t, d)

	// json.Unmarshal indexes too.
	var fromJSON model.Definition
	b, _ := json.Marshal(d)
	if err := json.Unmarshal(b, &fromJSON); err != nil {
		t.Fatal(err)
	}
	check(t, &fromJSON)

	// Built in code without Index: the lookups scan, with the same answers.
	plain := &model.Definition{Nodes: slices.Clone(d.Nodes), Edges: slices.Clone(d.Edges)}
	check(t, plain)

	// A changed definition is not answered from a stale index.
	d.Nodes = append(d.Nodes, model.Node{ID: "c", Type: model.NodeAuto})
	d.Edges = append(d.Edges, model.Edge{ID: "6", From: "c", To: "end"})
	if d.Node("c") == nil || len(d.Incoming("end")) != 4 {
		t.Error("stale index answered after nodes and edges were added")
	}

	// The caller owns the slices it gets.
	out := d.Outgoing("start")
	out[0].To = "changed"
	if d.Outgoing("start")[0].To != "a" {
		t.Error("Outgoing returned the definition's own storage")
	}
}

func edgeIDs(es []model.Edge) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

// TestDefinitionConcurrentReaders is meant for -race: a published definition is shared by goroutines.
func TestDefinitionConcurrentReaders(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"nodes": [{"id": "start", "type": "start", "trigger": {"kind": "manual"}}`)
	for i := range 100 {
		fmt.Fprintf(&sb, `, {"id": "n%d", "type": "auto"}`, i)
	}
	sb.WriteString(`], "edges": [`)
	for i := range 100 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"from": "start", "to": "n%d"}`, i)
	}
	sb.WriteString("]}")
	d := mustParse(t, sb.String())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				id := fmt.Sprintf("n%d", (i+g)%100)
				if n := d.Node(id); n == nil || n.ID != id {
					t.Errorf("Node(%s) = %v", id, n)
					return
				}
				if len(d.Incoming(id)) != 1 || d.Start() == nil {
					t.Errorf("lookups of %s failed", id)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(d.Outgoing("start")) != 100 {
		t.Errorf("Outgoing(start) has %d edges", len(d.Outgoing("start")))
	}
}

func TestTriggerHelpers(t *testing.T) {
	tr := model.Trigger{Kind: model.TriggerSyncAPI, AllowRemoteIPs: " 10.0.0.0/8, 1.2.3.4 ,::1,192.168.1.7/24"}
	ps, err := tr.RemoteIPPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("1.2.3.4/32"),
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("192.168.1.0/24"),
	}
	if !slices.Equal(ps, want) {
		t.Errorf("RemoteIPPrefixes = %v, want %v", ps, want)
	}
	if _, err := (model.Trigger{AllowRemoteIPs: "10.0.0.0/33"}).RemoteIPPrefixes(); err == nil {
		t.Error("a /33 was accepted")
	}
	if _, err := (model.Trigger{AllowRemoteIPs: "localhost"}).RemoteIPPrefixes(); err == nil {
		t.Error("a host name was accepted")
	}
	if ps, err := (model.Trigger{}).RemoteIPPrefixes(); err != nil || len(ps) != 0 {
		t.Errorf("empty allow list = %v, %v", ps, err)
	}
	if m := (model.Trigger{}).HTTPMethod(); m != "POST" {
		t.Errorf("default method = %s", m)
	}
	if m := (model.Trigger{Method: "get"}).HTTPMethod(); m != "GET" {
		t.Errorf("method = %s", m)
	}
	if l := (model.Trigger{}).Login(); l != model.LoginNone {
		t.Errorf("default login = %s", l)
	}
	start, end, err := (model.Trigger{StartAt: "2025-01-01T00:00:00Z"}).Window()
	if err != nil || !start.Equal(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) || !end.IsZero() {
		t.Errorf("Window = %v %v %v", start, end, err)
	}
	if _, _, err := (model.Trigger{EndAt: "tomorrow"}).Window(); err == nil {
		t.Error("end_at tomorrow was accepted")
	}
}

func TestForeignFields(t *testing.T) {
	n := model.Node{ID: "d", Type: model.NodeDelay, Interval: 5, Sign: "all", Message: "m", Trigger: model.Trigger{Kind: "manual"}}
	if got := n.ForeignFields(); !slices.Equal(got, []string{"trigger", "sign", "message"}) {
		t.Errorf("ForeignFields = %v", got)
	}
	if got := (&model.Node{Type: "gateway", Sign: "all"}).ForeignFields(); got != nil {
		t.Errorf("unknown type ForeignFields = %v", got)
	}
	tr := model.Trigger{Kind: model.TriggerCrontab, Expr: "* * * * *", Module: "m", Members: []string{"x"}}
	if got := tr.ForeignFields(); !slices.Equal(got, []string{"module", "members"}) {
		t.Errorf("trigger ForeignFields = %v", got)
	}
}

// TestParseDefinitionPathsAgree: a well-formed definition is read in one strict pass; a definition with any
// problem is read field by field. Both must build the same definition, which the test checks by adding an
// unknown top-level field (one bad_definition error) to force the second path.
func TestParseDefinitionPathsAgree(t *testing.T) {
	inputs := map[string]string{
		"every field": fullDefinition,
		"nulls count as absent": `{"nodes": [
		  {"id": "s", "type": "start", "trigger": {"kind": "manual", "expr": null, "form": null}, "sign": null, "meta": null},
		  {"id": "d", "type": "delay", "interval": "1m", "sign": null, "form": null, "on_timeout": null, "timeout": null},
		  {"id": "e", "type": "end", "plugins": null}
		], "edges": [{"from": "s", "to": "d", "condition": null, "default": null, "meta": null}, {"from": "d", "to": "e"}], "meta": null}`,
		"field names match case-insensitively, as encoding/json does": `{"Nodes": [
		  {"ID": "s", "Type": "start", "Trigger": {"Kind": "crontab", "EXPR": "* * * * *"}},
		  {"id": "a", "type": "approval", "Approvers": {"Users": ["bob"]}, "Sign": "all", "Timeout": "1h", "On_Timeout": "remind"},
		  {"id": "e", "type": "end"}
		], "EDGES": [{"From": "s", "To": "a"}, {"from": "a", "to": "e", "Default": false}]}`,
		"a trigger of an unknown kind keeps its fields": `{"nodes": [{"id": "s", "type": "start", "trigger": {"kind": "webhook", "expr": "x", "module": "m"}}]}`,
		"options":                           `{"nodes": [], "options": {"Retention": "720h"}}`,
		"options in seconds, null and zero": `{"nodes": [], "options": {"retention": 0}}`,
		"null options":                      `{"nodes": [], "options": null}`,
		"empty":                             `{}`,
	}
	for name, raw := range inputs {
		t.Run(name, func(t *testing.T) {
			clean, errs := model.ParseDefinition([]byte(raw))
			if clean == nil || len(errs) != 0 {
				t.Fatalf("ParseDefinition: %v", errs)
			}
			forced := strings.Replace(strings.TrimSpace(raw), "{", `{"zzz": 1, `, 1)
			if raw == "{}" {
				forced = `{"zzz": 1}`
			}
			each, errs := model.ParseDefinition([]byte(forced))
			if each == nil || len(errs) != 1 || errs[0].Code != model.CodeBadDefinition {
				t.Fatalf("forced field-by-field parse: %v", errs)
			}
			if !reflect.DeepEqual(clean.Nodes, each.Nodes) || !reflect.DeepEqual(clean.Edges, each.Edges) || !reflect.DeepEqual(clean.Meta, each.Meta) ||
				!reflect.DeepEqual(clean.Options, each.Options) {
				t.Errorf("the two parsers disagree:\none pass:  %+v\n%+v\nper field: %+v\n%+v", clean.Nodes, clean.Edges, each.Nodes, each.Edges)
			}
		})
	}
	d := mustParse(t, inputs["field names match case-insensitively, as encoding/json does"])
	if a := d.Node("a"); a == nil || a.Sign != model.SignAll || a.OnTimeout.Action != model.TimeoutRemind || d.Start().Trigger.Expr != "* * * * *" {
		t.Errorf("case-insensitive fields not read: %+v", d.Nodes)
	}
	if d := mustParse(t, inputs["nulls count as absent"]); d.Node("d").Sign != "" || d.Edges[0].Condition != nil || d.Meta != nil {
		t.Errorf("nulls not absent: %+v", d)
	}
	if d := mustParse(t, inputs["options"]); d.Options.Retention == nil || d.Options.Retention.Std() != 720*time.Hour {
		t.Errorf("options.retention not read: %+v", d.Options)
	}
	if d := mustParse(t, inputs["options in seconds, null and zero"]); d.Options.Retention == nil || *d.Options.Retention != 0 {
		t.Errorf(`"retention": 0 must be kept (keep forever), not dropped: %+v`, d.Options)
	}
	if d := mustParse(t, inputs["null options"]); d.Options.Retention != nil {
		t.Errorf("null options: %+v", d.Options)
	}
	// The option survives a round trip (the definition is stored as written and re-read at publish).
	b, _ := json.Marshal(mustParse(t, inputs["options"]))
	if back := mustParse(t, string(b)); back.Options.Retention == nil || back.Options.Retention.Std() != 720*time.Hour {
		t.Errorf("options lost in %s", b)
	}
	if b, _ := json.Marshal(mustParse(t, `{"nodes": []}`)); strings.Contains(string(b), "options") {
		t.Errorf("absent options are written: %s", b)
	}
}

// Problems that the one strict pass stops at are all reported, in node order, by the field-by-field pass.
func TestParseDefinitionNullEntries(t *testing.T) {
	_, errs := model.ParseDefinition([]byte(`{"nodes": [null, {"id": "e", "type": "end"}], "edges": [null]}`))
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Message)
	}
	want := []string{"node #1 must be a JSON object, got null", "edge #1 must be a JSON object, got null"}
	if !slices.Equal(msgs, want) {
		t.Errorf("errors = %q, want %q", msgs, want)
	}
}
