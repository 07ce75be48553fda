package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// cometDef is Comet's example (seeds/003): A starts, B and C run in parallel, D needs them (join), E ends.
func cometDef(join string) string {
	return fmt.Sprintf(`{"nodes":[
		{"id":"A","type":"start","name":"Apply","trigger":{"kind":"manual"}},
		{"id":"B","type":"approval","approvers":{"users":["bob"]}},
		{"id":"C","type":"approval","approvers":{"users":["carol"]}},
		{"id":"D","type":"approval","join":%q,"approvers":{"users":["dave"]}},
		{"id":"E","type":"end"}],
	 "edges":[{"from":"A","to":"B"},{"from":"A","to":"C"},{"from":"B","to":"D"},{"from":"C","to":"D"},{"from":"D","to":"E"}]}`, join)
}

func TestCometExample(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "bob", "carol", "dave")
		h.publish("comet-and", cometDef("and"))
		h.publish("comet-or", cometDef("or"))

		t.Run("and join: reject C rejects the instance", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "comet-and", `{}`)
			h.wantNodes(id, map[string]model.NodeState{"A": "completed", "B": "active", "C": "active", "D": "", "E": ""})
			h.wantTasks(id, "B", map[string]model.TaskStatus{"bob": "pending"})
			h.wantTasks(id, "C", map[string]model.TaskStatus{"carol": "pending"})

			h.decide(id, "C", "carol", false)
			h.wantStatus(id, model.StatusRejected)
			h.wantNodes(id, map[string]model.NodeState{"A": "completed", "B": "cancelled", "C": "rejected", "D": "skipped", "E": "skipped"})
			h.wantTasks(id, "B", map[string]model.TaskStatus{"bob": "cancelled"})
			h.wantTasks(id, "C", map[string]model.TaskStatus{"carol": "rejected"})
			if n := len(h.tasksOf(id, "D")); n != 0 {
				t.Fatalf("skipped D has %d tasks", n)
			}
			if h.count(id, "node.rejected", "C") != 1 || h.count(id, "node.skipped", "D") != 1 || h.count(id, "instance.rejected", "") != 1 {
				t.Fatalf("history: %v", h.actions(id))
			}
			// Nothing is left open in the database.
			if n := h.rows("tasks", "instance_id = ? AND status IN ?", id, []string{"pending", "waiting"}); n != 0 {
				t.Fatalf("%d open task rows after the rejection", n)
			}
			wantErr(t, h.approve("bob", h.task(id, "B", "bob").ID), model.ECONFLICT, "")
		})

		t.Run("and join: B approved first, then C rejected", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "comet-and", `{}`)
			h.decide(id, "B", "bob", true)
			h.wantStatus(id, model.StatusRunning)
			h.decide(id, "C", "carol", false)
			h.wantStatus(id, model.StatusRejected)
			h.wantNodes(id, map[string]model.NodeState{"B": "completed", "C": "rejected", "D": "skipped", "E": "skipped"})
		})

		t.Run("and join: both approved", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "comet-and", `{}`)
			h.decide(id, "B", "bob", true)
			h.wantNodes(id, map[string]model.NodeState{"D": ""}) // waits for C
			h.decide(id, "C", "carol", true)
			h.wantNodes(id, map[string]model.NodeState{"D": "active"})
			h.decide(id, "D", "dave", true)
			h.wantStatus(id, model.StatusCompleted)
			h.wantNodes(id, map[string]model.NodeState{"A": "completed", "B": "completed", "C": "completed", "D": "completed", "E": "completed"})
		})

		t.Run("or join: reject C and the instance runs on through B", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "comet-or", `{}`)
			h.decide(id, "C", "carol", false)
			h.wantStatus(id, model.StatusRunning)
			h.wantNodes(id, map[string]model.NodeState{"B": "active", "C": "rejected", "D": ""})
			h.wantTasks(id, "B", map[string]model.TaskStatus{"bob": "pending"})

			h.decide(id, "B", "bob", true)
			h.wantNodes(id, map[string]model.NodeState{"B": "completed", "D": "active"})
			h.decide(id, "D", "dave", true)
			h.wantStatus(id, model.StatusCompleted)
			h.wantNodes(id, map[string]model.NodeState{"A": "completed", "B": "completed", "C": "rejected", "D": "completed", "E": "completed"})
			if h.count(id, "node.activated", "D") != 1 {
				t.Fatalf("D activated %d times", h.count(id, "node.activated", "D"))
			}
		})

		t.Run("or join: both rejected rejects the instance", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "comet-or", `{}`)
			h.decide(id, "C", "carol", false)
			h.decide(id, "B", "bob", false)
			h.wantStatus(id, model.StatusRejected)
			h.wantNodes(id, map[string]model.NodeState{"B": "rejected", "C": "rejected", "D": "skipped", "E": "skipped"})
		})
	})
}

