package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// oneNode is start → n → end with the given approval node n.
func oneNode(node string) string {
	return `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},` + node + `,{"id":"end","type":"end"}],
		"edges":[{"from":"start","to":"n"},{"from":"n","to":"end"}]}`
}

const (
	P = model.TaskPending
	W = model.TaskWaiting
	A = model.TaskApproved
	R = model.TaskRejected
	X = model.TaskCancelled
)

// step is one decision in a sign-mode scenario and what the node's tasks look like afterwards.
type step struct {
	user    string
	approve bool
	tasks   map[string]model.TaskStatus // assignee → status of their task after the step
	node    model.NodeState             // node state after the step
}

func TestSignModes(t *testing.T) {
	three := `"approvers":{"users":["bob","carol","dave"]}`
	tests := []struct {
		name   string
		node   string
		ctx    string
		before map[string]model.TaskStatus // tasks right after the start
		steps  []step
		status model.InstanceStatus // instance status at the end
	}{
		{"or: the first approval decides", `{"id":"n","type":"approval","sign":"or",` + three + `}`, `{}`,
			map[string]model.TaskStatus{"bob": P, "carol": P, "dave": P},
			[]step{{"carol", true, map[string]model.TaskStatus{"bob": X, "carol": A, "dave": X}, "completed"}}, model.StatusCompleted},
		{"or: the first rejection decides", `{"id":"n","type":"approval",` + three + `}`, `{}`,
			map[string]model.TaskStatus{"bob": P, "carol": P, "dave": P},
			[]step{{"dave", false, map[string]model.TaskStatus{"bob": X, "carol": X, "dave": R}, "rejected"}}, model.StatusRejected},
		{"all: everybody approves", `{"id":"n","type":"approval","sign":"all",` + three + `}`, `{}`,
			map[string]model.TaskStatus{"bob": P, "carol": P, "dave": P},
			[]step{
				{"bob", true, map[string]model.TaskStatus{"bob": A, "carol": P, "dave": P}, "active"},
				{"dave", true, map[string]model.TaskStatus{"bob": A, "carol": P, "dave": A}, "active"},
				{"carol", true, map[string]model.TaskStatus{"bob": A, "carol": A, "dave": A}, "completed"},
			}, model.StatusCompleted},
		{"all: one rejection rejects, the rest is cancelled", `{"id":"n","type":"approval","sign":"all",` + three + `}`, `{}`,
			map[string]model.TaskStatus{"bob": P, "carol": P, "dave": P},
			[]step{
				{"bob", true, map[string]model.TaskStatus{"bob": A, "carol": P, "dave": P}, "active"},
				{"carol", false, map[string]model.TaskStatus{"bob": A, "carol": R, "dave": X}, "rejected"},
			}, model.StatusRejected},
		{"sequential: one pending at a time, in order", `{"id":"n","type":"approval","sign":"sequential",` + three + `}`, `{}`,
			map[string]model.TaskStatus{"bob": P, "carol": W, "dave": W},
			[]step{
				{"bob", true, map[string]model.TaskStatus{"bob": A, "carol": P, "dave": W}, "active"},
				{"carol", true, map[string]model.TaskStatus{"bob": A, "carol": A, "dave": P}, "active"},
				{"dave", true, map[string]model.TaskStatus{"bob": A, "carol": A, "dave": A}, "completed"},
			}, model.StatusCompleted},
		{"sequential: a rejection stops the line", `{"id":"n","type":"approval","sign":"sequential",` + three + `}`, `{}`,
			map[string]model.TaskStatus{"bob": P, "carol": W, "dave": W},
			[]step{
				{"bob", true, map[string]model.TaskStatus{"bob": A, "carol": P, "dave": W}, "active"},
				{"carol", false, map[string]model.TaskStatus{"bob": A, "carol": R, "dave": X}, "rejected"},
			}, model.StatusRejected},
		{"vote 0.6: passes when the ratio is reached", `{"id":"n","type":"approval","sign":"vote","pass_ratio":0.6,` + three + `}`, `{}`,
			map[string]model.TaskStatus{"bob": P, "carol": P, "dave": P},
			[]step{
				{"bob", true, map[string]model.TaskStatus{"bob": A, "carol": P, "dave": P}, "active"},
				{"dave", true, map[string]model.TaskStatus{"bob": A, "carol": X, "dave": A}, "completed"},
			}, model.StatusCompleted},
		{"vote 0.6: rejects early when the ratio can no longer be reached", `{"id":"n","type":"approval","sign":"vote","pass_ratio":0.6,` + three + `}`, `{}`,
			map[string]model.TaskStatus{"bob": P, "carol": P, "dave": P},
			[]step{
				{"bob", false, map[string]model.TaskStatus{"bob": R, "carol": P, "dave": P}, "active"},
				{"carol", false, map[string]model.TaskStatus{"bob": R, "carol": R, "dave": X}, "rejected"},
			}, model.StatusRejected},
		{"vote 0.6: a rejection, then two approvals pass", `{"id":"n","type":"approval","sign":"vote","pass_ratio":0.6,` + three + `}`, `{}`,
			map[string]model.TaskStatus{"bob": P, "carol": P, "dave": P},
			[]step{
				{"bob", false, map[string]model.TaskStatus{"bob": R, "carol": P, "dave": P}, "active"},
				{"carol", true, map[string]model.TaskStatus{"bob": R, "carol": A, "dave": P}, "active"},
				{"dave", true, map[string]model.TaskStatus{"bob": R, "carol": A, "dave": A}, "completed"},
			}, model.StatusCompleted},
		{"groups with group_sign all: every group must pass", `{"id":"n","type":"approval","group_sign":"all","approvers":{"groups":[["bob","carol"],["dave"]]}}`, `{}`,
			map[string]model.TaskStatus{"bob": P, "carol": P, "dave": P},
			[]step{
				{"bob", true, map[string]model.TaskStatus{"bob": A, "carol": P, "dave": P}, "active"},
				{"dave", true, map[string]model.TaskStatus{"bob": A, "carol": P, "dave": A}, "active"},
				{"carol", true, map[string]model.TaskStatus{"bob": A, "carol": A, "dave": A}, "completed"},
			}, model.StatusCompleted},
		{"groups with group_sign all: one group rejecting rejects the node", `{"id":"n","type":"approval","group_sign":"all","approvers":{"groups":[["bob","carol"],["dave"]]}}`, `{}`,
			map[string]model.TaskStatus{"bob": P, "carol": P, "dave": P},
			[]step{
				{"bob", true, map[string]model.TaskStatus{"bob": A, "carol": P, "dave": P}, "active"},
				{"dave", false, map[string]model.TaskStatus{"bob": A, "carol": X, "dave": R}, "rejected"},
			}, model.StatusRejected},
		{"groups with group_sign or: each group decided by its first signer", `{"id":"n","type":"approval","group_sign":"or","approvers":{"groups":[["bob","carol"],["dave"]]}}`, `{}`,
			map[string]model.TaskStatus{"bob": P, "carol": P, "dave": P},
			[]step{
				{"carol", true, map[string]model.TaskStatus{"bob": X, "carol": A, "dave": P}, "active"},
				{"dave", true, map[string]model.TaskStatus{"bob": X, "carol": A, "dave": A}, "completed"},
			}, model.StatusCompleted},
		{"groups from the context, group_sign sequential", `{"id":"n","type":"approval","group_sign":"sequential","approvers":{"groups_context":"signers"}}`,
			`{"signers":[["bob","carol"],["dave"]]}`,
			map[string]model.TaskStatus{"bob": P, "carol": W, "dave": P},
			[]step{
				{"dave", true, map[string]model.TaskStatus{"bob": P, "carol": W, "dave": A}, "active"},
				{"bob", true, map[string]model.TaskStatus{"bob": A, "carol": P, "dave": A}, "active"},
				{"carol", true, map[string]model.TaskStatus{"bob": A, "carol": A, "dave": A}, "completed"},
			}, model.StatusCompleted},
	}
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "bob", "carol", "dave")
		for i, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				h := h.sub(t)
				key := "sign-" + string(rune('a'+i))
				h.publish(key, oneNode(tc.node))
				id := h.start("ann", key, tc.ctx)
				h.wantNodes(id, map[string]model.NodeState{"n": "active"})
				h.wantTasks(id, "n", tc.before)
				for j, st := range tc.steps {
					h.decide(id, "n", st.user, st.approve)
					h.wantTasks(id, "n", st.tasks)
					h.wantNodes(id, map[string]model.NodeState{"n": st.node})
					// Nobody whose task is not pending may decide it.
					for who, status := range st.tasks {
						if status != P {
							tk := h.task(id, "n", who)
							wantErr(t, h.approve(who, tk.ID), model.ECONFLICT, "")
						}
					}
					if j < len(tc.steps)-1 {
						h.wantStatus(id, model.StatusRunning)
					}
				}
				h.wantStatus(id, tc.status)
				if n := h.count(id, "node.completed", "n") + h.count(id, "node.rejected", "n"); n != 1 {
					t.Fatalf("node n decided %d times: %v", n, h.actions(id))
				}
			})
		}
	})
}

