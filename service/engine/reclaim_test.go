package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// Reclaim (追回) as the transition tables name it: the node's visit reopens (completed or rejected → active), the
// task is pending again (reclaim), the signers the decision had cancelled are restored, a later signer of a
// sequence is held back, and what ran downstream is reset so that it runs again.
func TestReclaim(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("bob", "carol", "dave", "erin")

		t.Run("or-sign: the cancelled signer is restored, the node downstream reset", func(t *testing.T) {
			h := h.sub(t)
			h.publish("reclaim-or", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
				{"id":"n","type":"approval","sign":"or","approvers":{"users":["bob","carol"]}},
				{"id":"m","type":"approval","approvers":{"users":["dave"]}},{"id":"end","type":"end"}],
				"edges":[{"from":"start","to":"n"},{"from":"n","to":"m"},{"from":"m","to":"end"}]}`)
			id := h.start("erin", "reclaim-or", `{}`)
			bobs := h.task(id, "n", "bob")
			h.decide(id, "n", "bob", true)
			h.wantNodes(id, map[string]model.NodeState{"n": model.NodeCompleted, "m": model.NodeActive})
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": model.TaskApproved, "carol": model.TaskCancelled})

			got, err := h.eng.Reclaim(h.ctx, as("bob"), bobs.ID, "wrong button")
			if err != nil || got.Status != model.TaskPending || got.DecidedAt != nil || got.Comment != "" {
				t.Fatalf("reclaim: %+v, %v", got, err)
			}
			h.wantStatus(id, model.StatusRunning)
			h.wantNodes(id, map[string]model.NodeState{"n": model.NodeActive, "m": model.NodeReset})
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": model.TaskPending, "carol": model.TaskPending})
			h.wantTasks(id, "m", map[string]model.TaskStatus{"dave": model.TaskCancelled})
			if inst, _ := h.get(id); inst.State.Nodes["n"].EndedAt != nil || inst.State.Nodes["n"].Groups[0].Outcome != model.OutcomeUndecided {
				t.Fatalf("the reopened visit: %+v", inst.State.Nodes["n"])
			}

			// The flow goes on from the reopened visit: carol decides this time, m runs again (from reset).
			h.decide(id, "n", "carol", true)
			h.wantNodes(id, map[string]model.NodeState{"n": model.NodeCompleted, "m": model.NodeActive})
			h.wantTasks(id, "m", map[string]model.TaskStatus{"dave": model.TaskPending})
			h.decide(id, "m", "dave", true)
			h.wantStatus(id, model.StatusCompleted)
		})

		t.Run("sequential: the next signer waits again", func(t *testing.T) {
			h := h.sub(t)
			h.publish("reclaim-seq", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
				{"id":"n","type":"approval","sign":"sequential","approvers":{"users":["bob","carol","dave"]}},{"id":"end","type":"end"}],
				"edges":[{"from":"start","to":"n"},{"from":"n","to":"end"}]}`)
			id := h.start("erin", "reclaim-seq", `{}`)
			bobs := h.task(id, "n", "bob")
			h.decide(id, "n", "bob", true)
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": model.TaskApproved, "carol": model.TaskPending, "dave": model.TaskWaiting})
			if _, err := h.eng.Reclaim(h.ctx, as("bob"), bobs.ID, ""); err != nil {
				t.Fatal(err)
			}
			h.wantNodes(id, map[string]model.NodeState{"n": model.NodeActive})
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": model.TaskPending, "carol": model.TaskWaiting, "dave": model.TaskWaiting})
			if inst, _ := h.get(id); inst.State.Nodes["n"].Groups[0].Approved != 0 {
				t.Fatalf("tally after the reclaim: %+v", inst.State.Nodes["n"].Groups[0])
			}
			for _, who := range []string{"bob", "carol", "dave"} {
				h.decide(id, "n", who, true)
			}
			h.wantStatus(id, model.StatusCompleted)
		})

		t.Run("a rejection that left the instance running is taken back", func(t *testing.T) {
			h := h.sub(t)
			// b's rejection kills one way into the or join; a's way is still open, so the instance runs on.
			h.publish("reclaim-reject", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
				{"id":"a","type":"approval","approvers":{"users":["bob"]}},{"id":"b","type":"approval","approvers":{"users":["carol"]}},
				{"id":"j","type":"auto","join":"or"},{"id":"end","type":"end"}],
				"edges":[{"from":"start","to":"a"},{"from":"start","to":"b"},{"from":"a","to":"j"},{"from":"b","to":"j"},{"from":"j","to":"end"}]}`)
			id := h.start("erin", "reclaim-reject", `{}`)
			carols := h.task(id, "b", "carol")
			h.decide(id, "b", "carol", false)
			h.wantStatus(id, model.StatusRunning)
			h.wantNodes(id, map[string]model.NodeState{"a": model.NodeActive, "b": model.NodeRejected, "j": model.NodeNone})

			got, err := h.eng.Reclaim(h.ctx, as("carol"), carols.ID, "")
			if err != nil || got.Status != model.TaskPending {
				t.Fatalf("reclaim of a rejection: %+v, %v", got, err)
			}
			h.wantNodes(id, map[string]model.NodeState{"a": model.NodeActive, "b": model.NodeActive, "j": model.NodeNone})
			if inst, _ := h.get(id); inst.State.Nodes["b"].Groups[0].Rejected != 0 || inst.State.Nodes["b"].Groups[0].Outcome != model.OutcomeUndecided {
				t.Fatalf("tally after the reclaim: %+v", inst.State.Nodes["b"].Groups[0])
			}
			h.decide(id, "b", "carol", true)
			h.wantStatus(id, model.StatusCompleted)
			h.wantNodes(id, map[string]model.NodeState{"b": model.NodeCompleted, "j": model.NodeCompleted, "a": model.NodeCancelled})
		})

		t.Run("a visit a timeout branch ended is not reopened", func(t *testing.T) {
			h := h.sub(t)
			h.publish("reclaim-late", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
				{"id":"n","type":"approval","sign":"all","approvers":{"users":["bob","carol"]},"timeout":"1h","on_timeout":{"branch":"late"}},
				{"id":"late","type":"approval","approvers":{"users":["dave"]}},{"id":"end","type":"end"},{"id":"end2","type":"end"}],
				"edges":[{"from":"start","to":"n"},{"from":"n","to":"end"},{"from":"late","to":"end2"}]}`)
			id := h.start("erin", "reclaim-late", `{}`)
			bobs := h.task(id, "n", "bob")
			h.decide(id, "n", "bob", true)
			h.clk.Advance(2 * time.Hour)
			h.fireDue()
			h.wantNodes(id, map[string]model.NodeState{"n": model.NodeCancelled, "late": model.NodeActive})
			_, err := h.eng.Reclaim(h.ctx, as("bob"), bobs.ID, "")
			wantErr(t, err, model.ECONFLICT, "visit_over")
			h.wantNodes(id, map[string]model.NodeState{"n": model.NodeCancelled, "late": model.NodeActive})
			h.wantTasks(id, "n", map[string]model.TaskStatus{"bob": model.TaskApproved, "carol": model.TaskCancelled})
		})
	})
}

