package engine_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/templates"
)

// Templates of the join suite.
const (
	// leaveDef is the leave template of issue 19: manager → [days > 3] director → end, plus a default edge
	// manager → end. Both reach End, whose join is the default "and".
	leaveDef = testkit.LeaveDef

	// contractDef is the Definition example of API.md: dba only for level >= 3, grant joins with "and".
	contractDef = `{"nodes":[
		{"id":"start","type":"start","name":"Apply","trigger":{"kind":"manual"}},
		{"id":"lead","type":"approval","name":"Team lead","approvers":{"users":["bob"]},"sign":"or"},
		{"id":"dba","type":"approval","name":"DBA","approvers":{"users":["dora"]},"sign":"all"},
		{"id":"grant","type":"auto","name":"Grant","join":"and"},
		{"id":"end","type":"end"}],
	 "edges":[{"from":"start","to":"lead"},{"from":"start","to":"dba","condition":{"level":{"$gte":3}}},
		{"from":"lead","to":"grant"},{"from":"dba","to":"grant"},{"from":"grant","to":"end"}]}`

	// multiDef is a multi-choice: each of a, b, c runs when its flag is set (several may be), then they merge at j.
	multiDef = `{"nodes":[
		{"id":"start","type":"start","trigger":{"kind":"manual"}},
		{"id":"gate","type":"auto"},
		{"id":"a","type":"approval","approvers":{"users":["ann"]}},
		{"id":"b","type":"approval","approvers":{"users":["bob"]}},
		{"id":"c","type":"approval","approvers":{"users":["cat"]}},
		{"id":"j","type":"approval","approvers":{"users":["jo"]}%s},
		{"id":"end","type":"end"}],
	 "edges":[{"from":"start","to":"gate"},
		{"from":"gate","to":"a","condition":{"a":true}},{"from":"gate","to":"b","condition":{"b":true}},{"from":"gate","to":"c","condition":{"c":true}},
		{"from":"a","to":"j"},{"from":"b","to":"j"},{"from":"c","to":"j"},{"from":"j","to":"end"}]}`

	// nestedDef: an outer exclusive choice (big amounts through finance, the rest through the lead); finance
	// splits again into a legal check only for contracts and a parallel controller; the inner branches merge at
	// fin-done, the outer ones at end.
	nestedDef = `{"nodes":[
		{"id":"start","type":"start","trigger":{"kind":"manual"}},
		{"id":"lead","type":"approval","approvers":{"users":["lee"]}},
		{"id":"finance","type":"auto"},
		{"id":"legal","type":"approval","approvers":{"users":["lex"]}},
		{"id":"controller","type":"approval","approvers":{"users":["con"]}},
		{"id":"fin-done","type":"auto"},
		{"id":"end","type":"end"}],
	 "edges":[{"from":"start","to":"finance","condition":{"amount":{"$gt":1000}}},{"from":"start","to":"lead","default":true},
		{"from":"finance","to":"legal","condition":{"contract":true}},{"from":"finance","to":"controller"},
		{"from":"legal","to":"fin-done"},{"from":"controller","to":"fin-done"},
		{"from":"fin-done","to":"end"},{"from":"lead","to":"end"}]}`

	// failDef: two parallel branches; branch a runs a plugin that is not uploaded (plugin_failed, thrown).
	failDef = `{"nodes":[
		{"id":"start","type":"start","trigger":{"kind":"manual"}},
		{"id":"a","type":"auto","plugins":{"after":["missing-plugin"]}},
		{"id":"b","type":"approval","approvers":{"users":["bob"]}},
		{"id":"j","type":"auto"},
		{"id":"end","type":"end"}],
	 "edges":[{"from":"start","to":"b"},{"from":"start","to":"a"},{"from":"a","to":"j"},{"from":"b","to":"j"},{"from":"j","to":"end"}]}`

	// orDef: two parallel approvals into an or join (the first one through wins, the second is absorbed).
	orDef = `{"nodes":[
		{"id":"start","type":"start","trigger":{"kind":"manual"}},
		{"id":"a","type":"approval","approvers":{"users":["ann"]}},
		{"id":"b","type":"approval","approvers":{"users":["bob"]}},
		{"id":"j","type":"approval","join":"or","approvers":{"users":["jo"]}},
		{"id":"end","type":"end"}],
	 "edges":[{"from":"start","to":"a"},{"from":"start","to":"b"},{"from":"a","to":"j"},{"from":"b","to":"j"},{"from":"j","to":"end"}]}`

	// prunedChainDef: a branch pruned at its start is skipped as pruned two nodes deep, and the and join after
	// it merges the other branch.
	prunedChainDef = `{"nodes":[
		{"id":"start","type":"start","trigger":{"kind":"manual"}},
		{"id":"x1","type":"approval","approvers":{"users":["ann"]}},
		{"id":"x2","type":"auto"},
		{"id":"y","type":"approval","approvers":{"users":["bob"]}},
		{"id":"j","type":"auto"},
		{"id":"end","type":"end"}],
	 "edges":[{"from":"start","to":"x1","condition":{"x":true}},{"from":"start","to":"y"},
		{"from":"x1","to":"x2"},{"from":"x2","to":"j"},{"from":"y","to":"j"},{"from":"j","to":"end"}]}`
)