func TestApproverResolution(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("boss", "chief", "bob", "carol", "loner")
		h.user(identity.CreateUserRequest{Username: "erin", Roles: []string{"dba"}})
		h.user(identity.CreateUserRequest{Username: "frank", Roles: []string{"dba", "ops"}})
		if err := h.ids.CreateDepartment(context.Background(), model.DefaultTenant, &model.Department{Name: "eng", Leader: "chief"}); err != nil {
			t.Fatal(err)
		}
		h.user(identity.CreateUserRequest{Username: "emp", Department: "eng", Manager: "boss"})
		h.user(identity.CreateUserRequest{Username: "nodept", Department: "nowhere"})

		ok := []struct {
			name, approvers, initiator, ctx string
			want                            []string
		}{
			{"roles", `{"roles":["dba"]}`, "bob", `{}`, []string{"erin", "frank"}},
			{"two roles, deduplicated", `{"roles":["dba","ops"]}`, "bob", `{}`, []string{"erin", "frank"}},
			{"users and roles together", `{"users":["carol"],"roles":["ops"]}`, "bob", `{}`, []string{"carol", "frank"}},
			{"context path to a list", `{"context":"approvers.lead"}`, "bob", `{"approvers":{"lead":["carol","bob"]}}`, []string{"carol", "bob"}},
			{"context path to one user", `{"context":"approvers.lead"}`, "bob", `{"approvers":{"lead":"carol"}}`, []string{"carol"}},
			{"initiator.manager", `{"relation":"initiator.manager"}`, "emp", `{}`, []string{"boss"}},
			{"initiator.department.leader", `{"relation":"initiator.department.leader"}`, "emp", `{}`, []string{"chief"}},
		}
		for i, tc := range ok {
			t.Run(tc.name, func(t *testing.T) {
				h := h.sub(t)
				key := "who-" + string(rune('a'+i))
				h.publish(key, oneNode(`{"id":"n","type":"approval","sign":"all","approvers":`+tc.approvers+`}`))
				id := h.start(tc.initiator, key, tc.ctx)
				want := map[string]model.TaskStatus{}
				for _, u := range tc.want {
					want[u] = P
				}
				h.wantTasks(id, "n", want)
				for _, u := range tc.want {
					h.decide(id, "n", u, true)
				}
				h.wantStatus(id, model.StatusCompleted)
			})
		}

		// Approvers that resolve to nobody are a node error: the instance fails and the history says why.
		bad := []struct {
			name, approvers, initiator, ctx, why string
		}{
			{"a role nobody holds", `{"roles":["ghost"]}`, "bob", `{}`, "ghost"},
			{"a context path that is missing", `{"context":"approvers.lead"}`, "bob", `{}`, "approvers.lead"},
			{"a context path holding an empty list", `{"context":"approvers.lead"}`, "bob", `{"approvers":{"lead":[]}}`, "approvers.lead"},
			{"an initiator without a manager", `{"relation":"initiator.manager"}`, "loner", `{}`, "manager"},
			{"an initiator in an unknown department", `{"relation":"initiator.department.leader"}`, "nodept", `{}`, "nowhere"},
			{"an empty group from the context", `{"groups_context":"g"}`, "bob", `{"g":[["bob"],[]]}`, "group 2"},
		}
		for i, tc := range bad {
			t.Run("nobody: "+tc.name, func(t *testing.T) {
				h := h.sub(t)
				key := "nobody-" + string(rune('a'+i))
				h.publish(key, oneNode(`{"id":"n","type":"approval","approvers":`+tc.approvers+`}`))
				id := h.start(tc.initiator, key, tc.ctx)
				h.wantStatus(id, model.StatusFailed)
				h.wantNodes(id, map[string]model.NodeState{"n": "failed", "end": ""})
				if n := len(h.tasksOf(id, "n")); n != 0 {
					t.Fatalf("%d tasks", n)
				}
				var why string
				for _, e := range h.history(id) {
					if e.Action == "node.error" && e.NodeID == "n" {
						why = e.Comment
					}
				}
				if !strings.Contains(why, tc.why) {
					t.Fatalf("node.error says %q; want it to name %q (history %v)", why, tc.why, h.actions(id))
				}
				inst, _ := h.get(id)
				if inst.State.Nodes["n"].Error == "" || h.count(id, "instance.failed", "") != 1 {
					t.Fatalf("node error %q, history %v", inst.State.Nodes["n"].Error, h.actions(id))
				}
			})
		}
	})
}

