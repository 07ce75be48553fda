package graph_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/condition"
	"github.com/halley-bpm/halley/service/graph"
)

// Building blocks for definitions in the tests.
const (
	start = `{"id": "start", "type": "start", "trigger": {"kind": "manual"}}`
	end   = `{"id": "end", "type": "end"}`
)

var long129 = strings.Repeat("x", 129)

func def(nodes []string, edges ...string) string {
	return `{"nodes": [` + strings.Join(nodes, ", ") + `], "edges": [` + strings.Join(edges, ", ") + `]}`
}

func edge(from, to string, extra ...string) string {
	s := fmt.Sprintf(`{"from": %q, "to": %q`, from, to)
	for _, x := range extra {
		s += ", " + x
	}
	return s + "}"
}

func node(id, typ string, extra ...string) string {
	s := fmt.Sprintf(`{"id": %q, "type": %q`, id, typ)
	for _, x := range extra {
		s += ", " + x
	}
	return s + "}"
}

func approval(id string, extra ...string) string {
	return node(id, "approval", append([]string{`"approvers": {"users": ["bob"]}`}, extra...)...)
}

// linear is start → the given nodes in order → end.
func linear(nodes ...string) string {
	all := append([]string{start}, nodes...)
	all = append(all, end)
	var edges []string
	prev := "start"
	for _, n := range nodes {
		var v struct{ ID string }
		_ = json.Unmarshal([]byte(n), &v)
		edges = append(edges, edge(prev, v.ID))
		prev = v.ID
	}
	edges = append(edges, edge(prev, "end"))
	return def(all, edges...)
}

// checkCondition is the real condition compiler, as the server wires it.
func checkCondition(raw []byte) error {
	_, err := condition.Compile(raw)
	return err
}

type want struct {
	code  string
	nodes []string
	msg   string // a part of the message, if the test cares
}

// assertErrors checks that res holds exactly the wanted errors (in any order).
func assertErrors(t *testing.T, res graph.Result, wants ...want) {
	t.Helper()
	key := func(code string, nodes []string) string { return code + "[" + strings.Join(nodes, " ") + "]" }
	var got, exp []string
	for _, e := range res.Errors {
		got = append(got, key(e.Code, e.Nodes))
	}
	for _, w := range wants {
		exp = append(exp, key(w.code, w.nodes))
	}
	slices.Sort(got)
	slices.Sort(exp)
	if !slices.Equal(got, exp) {
		t.Errorf("errors = %v\nwant     %v\nfull: %s", got, exp, dump(res))
		return
	}
	if res.Valid != (len(wants) == 0) {
		t.Errorf("valid = %v with %d errors", res.Valid, len(wants))
	}
	for _, w := range wants {
		if w.msg == "" {
			continue
		}
		found := false
		for _, e := range res.Errors {
			if e.Code == w.code && slices.Equal(e.Nodes, orEmpty(w.nodes)) && strings.Contains(e.Message, w.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s error for %v with message containing %q: %s", w.code, w.nodes, w.msg, dump(res))
		}
	}
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func dump(res graph.Result) string {
	b, _ := json.MarshalIndent(res, "", "  ")
	return string(b)
}

type validationCase struct {
	name  string
	raw   string
	wants []want
}

func runCases(t *testing.T, cases []validationCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			res := graph.Validate([]byte(tt.raw), graph.Options{CheckCondition: checkCondition})
			assertErrors(t, res, tt.wants...)
		})
	}
}

func TestValidateAcceptsAValidDefinition(t *testing.T) {
	raw := def([]string{
		start,
		approval("lead", `"sign": "or"`),
		approval("dba", `"sign": "all"`),
		node("grant", "auto", `"join": "and"`, `"plugins": {"pre": [], "after": ["grant-table"]}`),
		end,
	},
		edge("start", "lead"),
		edge("start", "dba", `"condition": {"level": {"$gte": 3}}`),
		edge("lead", "grant"),
		edge("dba", "grant"),
		edge("grant", "end"),
	)
	res := graph.Validate([]byte(raw), graph.Options{CheckCondition: checkCondition})
	assertErrors(t, res)
	b, _ := json.Marshal(res)
	if string(b) != `{"valid":true,"errors":[],"warnings":[]}` {
		t.Errorf("JSON = %s", b)
	}
}

func TestValidateNoStart(t *testing.T) {
	runCases(t, []validationCase{
		{"no start node", def([]string{node("a", "auto"), end}, edge("a", "end")),
			[]want{{model.CodeNoStart, nil, "no start node"}}},
		{"empty definition", `{}`,
			[]want{{model.CodeNoStart, nil, ""}, {model.CodeNoEnd, nil, ""}}},
	})
}

