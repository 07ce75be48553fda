package engine_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// Approval rules (API.md "Approval rules"): who the Rules (service/rules) say decides a node, as the engine
// records it.

// org creates an organisation: ann → lead → dir (director) → ceo, a manager loop x → y → z → y, boss with no
// manager, root the admin, and the departments eng (under hq) and hq with members.
func (h *harness) org() {
	h.t.Helper()
	for _, u := range []identity.CreateUserRequest{
		{Username: "ann", Manager: "lead", Department: "eng"},
		{Username: "lead", Manager: "dir", Department: "eng", Roles: []string{"dba"}},
		{Username: "dir", Manager: "ceo", Department: "hq", Roles: []string{"director"}},
		{Username: "ceo", Department: "hq", Roles: []string{"director", "dba"}},
		{Username: "x", Manager: "y"}, {Username: "y", Manager: "z"}, {Username: "z", Manager: "y"},
		{Username: "boss", Department: "ops"},
		{Username: "root", Roles: []string{model.RoleAdmin}},
		{Username: "eve", Department: "eng"},
	} {
		h.user(u)
	}
	for _, d := range []model.Department{{Name: "hq", Leader: "ceo"}, {Name: "eng", Leader: "lead", Parent: "hq"}, {Name: "ops", Parent: "hq"}} {
		d := d
		if err := h.ids.CreateDepartment(h.ctx, model.DefaultTenant, &d); err != nil {
			h.t.Fatal(err)
		}
	}
}

// assignees lists the assignees of a node's tasks in creation order as "user:status".
func (h *harness) assignees(id, node string) []string {
	h.t.Helper()
	var out []string
	for _, t := range h.tasksOf(id, node) {
		out = append(out, t.Assignee+":"+string(t.Status))
	}
	return out
}

// notes returns the data of the history items of an action.
func (h *harness) notes(id, action string) []map[string]any {
	h.t.Helper()
	var out []map[string]any
	for _, e := range h.history(id) {
		if e.Action == action {
			var d map[string]any
			_ = json.Unmarshal(e.Data, &d)
			out = append(out, d)
		}
	}
	return out
}

func want(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s %v, want %v", what, got, want)
	}
}

func TestManagerChains(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.org()
		h.publish("lv2", oneNode(`{"id":"n","type":"approval","approvers":{"relation":"initiator.managers","levels":2}}`))
		h.publish("lv20", oneNode(`{"id":"n","type":"approval","approvers":{"relation":"initiator.managers","levels":20}}`))
		h.publish("until", oneNode(`{"id":"n","type":"approval","approvers":{"relation":"initiator.managers","until_role":"director"}}`))
		h.publish("chain-all", oneNode(`{"id":"n","type":"approval","sign":"all","approvers":{"relation":"initiator.managers","levels":2}}`))
		h.publish("dept", oneNode(`{"id":"n","type":"approval","sign":"all","approvers":{"departments":["eng"]}}`))

		t.Run("levels: nearest first, sequential by default", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "lv2", `{}`)
			want(t, "tasks", h.assignees(id, "n"), []string{"lead:pending", "dir:waiting"})
			h.decide(id, "n", "lead", true)
			want(t, "tasks", h.assignees(id, "n"), []string{"lead:approved", "dir:pending"})
			h.decide(id, "n", "dir", true)
			h.wantStatus(id, model.StatusCompleted)
		})
		t.Run("a chain shorter than levels gives fewer approvers", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "lv20", `{}`)
			want(t, "tasks", h.assignees(id, "n"), []string{"lead:pending", "dir:waiting", "ceo:waiting"})
		})
		t.Run("until_role stops at and includes the first holder", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "until", `{}`)
			want(t, "tasks", h.assignees(id, "n"), []string{"lead:pending", "dir:waiting"})
		})
		t.Run("sign all overrides the sequential default", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "chain-all", `{}`)
			want(t, "tasks", h.assignees(id, "n"), []string{"lead:pending", "dir:pending"})
		})
		t.Run("a loop in the manager data ends the chain", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("x", "lv20", `{}`)
			want(t, "tasks", h.assignees(id, "n"), []string{"y:pending", "z:waiting"})
			if n := h.notes(id, "approver.chain_loop"); len(n) != 1 || n[0]["manager"] != "y" {
				t.Fatalf("loop notes %v", n)
			}
			idu := h.start("x", "until", `{}`) // nobody holds director up this chain: the whole chain, once
			want(t, "tasks", h.assignees(idu, "n"), []string{"y:pending", "z:waiting"})
		})
		t.Run("departments: every member", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("boss", "dept", `{}`)
			want(t, "tasks", h.assignees(id, "n"), []string{"ann:pending", "eve:pending", "lead:pending"})
		})
		t.Run("no manager: on_no_approver error by default", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("boss", "lv2", `{}`)
			h.wantStatus(id, model.StatusFailed)
			inst, _ := h.get(id)
			if e := inst.State.Error; e == nil || e.Code != model.NodeErrNoApprover {
				t.Fatalf("error %+v", inst.State.Error)
			}
		})
	})
}