func TestSignActionsWithinModes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "bob", "carol", "dave", "eve")
		h.publish("seq", oneNode(`{"id":"n","type":"approval","sign":"sequential","approvers":{"users":["bob","carol"]}}`))
		h.publish("vote2", oneNode(`{"id":"n","type":"approval","sign":"vote","pass_ratio":0.5,"approvers":{"users":["bob","carol"]}}`))

		t.Run("sequential: parallel add-sign queues the new signers last", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "seq", `{}`)
			if _, err := h.eng.AddSign(h.ctx, as("bob"), h.task(id, "n", "bob").ID, []string{"dave"}, "parallel", ""); err != nil {
				t.Fatal(err)
			}
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": P, "carol": W, "dave": W})
			h.decide(id, "n", "bob", true)
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": A, "carol": P, "dave": W})
			h.decide(id, "n", "carol", true)
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": A, "carol": A, "dave": P})
			h.wantStatus(id, model.StatusRunning)
			h.decide(id, "n", "dave", true)
			h.wantStatus(id, model.StatusCompleted)
		})

		t.Run("sequential: the current signer transfers, the order goes on", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "seq", `{}`)
			nt, err := h.eng.Transfer(h.ctx, as("bob"), h.task(id, "n", "bob").ID, "eve", "")
			if err != nil || nt.Assignee != "eve" || nt.Status != P {
				t.Fatalf("transfer: %+v %v", nt, err)
			}
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": model.TaskTransferred, "carol": W, "eve": P})
			// A waiting signer can neither transfer nor be transferred to the same node twice.
			_, err = h.eng.Transfer(h.ctx, as("carol"), h.task(id, "n", "carol").ID, "dave", "")
			wantErr(t, err, model.ECONFLICT, "task_not_pending")
			_, err = h.eng.Transfer(h.ctx, as("eve"), nt.ID, "carol", "")
			wantErr(t, err, model.EUNPROCESSABLE, "already_signer")
			h.decide(id, "n", "eve", true)
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": model.TaskTransferred, "carol": P, "eve": A})
			h.decide(id, "n", "carol", true)
			h.wantStatus(id, model.StatusCompleted)
		})

		t.Run("sequential: add-sign before the current signer", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "seq", `{}`)
			res, err := h.eng.AddSign(h.ctx, as("bob"), h.task(id, "n", "bob").ID, []string{"dave"}, "before", "")
			if err != nil || len(res.Created) != 1 || res.Task.Status != W {
				t.Fatalf("add-sign: %+v %v", res, err)
			}
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": W, "carol": W, "dave": P})
			h.decide(id, "n", "dave", true)
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": P, "carol": W, "dave": A})
			h.decide(id, "n", "bob", true)
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": A, "carol": P, "dave": A})
			h.decide(id, "n", "carol", true)
			h.wantStatus(id, model.StatusCompleted)
		})

		t.Run("add-sign before: the added signer rejects", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "seq", `{}`)
			if _, err := h.eng.AddSign(h.ctx, as("bob"), h.task(id, "n", "bob").ID, []string{"dave"}, "before", ""); err != nil {
				t.Fatal(err)
			}
			h.decide(id, "n", "dave", false)
			h.wantStatus(id, model.StatusRejected)
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": X, "carol": X, "dave": R})
		})

		t.Run("vote 0.5 with two voters: one approval passes", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "vote2", `{}`)
			h.decide(id, "n", "carol", true)
			h.wantStatus(id, model.StatusCompleted)
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": X, "carol": A})
		})

		t.Run("vote: a parallel add-sign raises the bar", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "vote2", `{}`)
			if _, err := h.eng.AddSign(h.ctx, as("bob"), h.task(id, "n", "bob").ID, []string{"dave", "eve"}, "parallel", ""); err != nil {
				t.Fatal(err)
			}
			h.decide(id, "n", "bob", true) // 1 of 4 < 0.5
			h.wantStatus(id, model.StatusRunning)
			h.decide(id, "n", "dave", true) // 2 of 4
			h.wantStatus(id, model.StatusCompleted)
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": A, "carol": X, "dave": A, "eve": X})
		})
	})
}