func TestValidateMultipleStarts(t *testing.T) {
	runCases(t, []validationCase{
		{"two starts", def([]string{
			node("s1", "start", `"trigger": {"kind": "manual"}`), node("s2", "start", `"trigger": {"kind": "manual"}`),
			node("a", "auto"), end,
		}, edge("s1", "a"), edge("s2", "a"), edge("a", "end")),
			[]want{{model.CodeMultipleStarts, []string{"s1", "s2"}, "2 start nodes"}}},
	})
}

func TestValidateNoEnd(t *testing.T) {
	runCases(t, []validationCase{
		// A terminate node is an end for dead_end, but a template needs a normal end.
		{"only a terminate node", def([]string{start, node("a", "auto"), node("stop", "terminate")}, edge("start", "a"), edge("a", "stop")),
			[]want{{model.CodeNoEnd, nil, "no end node"}}},
	})
}

func TestValidateCycle(t *testing.T) {
	runCases(t, []validationCase{
		{"two-node cycle (contract check)", def([]string{start, node("x", "auto"), node("y", "auto"), end},
			edge("start", "x"), edge("x", "y"), edge("y", "x"), edge("y", "end")),
			[]want{{model.CodeCycle, []string{"x", "y"}, "cycle: x → y → x"}}},
		{"three-node cycle with a tail", def([]string{start, node("a", "auto"), node("b", "auto"), node("c", "auto"), node("d", "auto"), end},
			edge("start", "a"), edge("a", "b"), edge("b", "c"), edge("c", "a"), edge("c", "d"), edge("d", "end")),
			[]want{{model.CodeCycle, []string{"a", "b", "c"}, "a → b → c → a"}}},
		{"cycle listed from its first node in definition order", def([]string{start, node("y", "auto"), node("x", "auto"), end},
			edge("start", "x"), edge("x", "y"), edge("y", "x"), edge("x", "end")),
			[]want{{model.CodeCycle, []string{"y", "x"}, ""}}},
		{"self loop", def([]string{start, node("a", "auto"), end}, edge("start", "a"), edge("a", "a"), edge("a", "end")),
			[]want{{model.CodeCycle, []string{"a"}, "a → a"}}},
		{"two separate cycles", def([]string{start, node("a", "auto"), node("b", "auto"), node("c", "auto"), node("d", "auto"), end},
			edge("start", "a"), edge("a", "b"), edge("b", "a"), edge("b", "c"), edge("c", "d"), edge("d", "c"), edge("d", "end")),
			[]want{{model.CodeCycle, []string{"a", "b"}, ""}, {model.CodeCycle, []string{"c", "d"}, ""}}},
		{"the shortest cycle of a component through its first node", def([]string{start, node("a", "auto"), node("b", "auto"), node("c", "auto"), node("d", "auto"), end},
			edge("start", "a"), edge("a", "b"), edge("b", "c"), edge("c", "d"), edge("d", "a"), edge("c", "a"), edge("d", "end")),
			[]want{{model.CodeCycle, []string{"a", "b", "c"}, ""}}},
		{"a cycle closed by a timeout branch", def([]string{start, approval("a", `"timeout": "1h"`, `"on_timeout": {"branch": "start2"}`), node("start2", "auto"), end},
			edge("start", "start2"), edge("start2", "a"), edge("a", "end")),
			[]want{{model.CodeCycle, []string{"a", "start2"}, ""}}},
		{"a cycle that cannot end", def([]string{start, node("a", "auto"), node("b", "auto"), node("c", "auto"), end},
			edge("start", "a"), edge("a", "b"), edge("b", "a"), edge("start", "c"), edge("c", "end")),
			[]want{{model.CodeCycle, []string{"a", "b"}, ""}, {model.CodeDeadEnd, []string{"a", "b"}, ""}}},
	})
}

func TestValidateUnreachable(t *testing.T) {
	runCases(t, []validationCase{
		{"orphan node", def([]string{start, node("a", "auto"), node("orphan", "auto"), end},
			edge("start", "a"), edge("a", "end"), edge("orphan", "end")),
			[]want{{model.CodeUnreachable, []string{"orphan"}, `node "orphan" is not reachable from the start`}}},
		{"several, in definition order", def([]string{start, node("o2", "auto"), node("o1", "auto"), end},
			edge("start", "end"), edge("o1", "o2"), edge("o2", "end")),
			[]want{{model.CodeUnreachable, []string{"o2", "o1"}, "2 nodes are not reachable"}}},
		{"the error node and its branch are reachable", def([]string{start, node("oops", "error"), node("fix", "auto"), end},
			edge("start", "end"), edge("oops", "fix"), edge("fix", "end")),
			nil},
		{"a node reached only through a timeout branch is reachable", def([]string{start,
			node("cb", "callback", `"timeout": "1h"`, `"timeout_branch": "late"`), node("late", "auto"), end},
			edge("start", "cb"), edge("cb", "end"), edge("late", "end")),
			nil},
	})
}