func TestOnNoApprover(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.org()
		for _, p := range []string{"pass", "reject", "admins", "error"} {
			h.publish("nobody-"+p, `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
				{"id":"n","type":"approval","on_no_approver":"`+p+`","approvers":{"relation":"initiator.manager"}},
				{"id":"after","type":"approval","approvers":{"users":["eve"]}},{"id":"end","type":"end"}],
				"edges":[{"from":"start","to":"n"},{"from":"n","to":"after"},{"from":"after","to":"end"}]}`)
		}
		t.Run("pass: an automatic approval with its reason", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("boss", "nobody-pass", `{}`)
			h.wantNodes(id, map[string]model.NodeState{"n": model.NodeCompleted, "after": model.NodeActive})
			ts := h.tasksOf(id, "n")
			if len(ts) != 1 || !ts[0].Auto || ts[0].Status != model.TaskApproved || ts[0].Assignee != "" {
				t.Fatalf("tasks %+v", ts[0])
			}
			if n := h.notes(id, "task.auto_approved"); len(n) != 1 || n[0]["reason"] != model.AutoNoApprover {
				t.Fatalf("auto_approved %v", n)
			}
		})
		t.Run("reject: an automatic rejection rejects the node", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("boss", "nobody-reject", `{}`)
			h.wantStatus(id, model.StatusRejected)
			ts := h.tasksOf(id, "n")
			if len(ts) != 1 || !ts[0].Auto || ts[0].Status != model.TaskRejected {
				t.Fatalf("tasks %+v", ts)
			}
			if n := h.notes(id, "task.auto_rejected"); len(n) != 1 || n[0]["reason"] != model.AutoNoApprover {
				t.Fatalf("auto_rejected %v", n)
			}
		})
		t.Run("admins: the tenant's admins decide", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("boss", "nobody-admins", `{}`)
			want(t, "tasks", h.assignees(id, "n"), []string{"root:pending"})
			if n := h.notes(id, "approver.admins"); len(n) != 1 || n[0]["reason"] != model.AutoNoApprover {
				t.Fatalf("approver.admins %v", n)
			}
			h.decide(id, "n", "root", true)
			h.wantNodes(id, map[string]model.NodeState{"n": model.NodeCompleted})
		})
		t.Run("error: the node error no_approver", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("boss", "nobody-error", `{}`)
			h.wantStatus(id, model.StatusFailed)
		})
		t.Run("a manager is found: the policy does not apply", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "nobody-pass", `{}`)
			want(t, "tasks", h.assignees(id, "n"), []string{"lead:pending"})
		})
	})
}

func TestRolesSeenFromTheInitiator(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.org()
		h.publish("tenant", oneNode(`{"id":"n","type":"approval","sign":"all","approvers":{"roles":["dba"]}}`))
		h.publish("dept", oneNode(`{"id":"n","type":"approval","sign":"all","on_no_approver":"reject","approvers":{"roles":["dba"],"scope":"initiator.department"}}`))
		h.publish("tree", oneNode(`{"id":"n","type":"approval","sign":"all","approvers":{"roles":["dba"],"scope":"initiator.department_tree"}}`))
		id := h.start("ann", "tenant", `{}`)
		want(t, "tenant", h.assignees(id, "n"), []string{"ceo:pending", "lead:pending"})
		id = h.start("ann", "dept", `{}`) // eng holds lead
		want(t, "department", h.assignees(id, "n"), []string{"lead:pending"})
		id = h.start("boss", "dept", `{}`) // ops holds no dba: nobody, rejected by its policy
		h.wantStatus(id, model.StatusRejected)
		id = h.start("boss", "tree", `{}`) // ops → hq, which holds ceo
		want(t, "tree", h.assignees(id, "n"), []string{"ceo:pending"})
		id = h.start("ann", "tree", `{}`) // the nearest: eng itself
		want(t, "tree from eng", h.assignees(id, "n"), []string{"lead:pending"})
	})
}

