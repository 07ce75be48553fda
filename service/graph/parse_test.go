package graph_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/graph"
)

// Parse reads a definition from a user: strictly, through the definition schema.

// mustParse parses a definition that must have no shape errors.
func mustParse(t *testing.T, raw string) *model.Definition {
	t.Helper()
	d, errs := graph.Parse([]byte(raw))
	if len(errs) > 0 || d == nil {
		t.Fatalf("Parse: %v", errs)
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

func TestParseReadsEveryField(t *testing.T) {
	d := mustParse(t, fullDefinition)
	lead := d.Node("lead")
	if lead == nil {
		t.Fatal("Node(lead) = nil")
	}
	want := model.Node{
		ID: "lead", Type: model.NodeApproval, Name: "Team lead", Join: model.Join{Mode: model.JoinOr},
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

func TestParseStrict(t *testing.T) {
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
		{"nodes not an array", `{"nodes": {"a": 1}}`, model.CodeBadDefinition, nil, `field "nodes": expected an array`},
		{"unknown top-level field", `{"nodes": [], "edges": [], "layout": {}}`, model.CodeBadDefinition, nil, `unknown field "layout"`},
		{"options not an object", `{"nodes": [], "options": "720h"}`, model.CodeBadDefinition, nil, `field "options": expected an object, got string`},
		{"unknown option", `{"nodes": [], "options": {"retention": "1h", "colour": "red"}}`, model.CodeBadDefinition, nil, `unknown field "colour"`},
		{"bad retention", `{"nodes": [], "options": {"retention": "a month"}}`, model.CodeBadDefinition, nil, `"a month" is not a duration`},
		{"negative retention", `{"nodes": [], "options": {"retention": "-1h"}}`, model.CodeBadDefinition, nil, `is negative`},
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
			`timeout "soon" is not a duration`},
		{"bad on_timeout shape", node(`{"id": "a", "type": "approval", "approvers": {"users": ["x"]}, "timeout": "1h", "on_timeout": {"node": "b"}}`), model.CodeBadNode, []string{"a"},
			`unknown field "node"`},
		{"unknown trigger field", `{"nodes": [{"id": "s", "type": "start", "trigger": {"kind": "manual", "cron": "x"}}]}`, model.CodeBadNode, []string{"s"},
			`node "s": field "trigger": unknown field "cron"`},
		{"trigger field of another kind", `{"nodes": [{"id": "s", "type": "start", "trigger": {"kind": "manual", "expr": "* * * * *"}}]}`, model.CodeBadNode, []string{"s"},
			`node "s": field "trigger.expr" does not apply to kind manual (it belongs to kind crontab)`},
		{"trigger field of the wrong type", `{"nodes": [{"id": "s", "type": "start", "trigger": {"kind": "crontab", "expr": "* * * * *", "allow_repeated": "yes"}}]}`, model.CodeBadNode, []string{"s"},
			`field "trigger.allow_repeated": expected true or false, got string`},
		{"node not an object", `{"nodes": [42]}`, model.CodeBadNode, nil, "node #1 must be a JSON object, got a number"},
		{"node id not a string", `{"nodes": [{"id": 7, "type": "end"}]}`, model.CodeBadNode, nil, `node #1: field "id": expected a string`},
		{"unknown edge field", node(`{"id": "a", "type": "end"}`)[:len(node(`{"id": "a", "type": "end"}`))-3] + `[{"from": "start", "to": "a", "when": {}}]}`,
			model.CodeBadNode, []string{"start", "a"}, `edge #1 (start → a): unknown field "when"`},
		{"edge default not a bool", node(`{"id": "a", "type": "end"}`)[:len(node(`{"id": "a", "type": "end"}`))-3] + `[{"from": "start", "to": "a", "default": "yes"}]}`,
			model.CodeBadNode, []string{"start", "a"}, `field "default": expected true or false, got string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := graph.Parse([]byte(tt.raw))
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

func TestParseReportsEveryProblemAndKeepsTheRest(t *testing.T) {
	raw := `{"nodes": [
	  {"id": "d", "type": "delay", "interval": "1m", "sign": "all", "colour": "red", "timeout": "x"},
	  {"id": "e", "type": "end"}
	], "edges": [{"from": "d", "to": "e"}]}`
	d, errs := graph.Parse([]byte(raw))
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

func TestParseNilOnlyWhenUnusable(t *testing.T) {
	if d, errs := graph.Parse([]byte(`{"nodes": "x"}`)); d != nil || len(errs) != 1 {
		t.Errorf("nodes not an array: d = %v, errs = %v", d, errs)
	}
	d, errs := graph.Parse([]byte(`{}`))
	if d == nil || len(errs) != 0 || len(d.Nodes) != 0 {
		t.Errorf("empty object: d = %v, errs = %v", d, errs)
	}
}

// TestParsePathsAgree: a definition the schema accepts is decoded straight from its JSON; a definition with any
// problem is decoded from what is left once the values with problems are left out. Both must build the same
// definition (the same JSON: raw fields such as meta may differ in white space), which the test checks by adding
// an unknown top-level field (one bad_definition error) to force the second path.
func TestParsePathsAgree(t *testing.T) {
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
		"options":                           `{"nodes": [], "options": {"Retention": "720h"}}`,
		"options in seconds, null and zero": `{"nodes": [], "options": {"retention": 0}}`,
		"null options":                      `{"nodes": [], "options": null}`,
		"empty":                             `{}`,
	}
	for name, raw := range inputs {
		t.Run(name, func(t *testing.T) {
			clean, errs := graph.Parse([]byte(raw))
			if clean == nil || len(errs) != 0 {
				t.Fatalf("Parse: %v", errs)
			}
			forced := strings.Replace(strings.TrimSpace(raw), "{", `{"zzz": 1, `, 1)
			if raw == "{}" {
				forced = `{"zzz": 1}`
			}
			each, errs := graph.Parse([]byte(forced))
			if each == nil || len(errs) != 1 || errs[0].Code != model.CodeBadDefinition {
				t.Fatalf("forced field-by-field parse: %v", errs)
			}
			if a, b := normalize(t, clean), normalize(t, each); a != b {
				t.Errorf("the two paths disagree:\nstraight: %s\npruned:   %s", a, b)
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
	// The option survives a round trip (the definition is stored as written and re-read at publish), and the
	// engine's lenient decoder reads it as Parse does.
	b, _ := json.Marshal(mustParse(t, inputs["options"]))
	if back := mustParse(t, string(b)); back.Options.Retention == nil || back.Options.Retention.Std() != 720*time.Hour {
		t.Errorf("options lost in %s", b)
	}
	var stored model.Definition
	if err := json.Unmarshal(b, &stored); err != nil || stored.Options.Retention == nil || stored.Options.Retention.Std() != 720*time.Hour {
		t.Errorf("a stored definition's options not read: %+v, %v", stored.Options, err)
	}
	if b, _ := json.Marshal(mustParse(t, `{"nodes": []}`)); strings.Contains(string(b), "options") {
		t.Errorf("absent options are written: %s", b)
	}
}

// A trigger of an unknown kind is reported once, for its kind; its other fields are not reported as foreign, and
// are kept.
func TestParseUnknownTriggerKindKeepsItsFields(t *testing.T) {
	d, errs := graph.Parse([]byte(`{"nodes": [{"id": "s", "type": "start", "trigger": {"kind": "webhook", "expr": "x", "module": "m"}}]}`))
	if len(errs) != 1 || !strings.Contains(errs[0].Message, `unknown trigger.kind "webhook"`) || !slices.Equal(errs[0].Nodes, []string{"s"}) {
		t.Fatalf("errors = %v", errs)
	}
	if tr := d.Node("s").Trigger; tr.Kind != "webhook" || tr.Expr != "x" || tr.Module != "m" {
		t.Errorf("trigger = %+v", tr)
	}
}

// Problems are all reported, in node order, then edge order.
func TestParseNullEntries(t *testing.T) {
	_, errs := graph.Parse([]byte(`{"nodes": [null, {"id": "e", "type": "end"}], "edges": [null]}`))
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Message)
	}
	want := []string{"node #1 must be a JSON object, got null", "edge #1 must be a JSON object, got null"}
	if !slices.Equal(msgs, want) {
		t.Errorf("errors = %q, want %q", msgs, want)
	}
}

// TestParseDecodersAgree: Parse decodes a definition the schema accepts with goccy/go-json; the engine reads
// stored definitions with encoding/json (model.Definition.UnmarshalJSON). Both must read every field alike.
func TestParseDecodersAgree(t *testing.T) {
	for name, raw := range map[string]string{
		"every field": fullDefinition,
		"triggers and numbers": `{"nodes": [
		  {"id": "s", "type": "start", "trigger": {"kind": "sync-api", "module": "m", "function": "f", "method": "PUT",
		   "login_verification": "password", "header_user": "u", "header_password": "p", "allow_remote_ips": "10.0.0.0/8"}},
		  {"id": "d", "type": "delay", "interval": 1.5, "timeout": "90", "error_handler": {"operation": "retry", "retry": {"count": 2, "period": "1m30s"}}},
		  {"id": "f", "type": "approval", "approvers": {"users": ["é", "\u4e2d"]}, "sign": "vote", "pass_ratio": 1, "on_timeout": "remind", "timeout": 60},
		  {"id": "e", "type": "end"}
		], "edges": [{"from": "s", "to": "d", "condition": {"a.b": {"$in": [1, "x", null]}}}, {"from": "d", "to": "f"}, {"from": "f", "to": "e"}]}`,
		"joins and a message trigger": `{"nodes": [
		  {"id": "s", "type": "start", "trigger": {"kind": "message", "message": "order.paid"}},
		  {"id": "a", "type": "auto", "join": "or"}, {"id": "b", "type": "auto", "join": {"min": 1, "cancel_rest": true}},
		  {"id": "e", "type": "end", "join": {"min": 2}}
		], "edges": [{"from": "s", "to": "a"}, {"from": "s", "to": "b"}, {"from": "a", "to": "e"}, {"from": "b", "to": "e"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			got := mustParse(t, raw)
			var want model.Definition
			if err := json.Unmarshal([]byte(raw), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Nodes, want.Nodes) || !reflect.DeepEqual(got.Edges, want.Edges) || !reflect.DeepEqual(got.Meta, want.Meta) {
				t.Errorf("goccy/go-json and encoding/json disagree:\n%+v\n%+v", got, &want)
			}
		})
	}
}

// TestParseManyProblems: every node of a large, thoroughly wrong definition is reported once, for the field at
// fault (the foreign field's wrong type is not reported on top), in node order.
func TestParseManyProblems(t *testing.T) {
	const n = 3000
	var sb strings.Builder
	sb.WriteString(`{"nodes": [`)
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, `{"id": "n%d", "type": "delay", "interval": 5, "sign": 7}`, i)
	}
	sb.WriteString(`]}`)
	d, errs := graph.Parse([]byte(sb.String()))
	if len(errs) != n || d == nil || len(d.Nodes) != n {
		t.Fatalf("%d errors for %d nodes (definition: %v)", len(errs), n, d != nil)
	}
	for i, e := range errs {
		if want := fmt.Sprintf(`node "n%d": field "sign" does not apply to delay nodes`, i); !strings.HasPrefix(e.Message, want) {
			t.Fatalf("error %d = %q, want %q...", i, e.Message, want)
		}
	}
}