// decision is one decision of the join suite: user decides the latest task at node.
type decision struct {
	node, user string
	approve    bool
}

func approveAt(node, user string) decision { return decision{node, user, true} }
func rejectAt(node, user string) decision  { return decision{node, user, false} }

// TestJoinPatterns runs the workflow patterns of issue 19 through the engine: exclusive choice then merge,
// multi-choice then and, nested splits, a rejection and a failure inside a chosen branch, min joins with pruned
// inputs, and an or join absorbing a late arrival.
func TestJoinPatterns(t *testing.T) {
	tests := []struct {
		name     string
		def      string
		ctx      string
		steps    []decision
		status   model.InstanceStatus
		nodes    map[string]model.NodeState // "" = never ran
		errCode  string                     // the instance error's code, when it failed
		activate map[string]int             // how often a node was activated
	}{
		{name: "exclusive choice, short leave: manager alone, then end", def: leaveDef, ctx: `{"days":1}`,
			steps:  []decision{approveAt("manager", "mia")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"manager": "completed", "director": "skipped", "end": "completed"}},
		{name: "exclusive choice, long leave: the director's branch merges at end", def: leaveDef, ctx: `{"days":5}`,
			steps:  []decision{approveAt("manager", "mia"), approveAt("director", "dan")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"manager": "completed", "director": "completed", "end": "completed"}},
		{name: "exclusive choice, long leave: the director rejects", def: leaveDef, ctx: `{"days":5}`,
			steps:  []decision{approveAt("manager", "mia"), rejectAt("director", "dan")},
			status: model.StatusRejected, nodes: map[string]model.NodeState{"director": "rejected", "end": "skipped"}},
		{name: "exclusive choice: the manager rejects", def: leaveDef, ctx: `{"days":1}`,
			steps:  []decision{rejectAt("manager", "mia")},
			status: model.StatusRejected, nodes: map[string]model.NodeState{"manager": "rejected", "director": "skipped", "end": "skipped"}},
		{name: "contract example, level 1: grant after lead alone", def: contractDef, ctx: `{"level":1}`,
			steps:  []decision{approveAt("lead", "bob")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"lead": "completed", "dba": "skipped", "grant": "completed", "end": "completed"}},
		{name: "contract example, level 3: grant waits for both", def: contractDef, ctx: `{"level":3}`,
			steps:  []decision{approveAt("lead", "bob"), approveAt("dba", "dora")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"dba": "completed", "grant": "completed"}, activate: map[string]int{"grant": 1}},
		{name: "multi-choice, two of three chosen: and merges exactly those", def: fmt.Sprintf(multiDef, ""), ctx: `{"a":true,"b":true}`,
			steps:  []decision{approveAt("b", "bob"), approveAt("a", "ann"), approveAt("j", "jo")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"a": "completed", "b": "completed", "c": "skipped", "j": "completed"},
			activate: map[string]int{"j": 1}},
		{name: "multi-choice, one chosen", def: fmt.Sprintf(multiDef, ""), ctx: `{"c":true}`,
			steps:  []decision{approveAt("c", "cat"), approveAt("j", "jo")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"a": "skipped", "b": "skipped", "c": "completed", "j": "completed"}},
		{name: "multi-choice, none chosen: no_route fails the gate", def: fmt.Sprintf(multiDef, ""), ctx: `{}`,
			status: model.StatusFailed, nodes: map[string]model.NodeState{"gate": "failed", "a": "", "j": ""}, errCode: model.NodeErrNoRoute},
		{name: "rejection inside a chosen branch kills the and join", def: fmt.Sprintf(multiDef, ""), ctx: `{"a":true,"b":true}`,
			steps:  []decision{approveAt("b", "bob"), rejectAt("a", "ann")},
			status: model.StatusRejected, nodes: map[string]model.NodeState{"a": "rejected", "b": "completed", "c": "skipped", "j": "skipped", "end": "skipped"}},
		{name: "rejection first: the other chosen branch is cancelled", def: fmt.Sprintf(multiDef, ""), ctx: `{"a":true,"b":true}`,
			steps:  []decision{rejectAt("a", "ann")},
			status: model.StatusRejected, nodes: map[string]model.NodeState{"a": "rejected", "b": "cancelled", "j": "skipped"}},
		{name: "nested splits, small amount: the lead alone", def: nestedDef, ctx: `{"amount":10}`,
			steps:  []decision{approveAt("lead", "lee")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"finance": "skipped", "legal": "skipped", "controller": "skipped", "fin-done": "skipped", "end": "completed"}},
		{name: "nested splits, big amount without contract: inner merge of one branch", def: nestedDef, ctx: `{"amount":5000}`,
			steps:  []decision{approveAt("controller", "con")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"lead": "skipped", "legal": "skipped", "controller": "completed", "fin-done": "completed", "end": "completed"}},
		{name: "nested splits, big contract: both inner branches", def: nestedDef, ctx: `{"amount":5000,"contract":true}`,
			steps:  []decision{approveAt("legal", "lex"), approveAt("controller", "con")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"legal": "completed", "controller": "completed", "fin-done": "completed"}},
		{name: "nested splits, legal rejects", def: nestedDef, ctx: `{"amount":5000,"contract":true}`,
			steps:  []decision{approveAt("controller", "con"), rejectAt("legal", "lex")},
			status: model.StatusRejected, nodes: map[string]model.NodeState{"legal": "rejected", "fin-done": "skipped", "end": "skipped"}},
		{name: "failure inside one branch fails the instance with its code", def: failDef, ctx: `{}`,
			status: model.StatusFailed, nodes: map[string]model.NodeState{"a": "failed", "b": "cancelled", "j": ""}, errCode: model.NodeErrPluginFailed},
		{name: "min 2 of 3, all chosen: fires at the second approval, the third is absorbed", def: fmt.Sprintf(multiDef, `,"join":{"min":2}`),
			ctx:    `{"a":true,"b":true,"c":true}`,
			steps:  []decision{approveAt("a", "ann"), approveAt("c", "cat"), approveAt("b", "bob"), approveAt("j", "jo")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"a": "completed", "b": "completed", "c": "completed", "j": "completed"},
			activate: map[string]int{"j": 1}},
		{name: "min 2 of 3 with one pruned input: both chosen needed", def: fmt.Sprintf(multiDef, `,"join":{"min":2}`), ctx: `{"a":true,"c":true}`,
			steps:  []decision{approveAt("a", "ann"), approveAt("c", "cat"), approveAt("j", "jo")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"b": "skipped", "j": "completed"}},
		{name: "min 2 of 3 with two pruned inputs: stranded at once, no_route", def: fmt.Sprintf(multiDef, `,"join":{"min":2}`), ctx: `{"a":true}`,
			status: model.StatusFailed, nodes: map[string]model.NodeState{"a": "cancelled", "j": "skipped", "end": "skipped"}, errCode: model.NodeErrNoRoute},
		{name: "min 2 of 3 with one pruned input and a rejection: killed", def: fmt.Sprintf(multiDef, `,"join":{"min":2}`), ctx: `{"a":true,"c":true}`,
			steps:  []decision{approveAt("a", "ann"), rejectAt("c", "cat")},
			status: model.StatusRejected, nodes: map[string]model.NodeState{"c": "rejected", "j": "skipped"}},
		{name: "min 2 of 3: a rejection after it fired changes nothing", def: fmt.Sprintf(multiDef, `,"join":{"min":2}`), ctx: `{"a":true,"b":true,"c":true}`,
			steps:  []decision{approveAt("a", "ann"), approveAt("b", "bob"), rejectAt("c", "cat"), approveAt("j", "jo")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"c": "rejected", "j": "completed", "end": "completed"}},
		{name: "or absorbs a late arrival", def: orDef, ctx: `{}`,
			steps:  []decision{approveAt("a", "ann"), approveAt("b", "bob"), approveAt("j", "jo")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"a": "completed", "b": "completed", "j": "completed"}, activate: map[string]int{"j": 1}},
		{name: "or: a rejection on one branch, the other goes on", def: orDef, ctx: `{}`,
			steps:  []decision{rejectAt("a", "ann"), approveAt("b", "bob"), approveAt("j", "jo")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"a": "rejected", "j": "completed"}},
		{name: "or: both rejected", def: orDef, ctx: `{}`,
			steps:  []decision{rejectAt("a", "ann"), rejectAt("b", "bob")},
			status: model.StatusRejected, nodes: map[string]model.NodeState{"j": "skipped"}},
		{name: "a pruned branch two nodes deep: and merges the other", def: prunedChainDef, ctx: `{"x":false}`,
			steps:  []decision{approveAt("y", "bob")},
			status: model.StatusCompleted, nodes: map[string]model.NodeState{"x1": "skipped", "x2": "skipped", "y": "completed", "j": "completed"}},
	}
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("mia", "dan", "bob", "dora", "ann", "cat", "jo", "lee", "lex", "con", "starter")
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				h := h.sub(t)
				key := fmt.Sprintf("join-%d", i)
				h.publish(key, tc.def)
				id := h.start("starter", key, tc.ctx)
				for _, st := range tc.steps {
					h.decide(id, st.node, st.user, st.approve)
				}
				h.wantStatus(id, tc.status)
				h.wantNodes(id, tc.nodes)
				for node, n := range tc.activate {
					if got := h.count(id, "node.activated", node); got != n {
						t.Fatalf("%s activated %d times, want %d; history %v", node, got, n, h.actions(id))
					}
				}
				inst, tasks := h.get(id)
				for _, tk := range tasks {
					if tk.Open() {
						t.Fatalf("task %s at %s still %s after the instance ended %s", tk.ID, tk.NodeID, tk.Status, inst.Status)
					}
				}
				switch {
				case tc.errCode == "" && inst.State.Error != nil:
					t.Fatalf("instance error %+v, want none", inst.State.Error)
				case tc.errCode != "" && (inst.State.Error == nil || inst.State.Error.Code != tc.errCode):
					t.Fatalf("instance error %+v, want code %s", inst.State.Error, tc.errCode)
				}
			})
		}
	})
}