// withOptions is a one-node definition with definition options.
func withOptions(options, node string) string {
	return `{"options":` + options + `,"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},` + node + `,{"id":"end","type":"end"}],
		"edges":[{"from":"start","to":"n"},{"from":"n","to":"end"}]}`
}

func TestSelfApprovalWithEverySignMode(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.org()
		pass := `{"self_approval":"pass"}`
		h.publish("or", withOptions(pass, `{"id":"n","type":"approval","sign":"or","approvers":{"users":["ann","eve"]}}`))
		h.publish("all", withOptions(pass, `{"id":"n","type":"approval","sign":"all","approvers":{"users":["ann","eve"]}}`))
		h.publish("seq-mid", withOptions(pass, `{"id":"n","type":"approval","sign":"sequential","approvers":{"users":["eve","ann","lead"]}}`))
		h.publish("seq-first", withOptions(pass, `{"id":"n","type":"approval","sign":"sequential","approvers":{"users":["ann","eve"]}}`))
		h.publish("vote", withOptions(pass, `{"id":"n","type":"approval","sign":"vote","pass_ratio":0.6,"approvers":{"users":["ann","eve","lead"]}}`))
		h.publish("allow", withOptions(`{}`, `{"id":"n","type":"approval","sign":"all","approvers":{"users":["ann","eve"]}}`))
		h.publish("manager", withOptions(`{"self_approval":"manager"}`, `{"id":"n","type":"approval","sign":"all","approvers":{"users":["ann","eve"]}}`))
		h.publish("manager-dup", withOptions(`{"self_approval":"manager"}`, `{"id":"n","type":"approval","sign":"all","approvers":{"users":["ann","lead"]}}`))
		h.publish("manager-alone", withOptions(`{"self_approval":"manager"}`, `{"id":"n","type":"approval","approvers":{"users":["boss"]}}`))
		h.publish("manager-alone-pass", withOptions(`{"self_approval":"manager"}`, `{"id":"n","type":"approval","on_no_approver":"pass","approvers":{"users":["boss"]}}`))
		h.publish("manager-others", withOptions(`{"self_approval":"manager"}`, `{"id":"n","type":"approval","sign":"all","approvers":{"users":["boss","eve"]}}`))

		autoReason := func(t *testing.T, id, user string) {
			t.Helper()
			tk := h.task(id, "n", user)
			if !tk.Auto || tk.Status != model.TaskApproved {
				t.Fatalf("%s's task %+v, want approved automatically", user, tk)
			}
			for _, d := range h.notes(id, "task.auto_approved") {
				if d["assignee"] == user && d["reason"] == model.AutoSelfApproval {
					return
				}
			}
			t.Fatalf("no task.auto_approved self_approval for %s: %v", user, h.notes(id, "task.auto_approved"))
		}
		t.Run("or: the initiator's automatic approval decides the node", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "or", `{}`)
			autoReason(t, id, "ann")
			want(t, "tasks", h.assignees(id, "n"), []string{"ann:approved", "eve:cancelled"})
			h.wantStatus(id, model.StatusCompleted)
		})
		t.Run("all: only the initiator is approved automatically, the others still decide", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "all", `{}`)
			autoReason(t, id, "ann")
			want(t, "tasks", h.assignees(id, "n"), []string{"ann:approved", "eve:pending"})
			h.decide(id, "n", "eve", true)
			h.wantStatus(id, model.StatusCompleted)
		})
		t.Run("sequential: the initiator is approved when their turn comes, in order", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "seq-mid", `{}`)
			want(t, "tasks", h.assignees(id, "n"), []string{"eve:pending", "ann:waiting", "lead:waiting"})
			h.decide(id, "n", "eve", true)
			want(t, "tasks", h.assignees(id, "n"), []string{"eve:approved", "ann:approved", "lead:pending"})
			autoReason(t, id, "ann")
			var order []string
			for _, e := range h.history(id) {
				if e.Action == "task.approved" || e.Action == "task.auto_approved" {
					order = append(order, e.Action)
				}
			}
			want(t, "decisions", order, []string{"task.approved", "task.auto_approved"})
			h.decide(id, "n", "lead", true)
			h.wantStatus(id, model.StatusCompleted)

			id = h.start("ann", "seq-first", `{}`)
			want(t, "first", h.assignees(id, "n"), []string{"ann:approved", "eve:pending"})
		})
		t.Run("vote: the automatic approval counts as a vote", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "vote", `{}`)
			want(t, "tasks", h.assignees(id, "n"), []string{"ann:approved", "eve:pending", "lead:pending"})
			h.decide(id, "n", "eve", true) // 2 of 3 >= 0.6
			h.wantStatus(id, model.StatusCompleted)
		})
		t.Run("allow: the initiator decides like anyone", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "allow", `{}`)
			want(t, "tasks", h.assignees(id, "n"), []string{"ann:pending", "eve:pending"})
		})
		t.Run("manager: the initiator's manager decides in their place", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "manager", `{}`)
			want(t, "tasks", h.assignees(id, "n"), []string{"lead:pending", "eve:pending"})
			if n := h.notes(id, "task.in_place_of"); len(n) != 1 || n[0]["in_place_of"] != "ann" {
				t.Fatalf("in_place_of %v", n)
			}
			id = h.start("ann", "manager-dup", `{}`) // the manager already signs: once
			want(t, "tasks", h.assignees(id, "n"), []string{"lead:pending"})
			id = h.start("boss", "manager", `{}`) // boss approves only as eve; not in the list: plain
			want(t, "not an approver", h.assignees(id, "n"), []string{"ann:pending", "eve:pending"})
		})
		t.Run("manager, and the initiator has none: never their own approval", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("boss", "manager-others", `{}`) // the others decide
			want(t, "tasks", h.assignees(id, "n"), []string{"eve:pending"})
			if n := h.notes(id, "approver.self"); len(n) != 1 || n[0]["user"] != "boss" {
				t.Fatalf("approver.self %v", n)
			}
			if n := h.notes(id, "task.auto_approved"); len(n) != 0 {
				t.Fatalf("approved automatically: %v", n)
			}
			id = h.start("boss", "manager-alone", `{}`) // nobody left, on_no_approver error: the node fails
			h.wantStatus(id, model.StatusFailed)
			if inst, _ := h.get(id); inst.State.Error == nil || inst.State.Error.Code != model.NodeErrNoApprover ||
				!strings.Contains(inst.State.Error.Message, "no enabled manager") {
				t.Fatalf("error %+v", inst.State.Error)
			}
			id = h.start("boss", "manager-alone-pass", `{}`) // nobody left, on_no_approver pass
			h.wantStatus(id, model.StatusCompleted)
			if n := h.notes(id, "task.auto_approved"); len(n) != 1 || n[0]["reason"] != model.AutoNoApprover {
				t.Fatalf("auto %v", n)
			}
		})
		t.Run("someone else's request: no automatic decision", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("boss", "all", `{}`)
			want(t, "tasks", h.assignees(id, "n"), []string{"ann:pending", "eve:pending"})
		})
	})
}