// routeDef routes on context.amount: big amounts go through two finance steps, the rest (default edge) through
// the lead; both branches meet at an `or` join.
const routeDef = `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"check","type":"auto"},
	{"id":"big","type":"auto"},
	{"id":"cfo","type":"approval","approvers":{"users":["cfo"]}},
	{"id":"lead","type":"approval","approvers":{"users":["lead"]}},
	{"id":"merge","type":"auto","join":"or"},
	{"id":"end","type":"end"}],
 "edges":[
	{"from":"start","to":"check"},
	{"from":"check","to":"big","condition":{"amount":{"$gt":1000}}},
	{"from":"check","to":"lead","default":true},
	{"from":"big","to":"cfo"},
	{"from":"cfo","to":"merge"},
	{"from":"lead","to":"merge"},
	{"from":"merge","to":"end"}]}`

func TestConditionsAndDeadPaths(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "cfo", "lead", "bob", "carol", "ops")
		h.publish("route", routeDef)

		t.Run("default edge taken when no sibling is; dead path skipped two levels deep", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "route", `{"amount":50}`)
			h.wantStatus(id, model.StatusRunning)
			h.wantNodes(id, map[string]model.NodeState{"check": "completed", "big": "skipped", "cfo": "skipped", "lead": "active", "merge": ""})
			if n := len(h.tasksOf(id, "cfo")); n != 0 {
				t.Fatalf("skipped cfo has %d tasks", n)
			}
			h.decide(id, "lead", "lead", true)
			h.wantStatus(id, model.StatusCompleted)
			h.wantNodes(id, map[string]model.NodeState{"big": "skipped", "cfo": "skipped", "lead": "completed", "merge": "completed", "end": "completed"})
			if h.count(id, "node.activated", "big") != 0 || h.count(id, "node.activated", "cfo") != 0 {
				t.Fatalf("skipped nodes were activated: %v", h.actions(id))
			}
		})

		t.Run("default edge dead when a sibling is taken", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "route", `{"amount":5000}`)
			h.wantStatus(id, model.StatusRunning)
			h.wantNodes(id, map[string]model.NodeState{"check": "completed", "big": "completed", "cfo": "active", "lead": "skipped", "merge": ""})
			if n := len(h.tasksOf(id, "lead")); n != 0 {
				t.Fatalf("skipped lead has %d tasks", n)
			}
			h.decide(id, "cfo", "cfo", true)
			h.wantStatus(id, model.StatusCompleted)
			h.wantNodes(id, map[string]model.NodeState{"lead": "skipped", "merge": "completed", "end": "completed"})
		})

		t.Run("or join activates exactly once when both branches arrive", func(t *testing.T) {
			h := h.sub(t)
			h.publish("orjoin", `{"nodes":[
				{"id":"start","type":"start","trigger":{"kind":"manual"}},
				{"id":"a","type":"approval","approvers":{"users":["bob"]}},
				{"id":"b","type":"approval","approvers":{"users":["carol"]}},
				{"id":"j","type":"approval","join":"or","approvers":{"users":["lead"]}},
				{"id":"end","type":"end"}],
			 "edges":[{"from":"start","to":"a"},{"from":"start","to":"b"},{"from":"a","to":"j"},{"from":"b","to":"j"},{"from":"j","to":"end"}]}`)
			id := h.start("ann", "orjoin", `{}`)
			h.decide(id, "a", "bob", true)
			h.wantNodes(id, map[string]model.NodeState{"a": "completed", "b": "active", "j": "active"})
			h.decide(id, "b", "carol", true)
			h.wantNodes(id, map[string]model.NodeState{"b": "completed", "j": "active"})
			if n := h.count(id, "node.activated", "j"); n != 1 {
				t.Fatalf("j activated %d times", n)
			}
			h.wantTasks(id, "j", map[string]model.TaskStatus{"lead": "pending"})
			if n := len(h.tasksOf(id, "j")); n != 1 {
				t.Fatalf("j has %d tasks, want 1", n)
			}
			h.decide(id, "j", "lead", true)
			h.wantStatus(id, model.StatusCompleted)
			if n := h.count(id, "node.completed", "end"); n != 1 {
				t.Fatalf("end completed %d times", n)
			}
		})

		t.Run("no route out of a node: throw fails the instance", func(t *testing.T) {
			h := h.sub(t)
			h.publish("noroute", `{"nodes":[
				{"id":"start","type":"start","trigger":{"kind":"manual"}},
				{"id":"gate","type":"auto"},
				{"id":"x","type":"approval","approvers":{"users":["bob"]}},
				{"id":"y","type":"approval","approvers":{"users":["carol"]}},
				{"id":"end","type":"end","join":"or"}],
			 "edges":[{"from":"start","to":"gate"},
				{"from":"gate","to":"x","condition":{"kind":"x"}},{"from":"gate","to":"y","condition":{"kind":"y"}},
				{"from":"x","to":"end"},{"from":"y","to":"end"}]}`)
			id := h.start("ann", "noroute", `{"kind":"z"}`)
			h.wantStatus(id, model.StatusFailed)
			h.wantNodes(id, map[string]model.NodeState{"gate": "failed", "x": "", "y": ""})
			inst, tasks := h.get(id)
			if len(tasks) != 0 {
				t.Fatalf("tasks after no route: %v", tasks)
			}
			if inst.State.Nodes["gate"].Error == "" || h.count(id, "node.error", "gate") != 1 || h.count(id, "instance.failed", "") != 1 {
				t.Fatalf("history %v, gate error %q", h.actions(id), inst.State.Nodes["gate"].Error)
			}
			// The route that matches still works.
			ok := h.start("ann", "noroute", `{"kind":"y"}`)
			h.wantNodes(ok, map[string]model.NodeState{"gate": "completed", "x": "skipped", "y": "active"})
		})

		t.Run("no route out of a node: the error node's path runs with context.error", func(t *testing.T) {
			h := h.sub(t)
			h.publish("noroute-caught", `{"nodes":[
				{"id":"start","type":"start","trigger":{"kind":"manual"}},
				{"id":"gate","type":"auto"},
				{"id":"x","type":"approval","approvers":{"users":["bob"]}},
				{"id":"end","type":"end"},
				{"id":"oops","type":"error"},
				{"id":"fix","type":"approval","approvers":{"users":["ops"]}},
				{"id":"end2","type":"end"}],
			 "edges":[{"from":"start","to":"gate"},{"from":"gate","to":"x","condition":{"kind":"x"}},{"from":"x","to":"end"},
				{"from":"oops","to":"fix"},{"from":"fix","to":"end2"}]}`)
			id := h.start("ann", "noroute-caught", `{"kind":"z"}`)
			h.wantStatus(id, model.StatusRunning)
			// The failed node's outgoing edges are killed, as a catch would: x and end are skipped.
			h.wantNodes(id, map[string]model.NodeState{"gate": "failed", "x": "skipped", "end": "skipped", "oops": "completed", "fix": "active"})
			if got := h.contextValue(id, "error.node_id").String(); got != "gate" {
				t.Fatalf("context.error.node_id = %q", got)
			}
			if h.contextValue(id, "error.message").String() == "" {
				t.Fatalf("context.error.message is empty: %s", h.contextValue(id, "error").Raw)
			}
			if h.count(id, "error.thrown", "gate") != 1 {
				t.Fatalf("history: %v", h.actions(id))
			}
			h.decide(id, "fix", "ops", true)
			h.wantStatus(id, model.StatusCompleted)
			h.wantNodes(id, map[string]model.NodeState{"fix": "completed", "end2": "completed", "end": "skipped"})
		})
	})
}