func TestValidateDeadEnd(t *testing.T) {
	runCases(t, []validationCase{
		{"a branch that stops", def([]string{start, node("a", "auto"), node("b", "auto"), end},
			edge("start", "a"), edge("start", "b"), edge("a", "end")),
			[]want{{model.CodeDeadEnd, []string{"b"}, `node "b" cannot reach an end`}}},
		{"a terminate node counts as an end", def([]string{start, node("a", "auto"), node("stop", "terminate"), end},
			edge("start", "a"), edge("start", "stop"), edge("a", "end")),
			nil},
		{"the error node must reach an end", def([]string{start, node("oops", "error"), node("fix", "auto"), end},
			edge("start", "end"), edge("oops", "fix")),
			[]want{{model.CodeDeadEnd, []string{"oops", "fix"}, ""}}},
	})
}

func TestValidateUnknownNode(t *testing.T) {
	runCases(t, []validationCase{
		{"edge to a missing node", def([]string{start, end}, edge("start", "end"), edge("start", "ghost")),
			[]want{{model.CodeUnknownNode, []string{"ghost"}, `goes to node "ghost", which does not exist`}}},
		{"edge from a missing node", def([]string{start, end}, edge("start", "end"), edge("ghost", "end")),
			[]want{{model.CodeUnknownNode, []string{"ghost"}, `comes from node "ghost"`}}},
		{"edge without to", def([]string{start, end}, edge("start", "end"), `{"from": "start"}`),
			[]want{{model.CodeUnknownNode, []string{"start"}, "has no to"}}},
	})
}

func TestValidateDuplicateID(t *testing.T) {
	runCases(t, []validationCase{
		{"two nodes a", def([]string{start, node("a", "auto"), node("a", "approval", `"approvers": {"roles": ["x"]}`), end},
			edge("start", "a"), edge("a", "end")),
			[]want{{model.CodeDuplicateID, []string{"a"}, `node id "a" is used by 2 nodes`}}},
		{"two edges with one id", def([]string{start, node("a", "auto"), end},
			edge("start", "a", `"id": "e1"`), edge("a", "end", `"id": "e1"`)),
			[]want{{model.CodeDuplicateID, []string{"a", "end"}, `edge id "e1" is used by edges #1 and #2`}}},
	})
}

func TestValidateBadCondition(t *testing.T) {
	runCases(t, []validationCase{
		{"unknown operator, named by the checker", def([]string{start, node("a", "auto"), end},
			edge("start", "a"), edge("a", "end", `"condition": {"days": {"$gtx": 3}}`)),
			[]want{{model.CodeBadCondition, []string{"a", "end"}, "$gtx"}}},
		{"path of the operator at fault", def([]string{start, node("a", "auto"), end},
			edge("start", "a"), edge("a", "end", `"condition": {"$or": [{"level": 1}, {"dept": {"$in": 5}}]}`)),
			[]want{{model.CodeBadCondition, []string{"a", "end"}, "$in"}}},
		{"not an object", def([]string{start, node("a", "auto"), end},
			edge("start", "a"), edge("a", "end", `"condition": [1, 2]`)),
			[]want{{model.CodeBadCondition, []string{"a", "end"}, `field "condition": expected an object, got array`}}},
	})
	// Without a checker only the shape is checked.
	raw := def([]string{start, end}, edge("start", "end", `"condition": {"days": {"$gtx": 3}}`))
	assertErrors(t, graph.Validate([]byte(raw), graph.Options{}))
	// The checker's error is passed on whole.
	res := graph.Validate([]byte(raw), graph.Options{CheckCondition: func([]byte) error { return errors.New("unknown operator $gtx at days") }})
	assertErrors(t, res, want{model.CodeBadCondition, []string{"start", "end"}, "edge #1 (start → end): condition: unknown operator $gtx at days"})
}