func TestExcludeInitiator(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.org()
		h.publish("sod", oneNode(`{"id":"n","type":"approval","sign":"all","exclude_initiator":true,"approvers":{"users":["ann","eve"]}}`))
		h.publish("sod-only", oneNode(`{"id":"n","type":"approval","exclude_initiator":true,"on_no_approver":"pass","approvers":{"roles":["dba"],"scope":"initiator.department"}}`))
		h.publish("sod-self", withOptions(`{"self_approval":"pass"}`, `{"id":"n","type":"approval","sign":"or","exclude_initiator":true,"approvers":{"users":["ann","eve"]}}`))
		id := h.start("ann", "sod", `{}`)
		want(t, "tasks", h.assignees(id, "n"), []string{"eve:pending"})
		if n := h.notes(id, "approver.excluded"); len(n) != 1 || n[0]["user"] != "ann" {
			t.Fatalf("excluded %v", n)
		}
		// lead is the only dba of eng: his own request has nobody left, and on_no_approver pass applies.
		id = h.start("lead", "sod-only", `{}`)
		h.wantStatus(id, model.StatusCompleted)
		if n := h.notes(id, "task.auto_approved"); len(n) != 1 || n[0]["reason"] != model.AutoNoApprover {
			t.Fatalf("auto %v", n)
		}
		// Excluded before self approval: no automatic pass by the initiator, eve decides.
		id = h.start("ann", "sod-self", `{}`)
		want(t, "tasks", h.assignees(id, "n"), []string{"eve:pending"})
	})
}