func TestHistoryOfASimpleFlow(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "bob")
		h.publish("simple", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},{"id":"lead","type":"approval","approvers":{"users":["bob"]}},{"id":"end","type":"end"}],
			"edges":[{"from":"start","to":"lead"},{"from":"lead","to":"end"}]}`)
		id := h.start("ann", "simple", `{}`)
		h.decide(id, "lead", "bob", true)
		h.wantStatus(id, model.StatusCompleted)
		want := []string{"instance.started", "node.activated:start", "node.completed:start", "node.activated:lead", "task.created:lead",
			"task.approved:lead", "node.completed:lead", "node.activated:end", "node.completed:end", "instance.completed"}
		if got := h.actions(id); !slices.Equal(got, want) {
			t.Fatalf("history\n got %v\nwant %v", got, want)
		}
		hs := h.history(id)
		if hs[0].Actor != "ann" || hs[5].Actor != "bob" || hs[5].TaskID != h.task(id, "lead", "bob").ID || hs[5].Comment != "ok" {
			t.Fatalf("history details: %+v", hs[5])
		}
		for i := 1; i < len(hs); i++ { // a step's events share their row's seq
			if hs[i].Seq < hs[i-1].Seq || hs[i].At.Before(hs[i-1].At) {
				t.Fatalf("history out of order at %d", i)
			}
		}
	})
}

func TestNoRouteWithErrorHandlers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "bob", "carol")
		// A side branch whose gate has no route: with `ignore`, its paths are dead and the main branch runs on.
		h.publish("side-ignore", `{"nodes":[
			{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"main","type":"approval","approvers":{"users":["bob"]}},
			{"id":"gate","type":"auto","error_handler":{"operation":"ignore"}},
			{"id":"side","type":"approval","approvers":{"users":["carol"]}},
			{"id":"end","type":"end","join":"or"}],
		 "edges":[{"from":"start","to":"main"},{"from":"start","to":"gate"},{"from":"gate","to":"side","condition":{"side":true}},
			{"from":"main","to":"end"},{"from":"side","to":"end"}]}`)
		id := h.start("ann", "side-ignore", `{"side":false}`)
		h.wantStatus(id, model.StatusRunning)
		h.wantNodes(id, map[string]model.NodeState{"gate": "completed", "side": "skipped", "main": "active"})
		if h.count(id, "node.error", "gate") != 1 || h.count(id, "node.error_ignored", "gate") != 1 {
			t.Fatalf("history %v", h.actions(id))
		}
		h.decide(id, "main", "bob", true)
		h.wantStatus(id, model.StatusCompleted)

		// With `catch`, the catch branch runs and context.error names the node.
		h.publish("catch", `{"nodes":[
			{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"gate","type":"auto","error_handler":{"operation":"catch","catch":{"branch":"fix"}}},
			{"id":"x","type":"approval","approvers":{"users":["bob"]}},
			{"id":"fix","type":"approval","approvers":{"users":["carol"]}},
			{"id":"end","type":"end","join":"or"}],
		 "edges":[{"from":"start","to":"gate"},{"from":"gate","to":"x","condition":{"go":true}},{"from":"x","to":"end"},{"from":"fix","to":"end"}]}`)
		id = h.start("ann", "catch", `{}`)
		h.wantStatus(id, model.StatusRunning)
		h.wantNodes(id, map[string]model.NodeState{"gate": "failed", "x": "skipped", "fix": "active"})
		if h.contextValue(id, "error.node_id").String() != "gate" || h.contextValue(id, "error.code").String() != "no_route" {
			t.Fatalf("context.error %s", h.contextValue(id, "error").Raw)
		}
		h.decide(id, "fix", "carol", true)
		h.wantStatus(id, model.StatusCompleted)
	})
}
