package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// asBeforeUpgrade rewrites an instance's stored state as the engine wrote it before pruned and killed were told
// apart: every pruned or killed edge becomes the old "dead" (2). That is what a running instance of an existing
// database holds when the new engine first loads it.
func (h *harness) asBeforeUpgrade(id string) {
	h.t.Helper()
	var raw string
	if err := h.s.DB().Table("instances").Where("id = ?", id).Select("state").Scan(&raw).Error; err != nil {
		h.t.Fatal(err)
	}
	// Only the edges change: the rest of the document stays in the store's own form (service/store, state.go).
	var doc map[string]json.RawMessage
	var edges []byte
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		h.t.Fatal(err)
	}
	if err := json.Unmarshal(doc["edges"], &edges); err != nil {
		h.t.Fatal(err)
	}
	dead := 0
	for i, e := range edges {
		if e == model.EdgePruned || e == model.EdgeKilled {
			edges[i] = model.EdgeDead
			dead++
		}
	}
	if dead == 0 {
		h.t.Fatalf("instance %s has no pruned or killed edge to rewrite: %v", id, edges)
	}
	doc["edges"], _ = json.Marshal(edges)
	b, _ := json.Marshal(doc)
	if err := h.s.DB().Exec("UPDATE instances SET state = ? WHERE id = ?", string(b), id).Error; err != nil {
		h.t.Fatal(err)
	}
}

// TestInstancesStartedBeforeTheUpgrade continues instances whose state holds old "dead" edges: each is read as
// pruned (its source completed) or killed (its source was rejected, or skipped because of a killed edge), and
// the instance goes on under the new joins.
func TestInstancesStartedBeforeTheUpgrade(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "bob", "carol", "dave")
		h.publish("comet-or", cometDef("or"))

		t.Run("a dead edge from a rejected node is killed: the or join waits for the other branch", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "comet-or", `{}`)
			h.decide(id, "C", "carol", false)
			h.asBeforeUpgrade(id)
			h.decide(id, "B", "bob", true)
			h.wantNodes(id, map[string]model.NodeState{"C": "rejected", "D": "active"})
			inst, _ := h.get(id)
			for i, e := range inst.State.Edges {
				if e == model.EdgeDead {
					t.Fatalf("edge %d is still the old dead after a step", i)
				}
			}
			if inst.State.Edges[3] != model.EdgeKilled { // C → D
				t.Fatalf("C → D is %d, want killed", inst.State.Edges[3])
			}
			h.decide(id, "D", "dave", true)
			h.wantStatus(id, model.StatusCompleted)
		})

		t.Run("both branches dead: rejected as before", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "comet-or", `{}`)
			h.decide(id, "C", "carol", false)
			h.asBeforeUpgrade(id)
			h.decide(id, "B", "bob", false)
			h.wantStatus(id, model.StatusRejected)
			h.wantNodes(id, map[string]model.NodeState{"D": "skipped", "E": "skipped"})
		})

		// g routes: x only when c1 (false here), y (bob) always, z (carol) always. x and y meet at j (or); j and z
		// meet at k (and). Before the upgrade x's edges are dead; bob then routes nowhere into j (c2 false).
		// Read as pruned, j is skipped as pruned and k merges z: the instance completes. Had the old dead been
		// read as killed, k would be skipped and the instance rejected.
		h.publish("routing", `{"nodes":[
			{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"g","type":"auto"},
			{"id":"x","type":"auto"},
			{"id":"y","type":"approval","approvers":{"users":["bob"]}},
			{"id":"z","type":"approval","approvers":{"users":["carol"]}},
			{"id":"j","type":"auto","join":"or"},
			{"id":"k","type":"auto"},
			{"id":"yend","type":"end"},
			{"id":"end","type":"end"}],
		 "edges":[{"from":"start","to":"g"},{"from":"g","to":"x","condition":{"c1":true}},{"from":"g","to":"y"},{"from":"g","to":"z"},
			{"from":"x","to":"j"},{"from":"y","to":"j","condition":{"c2":true}},{"from":"y","to":"yend","default":true},
			{"from":"j","to":"k"},{"from":"z","to":"k"},{"from":"k","to":"end"}]}`)
		t.Run("a dead edge whose source completed is pruned: the and join merges the other branch", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "routing", `{"c1":false,"c2":false}`)
			h.wantNodes(id, map[string]model.NodeState{"x": "skipped", "y": "active", "z": "active"})
			h.asBeforeUpgrade(id)
			h.decide(id, "y", "bob", true)
			h.wantNodes(id, map[string]model.NodeState{"j": "skipped", "yend": "completed"})
			h.decide(id, "z", "carol", true)
			h.wantStatus(id, model.StatusCompleted)
			h.wantNodes(id, map[string]model.NodeState{"k": "completed", "end": "completed"})
		})
	})
}