func TestValidateBadCron(t *testing.T) {
	cron := func(expr string) string {
		return def([]string{node("start", "start", `"trigger": {"kind": "crontab", "expr": `+fmt.Sprintf("%q", expr)+`}`), end}, edge("start", "end"))
	}
	runCases(t, []validationCase{
		{"valid", cron("*/5 * * * *"), nil},
		{"valid with a time zone", cron("CRON_TZ=UTC 0 9 * * 1-5"), nil},
		{"descriptors are not 5 fields", cron("@daily"), []want{{model.CodeBadCron, []string{"start"}, ""}}},
		{"minute out of range", cron("61 * * * *"), []want{{model.CodeBadCron, []string{"start"}, `crontab expr "61 * * * *"`}}},
		{"six fields", cron("0 */5 * * * *"), []want{{model.CodeBadCron, []string{"start"}, "expected exactly 5 fields"}}},
		{"garbage", cron("every day"), []want{{model.CodeBadCron, []string{"start"}, ""}}},
		{"empty", cron(""), []want{{model.CodeBadCron, []string{"start"}, "needs expr"}}},
	})
}

func TestValidateBadNode(t *testing.T) {
	startWith := func(trigger string) string {
		return def([]string{node("start", "start", `"trigger": `+trigger), end}, edge("start", "end"))
	}
	a := []string{"a"}
	runCases(t, []validationCase{
		// approval
		{"approval without approvers", linear(node("a", "approval")), []want{{model.CodeBadNode, a, "needs approvers"}}},
		{"approval with empty approvers", linear(node("a", "approval", `"approvers": {}`)), []want{{model.CodeBadNode, a, "needs approvers"}}},
		{"empty user name", linear(node("a", "approval", `"approvers": {"users": [""]}`)), []want{{model.CodeBadNode, a, "approvers.users[0] is empty"}}},
		{"unknown relation", linear(node("a", "approval", `"approvers": {"relation": "initiator.friend"}`)), []want{{model.CodeBadNode, a, `unknown approvers.relation "initiator.friend"`}}},
		{"unknown sign", linear(approval("a", `"sign": "some"`)), []want{{model.CodeBadNode, a, `unknown sign "some" (one of or, all, sequential, vote)`}}},
		{"vote without pass_ratio", linear(approval("a", `"sign": "vote"`)), []want{{model.CodeBadNode, a, "pass_ratio in (0, 1]"}}},
		{"vote with pass_ratio above 1", linear(approval("a", `"sign": "vote"`, `"pass_ratio": 1.5`)), []want{{model.CodeBadNode, a, "pass_ratio must be at most 1, got 1.5"}}},
		{"vote with pass_ratio 1", linear(approval("a", `"sign": "vote"`, `"pass_ratio": 1`)), nil},
		{"pass_ratio without vote", linear(approval("a", `"sign": "all"`, `"pass_ratio": 0.5`)), []want{{model.CodeBadNode, a, "pass_ratio applies only to sign vote"}}},
		{"pass_ratio 0 counts as none (drafts saved before the schema have it)", linear(approval("a", `"sign": "all"`, `"pass_ratio": 0`)), nil},
		{"negative pass_ratio", linear(approval("a", `"sign": "vote"`, `"pass_ratio": -0.5`)), []want{{model.CodeBadNode, a, "pass_ratio must be at least 0, got -0.5"}}},
		{"group_sign on users", linear(approval("a", `"group_sign": "all"`)), []want{{model.CodeBadNode, a, "group_sign applies only to groups"}}},
		{"group_sign vote needs pass_ratio", linear(node("a", "approval", `"approvers": {"groups": [["x"], ["y"]]}`, `"group_sign": "vote"`)), []want{{model.CodeBadNode, a, "pass_ratio"}}},
		{"empty group", linear(node("a", "approval", `"approvers": {"groups": [["x"], []]}`)), []want{{model.CodeBadNode, a, "groups[1] is empty"}}},
		{"groups mixed with users", linear(node("a", "approval", `"approvers": {"groups": [["x"]], "users": ["y"]}`)), []want{{model.CodeBadNode, a, "groups stand alone"}}},
		{"groups and groups_context", linear(node("a", "approval", `"approvers": {"groups": [["x"]], "groups_context": "g"}`)), []want{{model.CodeBadNode, a, "both groups and groups_context"}}},
		{"on_timeout branch to a missing node", linear(approval("a", `"timeout": "1h"`, `"on_timeout": {"branch": "nowhere"}`)),
			[]want{{model.CodeBadNode, a, `on_timeout branch names node "nowhere", which does not exist`}}},
		{"on_timeout without timeout", linear(approval("a", `"on_timeout": "approve"`)), []want{{model.CodeBadNode, a, "has no timeout"}}},
		{"unknown on_timeout action", linear(approval("a", `"timeout": "1h"`, `"on_timeout": "escalate"`)), []want{{model.CodeBadNode, a, `on_timeout must be "approve", "reject", "remind" or {"branch": "node-id"}, not "escalate"`}}},
		{"cc with groups", linear(node("a", "auto", `"cc": {"groups": [["x"]]}`)), []want{{model.CodeBadNode, a, "cc takes users"}}},
		// callback
		{"timeout_branch to a missing node", linear(node("a", "callback", `"timeout": "1h"`, `"timeout_branch": "nowhere"`)),
			[]want{{model.CodeBadNode, a, `timeout_branch names node "nowhere", which does not exist`}}},
		{"timeout_branch without timeout", def([]string{start, node("a", "callback", `"timeout_branch": "b"`), node("b", "auto"), end},
			edge("start", "a"), edge("a", "end"), edge("b", "end")),
			[]want{{model.CodeBadNode, a, "has no timeout"}}},
		{"timeout_branch to the start", linear(node("a", "callback", `"timeout": "1h"`, `"timeout_branch": "start"`)),
			[]want{{model.CodeBadNode, a, "cannot be branched to"}}},
		// error handler
		{"catch without branch", linear(node("a", "auto", `"error_handler": {"operation": "catch"}`)), []want{{model.CodeBadNode, a, "needs catch.branch"}}},
		{"catch branch to a missing node", linear(node("a", "auto", `"error_handler": {"operation": "catch", "catch": {"branch": "nowhere"}}`)),
			[]want{{model.CodeBadNode, a, `catch.branch names node "nowhere"`}}},
		{"retry count 0", linear(node("a", "auto", `"error_handler": {"operation": "retry", "retry": {"count": 0, "period": "1s"}}`)),
			[]want{{model.CodeBadNode, a, "error_handler.retry.count must be at least 1, got 0"}}},
		{"retry without operation retry", linear(node("a", "auto", `"error_handler": {"operation": "ignore", "retry": {"count": 2}}`)),
			[]want{{model.CodeBadNode, a, `field "error_handler.retry" does not apply to operation ignore`}}},
		{"unknown operation", linear(node("a", "auto", `"error_handler": {"operation": "panic"}`)), []want{{model.CodeBadNode, a, `unknown error_handler.operation "panic"`}}},
		// durations
		{"negative timeout", linear(node("a", "auto", `"timeout": "-1s"`)), []want{{model.CodeBadNode, a, "timeout -1s is negative"}}},
		{"negative retry period", linear(node("a", "auto", `"error_handler": {"operation": "retry", "retry": {"count": 1, "period": -3}}`)),
			[]want{{model.CodeBadNode, a, "period -3s is negative"}}},
		{"negative interval", linear(node("a", "delay", `"interval": "-1m"`)), []want{{model.CodeBadNode, a, "interval -1m0s is negative"}}},
		// delay
		{"delay with neither interval nor until", linear(node("a", "delay")), []want{{model.CodeBadNode, a, "needs interval"}}},
		{"delay with both", linear(node("a", "delay", `"interval": 5`, `"until": "due"`)), []want{{model.CodeBadNode, a, "both interval and until"}}},
		{"delay until a malformed time", linear(node("a", "delay", `"until": "2025-13-01"`)), []want{{model.CodeBadNode, a, "neither an RFC 3339 time"}}},
		{"delay until a time", linear(node("a", "delay", `"until": "2025-12-01T08:00:00+08:00"`)), nil},
		{"delay until a context path", linear(node("a", "delay", `"until": "order.due_at"`)), nil},
		// start triggers
		{"start without trigger", def([]string{node("start", "start"), end}, edge("start", "end")),
			[]want{{model.CodeBadNode, []string{"start"}, `start node "start" needs trigger`}}},
		{"unknown trigger kind", startWith(`{"kind": "webhook"}`), []want{{model.CodeBadNode, []string{"start"}, `unknown trigger.kind "webhook"`}}},
		{"sync-api without module and function", startWith(`{"kind": "sync-api"}`),
			[]want{{model.CodeBadNode, []string{"start"}, "needs module"}, {model.CodeBadNode, []string{"start"}, "needs function"}}},
		{"api module with a slash", startWith(`{"kind": "async-api", "module": "a/b", "function": "f"}`), []want{{model.CodeBadNode, []string{"start"}, `module "a/b"`}}},
		{"bad method", startWith(`{"kind": "sync-api", "module": "m", "function": "f", "method": "fetch"}`), []want{{model.CodeBadNode, []string{"start"}, `trigger.method "fetch" is not one of get, post, put, patch and delete`}}},
		{"bad login_verification", startWith(`{"kind": "sync-api", "module": "m", "function": "f", "login_verification": "oauth"}`),
			[]want{{model.CodeBadNode, []string{"start"}, `unknown trigger.login_verification "oauth" (one of none, token, password)`}}},
		{"bad allow_remote_ips", startWith(`{"kind": "async-api", "module": "m", "function": "f", "allow_remote_ips": "10.0.0.0/8,10.1.2.3/40"}`),
			[]want{{model.CodeBadNode, []string{"start"}, `"10.1.2.3/40" is not an IP address or CIDR`}}},
		{"good api trigger", startWith(`{"kind": "sync-api", "module": "push", "function": "task.v2", "method": "PUT", "login_verification": "password",
			"header_user": "u", "header_password": "p", "allow_remote_ips": "10.0.0.0/8, 1.2.3.4"}`), nil},
		{"crontab end before start", startWith(`{"kind": "crontab", "expr": "0 * * * *", "start_at": "2025-02-01T00:00:00Z", "end_at": "2025-01-01T00:00:00Z"}`),
			[]want{{model.CodeBadNode, []string{"start"}, "is not after start_at"}}},
		{"form trigger without form", startWith(`{"kind": "form", "members": ["x"]}`), []want{{model.CodeBadNode, []string{"start"}, "needs form"}}},
		{"good message trigger", startWith(`{"kind": "message", "message": "order.paid"}`), nil},
		{"good min join", def([]string{start, node("a", "auto"), node("b", "auto"), node("c", "auto"), node("m", "auto", `"join": {"min": 2}`), end},
			edge("start", "a"), edge("start", "b"), edge("start", "c"), edge("a", "m"), edge("b", "m"), edge("c", "m"), edge("m", "end")), nil},
		{"message trigger without a message", startWith(`{"kind": "message"}`), []want{{model.CodeBadNode, []string{"start"}, "needs message"}}},
		{"message trigger with spaces", startWith(`{"kind": "message", "message": " order.paid"}`), []want{{model.CodeBadNode, []string{"start"}, "leading or trailing spaces"}}},
		{"message field on a manual trigger", startWith(`{"kind": "manual", "message": "m"}`),
			[]want{{model.CodeBadNode, []string{"start"}, `field "trigger.message" does not apply to kind manual (it belongs to kind message)`}}},
		{"trigger field of another kind", startWith(`{"kind": "manual", "module": "m"}`),
			[]want{{model.CodeBadNode, []string{"start"}, `field "trigger.module" does not apply to kind manual`}}},
		// edges
		{"default edge on a single outgoing edge", def([]string{start, end}, edge("start", "end", `"default": true`)),
			[]want{{model.CodeBadNode, []string{"start"}, "no other outgoing edge"}}},
		{"two default edges", def([]string{start, node("a", "auto"), node("b", "auto"), end},
			edge("start", "a", `"default": true`), edge("start", "b", `"default": true`), edge("a", "end"), edge("b", "end")),
			[]want{{model.CodeBadNode, []string{"start"}, "2 default edges"}}},
		{"default edge with a condition", def([]string{start, node("a", "auto"), end},
			edge("start", "a", `"default": true`, `"condition": {"x": 1}`), edge("start", "end"), edge("a", "end")),
			[]want{{model.CodeBadNode, []string{"start", "a"}, "default edge and has a condition"}}},
		{"two edges between the same nodes", def([]string{start, end}, edge("start", "end"), edge("start", "end", `"condition": {"x": 1}`)),
			[]want{{model.CodeBadNode, []string{"start", "end"}, "both go from"}}},
		{"error node with incoming edges", def([]string{start, node("oops", "error"), end}, edge("start", "end"), edge("start", "oops"), edge("oops", "end")),
			[]want{{model.CodeBadNode, []string{"oops"}, "error node \"oops\" has incoming edges"}}},
		{"edge into the start", def([]string{start, node("a", "auto"), end}, edge("start", "a"), edge("a", "end"), edge("a", "start")),
			[]want{{model.CodeBadNode, []string{"start"}, "has incoming edges"}, {model.CodeCycle, []string{"start", "a"}, ""}}},
		{"edge out of an end", def([]string{start, node("a", "auto"), end}, edge("start", "end"), edge("end", "a")),
			[]want{{model.CodeBadNode, []string{"end"}, "has outgoing edges"}, {model.CodeDeadEnd, []string{"a"}, ""}}},
		{"two error nodes", def([]string{start, node("e1", "error"), node("e2", "error"), end}, edge("start", "end"), edge("e1", "end"), edge("e2", "end")),
			[]want{{model.CodeBadNode, []string{"e1", "e2"}, "2 error nodes"}}},
		// common fields
		{"join xor", linear(node("a", "auto", `"join": "xor"`)), []want{{model.CodeBadNode, a, `join must be "and", "or" or {"min": N}`}}},
		{"join min 0", def([]string{start, node("a", "auto"), node("b", "auto"), node("m", "auto", `"join": {"min": 0}`), end},
			edge("start", "a"), edge("start", "b"), edge("a", "m"), edge("b", "m"), edge("m", "end")),
			[]want{{model.CodeBadNode, []string{"m"}, `join.min must be at least 1, got 0`}}},
		{"join min above the in-degree", def([]string{start, node("a", "auto"), node("b", "auto"), node("m", "auto", `"join": {"min": 3}`), end},
			edge("start", "a"), edge("start", "b"), edge("a", "m"), edge("b", "m"), edge("m", "end")),
			[]want{{model.CodeBadNode, []string{"m"}, `can never activate: the node has 2 incoming edges`}}},
		{"join min with cancel_rest", def([]string{start, node("a", "auto"), node("b", "auto"), node("m", "auto", `"join": {"min": 1, "cancel_rest": true}`), end},
			edge("start", "a"), edge("start", "b"), edge("a", "m"), edge("b", "m"), edge("m", "end")), nil},
		{"join object without min", linear(node("a", "auto", `"join": {"cancel_rest": false}`)), []want{{model.CodeBadNode, a, `join has no min`}}},
		{"join object with another field", linear(node("a", "auto", `"join": {"max": 2}`)),
			[]want{{model.CodeBadNode, a, `join has no min`}, {model.CodeBadNode, a, `field "join": unknown field "max"`}}},
		{"join as a number", linear(node("a", "auto", `"join": 2`)), []want{{model.CodeBadNode, a, `join must be "and", "or" or {"min": N}`}}},
		{"id with a space", def([]string{start, node("a b", "auto"), end}, edge("start", "a b"), edge("a b", "end")),
			[]want{{model.CodeBadNode, []string{"a b"}, "letters, digits"}}},
		{"id with a dot", def([]string{start, node("a.b", "auto"), end}, edge("start", "a.b"), edge("a.b", "end")),
			[]want{{model.CodeBadNode, []string{"a.b"}, "letters, digits"}}},
		{"empty id", def([]string{start, node("", "auto"), end}, edge("start", "end")),
			[]want{{model.CodeBadNode, nil, "node #2 has no id"}}},
		{"empty plugin name", linear(node("a", "auto", `"plugins": {"after": [""]}`)), []want{{model.CodeBadNode, a, "plugins.after[0] is empty"}}},
		// lengths the stores keep: longer values failed the step that wrote them (a 500 on MySQL)
		{"id too long", def([]string{start, node(long129, "auto"), end}, edge("start", long129), edge(long129, "end")),
			[]want{{model.CodeBadNode, []string{long129}, "at most 128 characters"}}},
		{"name too long", linear(node("a", "auto", `"name": "`+strings.Repeat("é", 201)+`"`)), []want{{model.CodeBadNode, a, "name may be at most 200"}}},
		{"approver too long", linear(node("a", "approval", `"approvers": {"users": ["`+strings.Repeat("u", 201)+`"]}`)),
			[]want{{model.CodeBadNode, a, "approvers.users[0] may be at most 200 characters long"}}},
		{"group member too long", linear(node("a", "approval", `"approvers": {"groups": [["`+strings.Repeat("u", 201)+`"]]}`)),
			[]want{{model.CodeBadNode, a, "approvers.groups[0] has a name longer than 200"}}},
		{"message too long", linear(node("a", "callback", `"message": "`+strings.Repeat("m", 256)+`"`)), []want{{model.CodeBadNode, a, "message may be at most 255"}}},
		{"node without type", linear(`{"id": "a"}`), []want{{model.CodeBadNode, a, `node "a" has no type`}}},
		{"unknown type", linear(node("a", "gateway")), []want{{model.CodeBadNode, a, `unknown type "gateway"`}}},
		{"field of another node type", linear(node("a", "delay", `"interval": 5`, `"sign": "all"`)),
			[]want{{model.CodeBadNode, a, `field "sign" does not apply to delay nodes`}}},
		{"unknown field", linear(node("a", "auto", `"colour": "red"`)), []want{{model.CodeBadNode, a, `unknown field "colour"`}}},
	})
}