// TestSkipRecordsPrunedOrKilled checks what the history and the edge states say about a skip.
func TestSkipRecordsPrunedOrKilled(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("mia", "dan", "ann")
		h.publish("leave", leaveDef)
		id := h.start("ann", "leave", `{"days":1}`)
		inst, _ := h.get(id)
		// Edges in definition order: start→manager taken; manager's edges not decided yet.
		if got := inst.State.Edges; got[0] != model.EdgeTaken || got[1] != model.EdgeUnknown || got[2] != model.EdgeUnknown {
			t.Fatalf("edges after start %v", got)
		}
		h.decide(id, "manager", "mia", true)
		inst, _ = h.get(id)
		want := []byte{model.EdgeTaken, model.EdgePruned, model.EdgeTaken, model.EdgePruned}
		if string(inst.State.Edges) != string(want) {
			t.Fatalf("edges %v, want %v", inst.State.Edges, want)
		}
		for _, e := range h.history(id) {
			if e.Action == "node.skipped" && e.NodeID == "director" {
				var d struct{ As string }
				_ = json.Unmarshal(e.Data, &d)
				if d.As != "pruned" {
					t.Fatalf("director skipped as %q, want pruned", d.As)
				}
			}
		}

		id = h.start("ann", "leave", `{"days":9}`)
		h.decide(id, "manager", "mia", true)
		h.decide(id, "director", "dan", false)
		inst, _ = h.get(id)
		want = []byte{model.EdgeTaken, model.EdgeTaken, model.EdgePruned, model.EdgeKilled}
		if string(inst.State.Edges) != string(want) {
			t.Fatalf("edges after the director's rejection %v, want %v", inst.State.Edges, want)
		}
	})
}

