package engine_test

import (
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestJoinCancelRest: {"min":2,"cancel_rest":true} activates at two taken branches and cancels the branch still
// running that can only lead into it (its task cancelled, recorded); a branch that reaches another end without
// passing the join runs on; without cancel_rest the third branch runs on and is absorbed.
func TestJoinCancelRest(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("alice", "bob", "carol", "dave", "erin")
		def := func(join string) string {
			return `{"nodes":[
	{"id":"start","type":"start","trigger":{"kind":"manual"}},
	{"id":"a","type":"approval","approvers":{"users":["bob"]}},
	{"id":"b","type":"approval","approvers":{"users":["carol"]}},
	{"id":"c","type":"approval","approvers":{"users":["dave"]}},
	{"id":"c2","type":"auto"},
	{"id":"d","type":"approval","approvers":{"users":["erin"]}},
	{"id":"m","type":"auto","join":` + join + `},
	{"id":"end","type":"end"},
	{"id":"end2","type":"end"}],
 "edges":[{"from":"start","to":"a"},{"from":"start","to":"b"},{"from":"start","to":"c"},{"from":"start","to":"d"},
	{"from":"a","to":"m"},{"from":"b","to":"m"},{"from":"c","to":"c2"},{"from":"c2","to":"m"},{"from":"m","to":"end"},{"from":"d","to":"end2"}]}`
		}
		h.publish("cancelling", def(`{"min":2,"cancel_rest":true}`))
		h.publish("absorbing", def(`{"min":2}`))

		id := h.start("alice", "cancelling", `{}`)
		h.decide(id, "a", "bob", true)
		h.wantNodes(id, map[string]model.NodeState{"c": model.NodeActive, "m": model.NodeNone})
		h.decide(id, "b", "carol", true)
		h.wantNodes(id, map[string]model.NodeState{"c": model.NodeCancelled, "m": model.NodeCompleted, "end": model.NodeCompleted, "d": model.NodeActive})
		h.wantTasks(id, "c", map[string]model.TaskStatus{"dave": model.TaskCancelled})
		if h.count(id, "node.cancelled", "c") != 1 {
			t.Fatalf("history: %v", h.actions(id))
		}
		h.wantStatus(id, model.StatusRunning) // d escapes to end2: it runs on
		h.decide(id, "d", "erin", true)
		h.wantStatus(id, model.StatusCompleted)

		id = h.start("alice", "absorbing", `{}`)
		h.decide(id, "a", "bob", true)
		h.decide(id, "b", "carol", true)
		h.wantNodes(id, map[string]model.NodeState{"c": model.NodeActive, "m": model.NodeCompleted})
		h.decide(id, "c", "dave", true)
		h.decide(id, "d", "erin", true)
		h.wantStatus(id, model.StatusCompleted)
		if n := h.count(id, "node.activated", "m"); n != 1 {
			t.Fatalf("m activated %d times", n)
		}
	})
}