// TestApprovalDataRoutes: what an approver enters routes the flow, read where it was written: through the node's
// form (a field of the form) or, without one, under context.<node_id>.
func TestApprovalDataRoutes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "bob", "dba")
		for _, v := range []struct{ key, form, path string }{
			{"grant-form", `,"form":{"kind":"components","fields":[{"id":"f1","type":"number","label":"Level","field":"level"}]}`, "level"},
			{"grant-bare", ``, "lead.level"},
		} {
			h.publish(v.key, `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
				{"id":"lead","type":"approval","approvers":{"users":["bob"]}`+v.form+`},
				{"id":"dba","type":"approval","approvers":{"users":["dba"]}},
				{"id":"end","type":"end","join":"or"}],
				"edges":[{"from":"start","to":"lead"},{"from":"lead","to":"dba","condition":{"`+v.path+`":{"$gte":3}}},{"from":"lead","to":"end","default":true},
					{"from":"dba","to":"end"}]}`)
			for _, tc := range []struct {
				data string
				dba  model.NodeState
				end  model.NodeState
			}{{`{"level":5}`, "active", ""}, {`{"level":1}`, "skipped", "completed"}} {
				id := h.start("ann", v.key, `{"level":0}`)
				if _, err := h.eng.Approve(h.ctx, as("bob"), h.task(id, "lead", "bob").ID, "", []byte(tc.data)); err != nil {
					t.Fatal(err)
				}
				h.wantNodes(id, map[string]model.NodeState{"lead": "completed", "dba": tc.dba, "end": tc.end})
				if got := h.contextValue(id, v.path).Raw; got != tc.data[9:10] {
					t.Fatalf("%s: context.%s = %s after approving with %s", v.key, v.path, got, tc.data)
				}
				if v.path != "level" && h.contextValue(id, "level").Raw != "0" {
					t.Fatalf("%s: the approver without a form changed the request's level: %s", v.key, h.contextValue(id, "level").Raw)
				}
				if tk := h.task(id, "lead", "bob"); string(tk.Data) != tc.data {
					t.Fatalf("task data %s", tk.Data)
				}
			}
		}
	})
}