// TestReadyMadeLeaveTemplate runs templates/leave.json: a short leave needs the team lead only, a long one the
// department leader too, merging at End with its default join.
func TestReadyMadeLeaveTemplate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("lea", "dora", "hr1")
		if err := h.ids.CreateDepartment(h.ctx, model.DefaultTenant, &model.Department{Name: "eng", Leader: "dora"}); err != nil {
			t.Fatal(err)
		}
		h.user(identity.CreateUserRequest{Username: "emp", Manager: "lea", Department: "eng"})
		all, err := templates.All()
		if err != nil {
			t.Fatal(err)
		}
		for _, tpl := range all {
			if tpl.Key == "leave" {
				h.publish("leave", string(tpl.Definition))
			}
		}
		short := h.start("emp", "leave", `{"days":2}`)
		h.decide(short, "lead", "lea", true)
		h.wantStatus(short, model.StatusCompleted)
		h.wantNodes(short, map[string]model.NodeState{"manager": "skipped", "end": "completed"})

		long := h.start("emp", "leave", `{"days":5}`)
		h.decide(long, "lead", "lea", true)
		h.wantNodes(long, map[string]model.NodeState{"manager": "active", "end": ""})
		h.decide(long, "manager", "dora", true)
		h.wantStatus(long, model.StatusCompleted)

		refused := h.start("emp", "leave", `{"days":5}`)
		h.decide(refused, "lead", "lea", true)
		h.decide(refused, "manager", "dora", false)
		h.wantStatus(refused, model.StatusRejected)
	})
}