// A move the tables do not allow fails the step with an error wrapping model.ErrTransition, and nothing of the
// step is written: the instance, its tasks and its history are as before.
func TestRefusedMoveFailsTheStep(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("bob")
		h.publish("one", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"n","type":"approval","approvers":{"users":["bob"]}},{"id":"end","type":"end"}],
			"edges":[{"from":"start","to":"n"},{"from":"n","to":"end"}]}`)
		id := h.start("bob", "one", `{}`)
		before, _ := h.get(id)
		history := len(h.history(id))
		for _, tc := range []struct {
			name string
			err  error
		}{
			// The start completed; completing it again is not a move of the node table.
			{"node: complete from completed", engine.MoveInStep(h.eng, h.ctx, id, "node", "start", model.MoveComplete)},
			// The task is pending: a reclaim takes back decisions only.
			{"task: reclaim from pending", engine.MoveInStep(h.eng, h.ctx, id, "task", "n", model.MoveReclaim)},
			{"instance: repair of a running instance", engine.MoveInStep(h.eng, h.ctx, id, "instance", "", model.MoveRepair)},
		} {
			var te *model.TransitionError
			if !errors.Is(tc.err, model.ErrTransition) || !errors.As(tc.err, &te) {
				t.Fatalf("%s: error %v, want a refused transition", tc.name, tc.err)
			}
		}
		after, tasks := h.get(id)
		if after.Rev != before.Rev || after.State.Nodes["start"].State != model.NodeCompleted || len(h.history(id)) != history ||
			len(tasks) != 1 || tasks[0].Status != model.TaskPending {
			t.Fatalf("a failed step wrote: rev %d → %d, start %s, history %d → %d, tasks %+v", before.Rev, after.Rev,
				after.State.Nodes["start"].State, history, len(h.history(id)), tasks)
		}
		// The instance goes on as if nothing happened.
		h.decide(id, "n", "bob", true)
		h.wantStatus(id, model.StatusCompleted)
	})
}

// A jump resets every visit of its region, whatever state it ended in (skipped, rejected, active), and runs its
// target again from there.
func TestJumpResetsTheRegion(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "bob", "carol")
		// a chooses y and z (x's condition is false); z rejects, but the or join still waits for y.
		h.publish("region", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"a","type":"approval","approvers":{"users":["ann"]}},
			{"id":"x","type":"approval","approvers":{"users":["ann"]}},{"id":"y","type":"approval","approvers":{"users":["bob"]}},
			{"id":"z","type":"approval","approvers":{"users":["carol"]}},{"id":"j","type":"auto","join":"or"},{"id":"end","type":"end"}],
			"edges":[{"from":"start","to":"a"},{"from":"a","to":"x","condition":{"go":true}},{"from":"a","to":"y"},{"from":"a","to":"z"},
			{"from":"x","to":"j"},{"from":"y","to":"j"},{"from":"z","to":"j"},{"from":"j","to":"end"}]}`)
		id := h.start("ann", "region", `{}`)
		h.decide(id, "a", "ann", true)
		h.decide(id, "z", "carol", false)
		h.wantStatus(id, model.StatusRunning)
		h.wantNodes(id, map[string]model.NodeState{"a": model.NodeCompleted, "x": model.NodeSkipped, "y": model.NodeActive, "z": model.NodeRejected})

		if _, err := h.eng.Jump(h.ctx, admin, id, "a", "ann approved the wrong request"); err != nil {
			t.Fatal(err)
		}
		h.wantStatus(id, model.StatusRunning)
		h.wantNodes(id, map[string]model.NodeState{"a": model.NodeActive, "x": model.NodeReset, "y": model.NodeReset, "z": model.NodeReset})
		h.wantTasks(id, "y", map[string]model.TaskStatus{"bob": model.TaskCancelled})
		v, err := h.eng.Get(h.ctx, admin, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range v.Nodes {
			if n.State == model.NodeReset {
				t.Fatalf("the API shows a reset node: %+v", n)
			}
		}
		// The flow runs again from a: this time z approves.
		h.decide(id, "a", "ann", true)
		h.decide(id, "z", "carol", true)
		h.wantStatus(id, model.StatusCompleted)
	})
}