func TestValidateBadDefinition(t *testing.T) {
	for _, raw := range []string{`[]`, `"x"`, `42`, `null`, ``, `{"nodes": 1}`, `{"nodes": [], "edges": {}}`, `{"nodes": [`} {
		res := graph.Validate([]byte(raw), graph.Options{})
		assertErrors(t, res, want{model.CodeBadDefinition, nil, ""})
	}
	if errs := graph.ValidateDefinition(nil, graph.Options{}); len(errs) != 1 || errs[0].Code != model.CodeBadDefinition {
		t.Errorf("ValidateDefinition(nil) = %v", errs)
	}
	if got := graph.Mermaid(nil, nil, nil); got != "flowchart TD\n" {
		t.Errorf("Mermaid(nil) = %q", got)
	}
}

// TestValidateReportsEverythingAtOnce: one definition with many problems gets all of them.
func TestValidateReportsEverythingAtOnce(t *testing.T) {
	raw := def([]string{
		node("s1", "start", `"trigger": {"kind": "crontab", "expr": "bad"}`),
		node("s2", "start", `"trigger": {"kind": "manual"}`),
		node("x", "auto"), node("y", "auto"),
		node("lonely", "auto"),
		node("a", "approval"),
		node("x", "auto"),
		node("stop", "terminate"),
	},
		edge("s1", "x"), edge("x", "y"), edge("y", "x"), edge("y", "stop"),
		edge("s2", "a"), edge("a", "ghost"),
		edge("s2", "stop", `"condition": {"n": {"$bogus": 1}}`),
	)
	res := graph.Validate([]byte(raw), graph.Options{CheckCondition: checkCondition})
	assertErrors(t, res,
		want{model.CodeBadCron, []string{"s1"}, ""},
		want{model.CodeMultipleStarts, []string{"s1", "s2"}, ""},
		want{model.CodeNoEnd, nil, ""},
		want{model.CodeCycle, []string{"x", "y"}, ""},
		want{model.CodeUnreachable, []string{"lonely"}, ""},
		want{model.CodeDeadEnd, []string{"lonely", "a"}, ""},
		want{model.CodeUnknownNode, []string{"ghost"}, ""},
		want{model.CodeDuplicateID, []string{"x"}, ""},
		want{model.CodeBadCondition, []string{"s2", "stop"}, "$bogus"},
		want{model.CodeBadNode, []string{"a"}, "needs approvers"},
	)
}