func TestDedupe(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.org()
		three := func(options string) string {
			return `{"options":` + options + `,"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
				{"id":"a","type":"approval","approvers":{"users":["lead"]}},
				{"id":"b","type":"approval","sign":"all","approvers":{"users":["lead","eve"]}},
				{"id":"c","type":"approval","sign":"sequential","approvers":{"users":["lead","ceo"]}},{"id":"end","type":"end"}],
				"edges":[{"from":"start","to":"a"},{"from":"a","to":"b"},{"from":"b","to":"c"},{"from":"c","to":"end"}]}`
		}
		h.publish("consecutive", three(`{"dedupe":"consecutive"}`))
		h.publish("any", three(`{"dedupe":"any"}`))
		h.publish("none", three(`{"dedupe":"none"}`))
		h.publish("skip", `{"options":{"dedupe":"consecutive"},"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"a","type":"approval","approvers":{"users":["lead"]}},{"id":"auto","type":"auto"},
			{"id":"b","type":"approval","approvers":{"users":["lead"]}},{"id":"end","type":"end"}],
			"edges":[{"from":"start","to":"a"},{"from":"a","to":"auto"},{"from":"auto","to":"b"},{"from":"b","to":"end"}]}`)

		t.Run("consecutive: who approved the node right before is approved automatically", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "consecutive", `{}`)
			h.decide(id, "a", "lead", true)
			want(t, "b", h.assignees(id, "b"), []string{"lead:approved", "eve:pending"})
			if tk := h.task(id, "b", "lead"); !tk.Auto {
				t.Fatalf("lead at b %+v", tk)
			}
			if n := h.notes(id, "task.auto_approved"); len(n) != 1 || n[0]["reason"] != model.AutoDedupe {
				t.Fatalf("auto %v", n)
			}
			h.decide(id, "b", "eve", true)
			// c follows b, where lead's approval was automatic but an approval all the same: dedupe again, in turn.
			want(t, "c", h.assignees(id, "c"), []string{"lead:approved", "ceo:pending"})
		})
		t.Run("consecutive looks through nodes that are not approvals", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "skip", `{}`)
			h.decide(id, "a", "lead", true)
			h.wantStatus(id, model.StatusCompleted)
		})
		t.Run("any: an approval anywhere earlier counts", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "any", `{}`)
			h.decide(id, "a", "lead", true)
			h.decide(id, "b", "eve", true)
			want(t, "c", h.assignees(id, "c"), []string{"lead:approved", "ceo:pending"})
		})
		t.Run("none: everyone decides every time", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "none", `{}`)
			h.decide(id, "a", "lead", true)
			want(t, "b", h.assignees(id, "b"), []string{"lead:pending", "eve:pending"})
		})
		t.Run("a return re-evaluates the rules when the node is entered again", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "consecutive", `{}`)
			h.decide(id, "a", "lead", true)
			if _, err := h.eng.Return(h.ctx, as("eve"), h.task(id, "b", "eve").ID, "a", "again"); err != nil {
				t.Fatal(err)
			}
			want(t, "a again", h.assignees(id, "a"), []string{"lead:approved", "lead:pending"})
			h.decide(id, "a", "lead", true)
			if got := h.assignees(id, "b"); got[len(got)-2] != "lead:approved" || got[len(got)-1] != "eve:pending" {
				t.Fatalf("b again %v", got)
			}
		})
		t.Run("a reclaim takes the approval back: the next node no longer dedupes it", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "none", `{}`) // (with dedupe, lead's automatic approval at b would forbid the reclaim)
			h.decide(id, "a", "lead", true)
			if inst, _ := h.get(id); !slices.Equal(inst.State.Nodes["a"].ApprovedBy, []string{"lead"}) {
				t.Fatalf("approved_by %v", inst.State.Nodes["a"].ApprovedBy)
			}
			if _, err := h.eng.Reclaim(h.ctx, as("lead"), h.task(id, "a", "lead").ID, ""); err != nil {
				t.Fatal(err)
			}
			if inst, _ := h.get(id); len(inst.State.Nodes["a"].ApprovedBy) != 0 {
				t.Fatalf("approved_by after the reclaim %v", inst.State.Nodes["a"].ApprovedBy)
			}
			h.decide(id, "a", "lead", true)
			if inst, _ := h.get(id); !slices.Equal(inst.State.Nodes["a"].ApprovedBy, []string{"lead"}) {
				t.Fatalf("approved_by approved again %v", inst.State.Nodes["a"].ApprovedBy)
			}
		})
	})
}