// A callback whose timeout fails it while it waits, with a retry handler, waits again (waiting → waiting) for the
// retry back-off; the retry then fails that visit and runs a new one.
func TestWaitingNodeRetries(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann")
		h.publish("hook-retry", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"hook","type":"callback","timeout":"1h","error_handler":{"operation":"retry","retry":{"count":1,"period":"5s"}}},
			{"id":"end","type":"end"}],"edges":[{"from":"start","to":"hook"},{"from":"hook","to":"end"}]}`)
		id := h.start("ann", "hook-retry", `{}`)
		first, _ := h.get(id)
		visit := first.State.Nodes["hook"].NodeInstanceID
		h.clk.Advance(time.Hour + time.Second)
		h.fireDue()
		inst, _ := h.get(id)
		if ns := inst.State.Nodes["hook"]; ns.State != model.NodeWaiting || ns.WaitingFor != "retry" || ns.NodeInstanceID != visit || ns.Attempt != 1 {
			t.Fatalf("after the timeout: %+v", ns)
		}
		h.clk.Advance(6 * time.Second)
		h.fireDue()
		inst, _ = h.get(id)
		if ns := inst.State.Nodes["hook"]; ns.State != model.NodeWaiting || ns.WaitingFor != "callback" || ns.NodeInstanceID == visit || ns.Attempt != 1 {
			t.Fatalf("after the retry: %+v", ns)
		}
		if h.count(id, "node.retry_scheduled", "hook") != 1 || h.count(id, "node.activated", "hook") != 2 {
			t.Fatalf("history %v", h.actions(id))
		}
	})
}