// TestValidateDefinitionBuiltInCode: a definition built in Go (not parsed) gets the same checks, including
// fields that do not belong to the node type.
func TestValidateDefinitionBuiltInCode(t *testing.T) {
	d := &model.Definition{
		Nodes: []model.Node{
			{ID: "start", Type: model.NodeStart, Trigger: model.Trigger{Kind: model.TriggerManual}},
			{ID: "wait", Type: model.NodeDelay, Interval: model.Duration(5e9), Sign: model.SignAll},
			{ID: "end", Type: model.NodeEnd},
		},
		Edges: []model.Edge{{From: "start", To: "wait"}, {From: "wait", To: "end"}},
	}
	errs := graph.ValidateDefinition(d, graph.Options{})
	if len(errs) != 1 || errs[0].Code != model.CodeBadNode || !slices.Equal(errs[0].Nodes, []string{"wait"}) ||
		!strings.Contains(errs[0].Message, `field "sign" does not apply to delay nodes`) {
		t.Errorf("errors = %+v", errs)
	}
	d.Nodes[1].Sign = ""
	if errs := graph.ValidateDefinition(d, graph.Options{}); errs == nil || len(errs) != 0 {
		t.Errorf("errors = %#v, want an empty non-nil slice", errs)
	}
}

// TestValidateLongChain makes sure nothing recurses per node: a 200,000-node chain with a cycle at its far end.
func TestValidateLongChain(t *testing.T) {
	const n = 200_000
	d := &model.Definition{Nodes: make([]model.Node, 0, n+2), Edges: make([]model.Edge, 0, n+2)}
	d.Nodes = append(d.Nodes, model.Node{ID: "start", Type: model.NodeStart, Trigger: model.Trigger{Kind: model.TriggerManual}})
	prev := "start"
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		d.Nodes = append(d.Nodes, model.Node{ID: id, Type: model.NodeAuto})
		d.Edges = append(d.Edges, model.Edge{From: prev, To: id})
		prev = id
	}
	d.Nodes = append(d.Nodes, model.Node{ID: "end", Type: model.NodeEnd})
	d.Edges = append(d.Edges, model.Edge{From: prev, To: "end"}, model.Edge{From: prev, To: "n0"})
	errs := graph.ValidateDefinition(d.Index(), graph.Options{})
	if len(errs) != 1 || errs[0].Code != model.CodeCycle || len(errs[0].Nodes) != n || errs[0].Nodes[0] != "n0" || errs[0].Nodes[n-1] != prev {
		t.Fatalf("got %d errors; first: %.200v", len(errs), errs)
	}
	if !strings.Contains(errs[0].Message, fmt.Sprintf("(%d nodes)", n)) {
		t.Errorf("message of a long cycle is not shortened: %.300s", errs[0].Message)
	}
}