// delegate writes a delegation from → to within [t0+from, t0+to) for templates (all when none).
func (h *harness) delegate(from, to string, start, end time.Duration, templates ...string) {
	h.t.Helper()
	if err := h.s.CreateDelegation(h.ctx, &model.Delegation{TenantID: model.DefaultTenant, From: from, To: to, StartsAt: t0.Add(start), EndsAt: t0.Add(end),
		Templates: templates, CreatedBy: "admin"}); err != nil {
		h.t.Fatal(err)
	}
}

func TestDelegation(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.noCache(s) // delegations are written straight to the store here, not through the rules service
		h.org()
		h.publish("trip", oneNode(`{"id":"n","type":"approval","sign":"all","approvers":{"users":["lead","eve"]}}`))
		h.publish("other", oneNode(`{"id":"n","type":"approval","approvers":{"users":["lead"]}}`))
		h.publish("self", withOptions(`{"self_approval":"pass"}`, `{"id":"n","type":"approval","approvers":{"users":["ann"]}}`))
		h.delegate("lead", "dir", time.Hour, 2*time.Hour, "trip")
		h.delegate("dir", "ceo", 0, 3*time.Hour) // dir's own delegation: not followed for lead's tasks
		h.delegate("ann", "eve", time.Hour, 2*time.Hour)

		before := h.start("boss", "trip", `{}`)
		want(t, "before the window", h.assignees(before, "n"), []string{"lead:pending", "eve:pending"})

		h.clk.Advance(time.Hour) // the window opens
		id := h.start("boss", "trip", `{}`)
		want(t, "inside", h.assignees(id, "n"), []string{"dir:pending", "eve:pending"})
		tk := h.task(id, "n", "dir")
		if tk.DelegatedFrom != "lead" {
			t.Fatalf("delegated_from %q", tk.DelegatedFrom)
		}
		if n := h.notes(id, "task.delegated"); len(n) != 1 || n[0]["from"] != "lead" || n[0]["to"] != "dir" {
			t.Fatalf("task.delegated %v", n)
		}
		want(t, "the task from before stays", h.assignees(before, "n"), []string{"lead:pending", "eve:pending"})
		if ok, err := h.s.HasTaskIn(h.ctx, model.DefaultTenant, id, "lead"); err != nil || !ok {
			t.Fatalf("the delegator sees the instance: %v %v", ok, err)
		}
		h.decide(id, "n", "dir", true)
		if got := h.task(id, "n", "dir"); got.Status != model.TaskApproved || got.DelegatedFrom != "lead" {
			t.Fatalf("decided %+v", got)
		}
		// Only the templates listed.
		idOther := h.start("boss", "other", `{}`)
		want(t, "another template", h.assignees(idOther, "n"), []string{"lead:pending"})
		// A delegation plus self approval: the delegate is not the initiator, so no automatic pass.
		idSelf := h.start("ann", "self", `{}`)
		want(t, "self", h.assignees(idSelf, "n"), []string{"eve:pending"})
		if h.task(idSelf, "n", "eve").Auto {
			t.Fatal("the delegate's task was approved automatically")
		}

		h.clk.Advance(time.Hour) // the window closes
		id = h.start("boss", "trip", `{}`)
		want(t, "after", h.assignees(id, "n"), []string{"lead:pending", "eve:pending"})
	})
}
