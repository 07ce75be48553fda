package engine_test

import (
	"encoding/json"
	"slices"
	"testing"

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
