package engine_test

import (
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestSubprocessReturnPastTheNode: a return to a node upstream of a running subprocess node (here from a parallel
// branch) cancels the running child through the outbox like a jump does — terminated once, recorded by the parent —
// and when the flow reaches the subprocess node again it starts a fresh child that resumes the parent as usual.
func TestSubprocessReturnPastTheNode(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("alice", "bob", "carol", "cashier")
		h.publish("payment", paymentDef)
		h.publish("split", `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"lead","type":"approval","approvers":{"users":["bob"]}},
	{"id":"call","type":"subprocess","template":"payment"},
	{"id":"check","type":"approval","approvers":{"users":["carol"]}},
	{"id":"end","type":"end","join":"and"}],
 "edges":[{"from":"start","to":"lead"},{"from":"lead","to":"call"},{"from":"lead","to":"check"},
	{"from":"call","to":"end"},{"from":"check","to":"end"}]}`)

		id := h.start("alice", "split", `{}`)
		h.decide(id, "lead", "bob", true)
		kids := h.children(id)
		if len(kids) != 1 || kids[0].Status != model.StatusRunning {
			t.Fatalf("children after lead: %+v", kids)
		}
		first := kids[0].ID

		// Carol returns her branch to lead: lead's whole downstream region, the running subprocess node included, is
		// reset, so the child is cancelled.
		if _, err := h.eng.Return(h.ctx, as("carol"), h.task(id, "check", "carol").ID, "lead", "the amount is wrong"); err != nil {
			t.Fatal(err)
		}
		h.drain()
		h.wantStatus(first, model.StatusTerminated)
		if n := h.count(first, "instance.terminated", ""); n != 1 {
			t.Errorf("the child's instance.terminated entries: %d (%v)", n, h.actions(first))
		}
		h.wantStatus(id, model.StatusRunning) // a cancelled child raises no subprocess_failed
		if inst, _ := h.get(id); inst.State.Children[0].Status != model.StatusTerminated {
			t.Errorf("the parent records its first child as %s", inst.State.Children[0].Status)
		}
		h.wantTasks(id, "lead", map[string]model.TaskStatus{"bob": "pending"})
		if h.drain() != 0 {
			t.Error("a second drain dispatched rows: the cancel was not done once")
		}

		// Lead approves again: a fresh child, which resumes the parent when paid.
		h.decide(id, "lead", "bob", true)
		kids = h.children(id)
		if len(kids) != 2 || kids[0].ID != first || kids[1].Status != model.StatusRunning {
			t.Fatalf("children after the second lead decision: %+v", kids)
		}
		h.decide(kids[1].ID, "pay", "cashier", true)
		h.drain()
		h.wantStatus(kids[1].ID, model.StatusCompleted)
		h.decide(id, "check", "carol", true)
		h.drain()
		h.wantStatus(id, model.StatusCompleted)
		h.wantStatus(first, model.StatusTerminated) // the first child stays as it ended
	})
}
