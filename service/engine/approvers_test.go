package engine_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/engine/enginetest"
	"github.com/halley-bpm/halley/service/rules"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// countingDir counts the directory's user-state lookups.
type countingDir struct {
	*store.Store
	lookups atomic.Int32
}

func (d *countingDir) UserStates(ctx context.Context, tenant string, names []string) (map[string]bool, error) {
	d.lookups.Add(1)
	return d.Store.UserStates(ctx, tenant, names)
}

// disable marks a user disabled in the database.
func (h *harness) disable(name string) {
	h.t.Helper()
	if err := h.s.DB().Exec("UPDATE users SET disabled = ? WHERE username = ?", true, name).Error; err != nil {
		h.t.Fatal(err)
	}
}

// dropped lists the approver.dropped notes of an instance as "user:reason".
func (h *harness) dropped(id string) []string {
	h.t.Helper()
	var out []string
	for _, e := range h.history(id) {
		if e.Action == "approver.dropped" {
			var d struct{ User, Reason string }
			_ = json.Unmarshal(e.Data, &d)
			out = append(out, d.User+":"+d.Reason)
		}
	}
	return out
}

func TestApproversWhoDoNotExistOrAreDisabled(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		// No cache: the test disables users between steps.
		h := newHarnessWith(t, s, s, engine.Options{})
		h.noCache(s)
		h.users("ann", "dan", "eve", "fay")
		def := `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"a","type":"approval","sign":"all","approvers":{"users":["ghost","dan"],"context":"extra"}},
			{"id":"end","type":"end"}],"edges":[{"from":"start","to":"a"},{"from":"a","to":"end"}]}`
		h.publish("drop", def)

		t.Run("an unknown static user and an unknown context user are dropped with a note", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "drop", `{"extra":["eve","nobody"]}`)
			h.wantTasks(id, "a", map[string]model.TaskStatus{"dan": "pending", "eve": "pending"})
			if got := h.dropped(id); len(got) != 2 || got[0] != "ghost:unknown_user" || got[1] != "nobody:unknown_user" {
				t.Fatalf("dropped %v", got)
			}
			// The signer set is the two real users: both approving completes the node.
			h.decide(id, "a", "dan", true)
			h.decide(id, "a", "eve", true)
			h.wantStatus(id, model.StatusCompleted)
		})

		t.Run("a disabled user is dropped", func(t *testing.T) {
			h := h.sub(t)
			h.disable("fay")
			id := h.start("ann", "drop", `{"extra":"fay"}`)
			h.wantTasks(id, "a", map[string]model.TaskStatus{"dan": "pending"})
			if got := h.dropped(id); len(got) != 2 || got[1] != "fay:disabled" {
				t.Fatalf("dropped %v", got)
			}
		})

		t.Run("nobody left: node error no_approver", func(t *testing.T) {
			h := h.sub(t)
			h.disable("dan")
			id := h.start("ann", "drop", `{"extra":[]}`)
			h.wantStatus(id, model.StatusFailed)
			inst, tasks := h.get(id)
			if len(tasks) != 0 {
				t.Fatalf("tasks %v", tasks)
			}
			if e := inst.State.Error; e == nil || e.Code != model.NodeErrNoApprover || e.NodeID != "a" {
				t.Fatalf("error %+v", e)
			}
			if got := h.dropped(id); len(got) != 2 || got[0] != "ghost:unknown_user" || got[1] != "dan:disabled" {
				t.Fatalf("dropped %v", got)
			}
			// The operator's repair: a jump after the approver is enabled again runs the node again and clears
			// the error.
			if err := h.s.DB().Exec("UPDATE users SET disabled = ? WHERE username = ?", false, "dan").Error; err != nil {
				t.Fatal(err)
			}
			if _, err := h.eng.Jump(h.ctx, admin, id, "a", "dan is back"); err != nil {
				t.Fatal(err)
			}
			h.wantStatus(id, model.StatusRunning)
			if inst, _ := h.get(id); inst.State.Error != nil {
				t.Fatalf("error after the repair: %+v", inst.State.Error)
			}
			h.wantTasks(id, "a", map[string]model.TaskStatus{"dan": "pending"})
			if h.count(id, "node.failed", "a") != 1 {
				t.Fatalf("history lost the failure: %v", h.actions(id))
			}
			h.disable("dan")
		})

		t.Run("transfer and add-sign refuse a disabled user", func(t *testing.T) {
			h := h.sub(t)
			h.users("gus")
			id := h.start("ann", "drop", `{"extra":"gus"}`)
			tk := h.task(id, "a", "gus")
			h.disable("eve")
			_, err := h.eng.Transfer(h.ctx, as("gus"), tk.ID, "eve", "")
			wantErr(t, err, model.EUNPROCESSABLE, "user_disabled")
			_, err = h.eng.AddSign(h.ctx, as("gus"), tk.ID, []string{"eve"}, "parallel", "")
			wantErr(t, err, model.EUNPROCESSABLE, "user_disabled")
			_, err = h.eng.Transfer(h.ctx, as("gus"), tk.ID, "zed", "")
			wantErr(t, err, model.EUNPROCESSABLE, "unknown_user")
		})
	})
}

// TestApproverLookupsAreCached: with the cache on, a second activation of the same approvers reads nothing.
func TestApproverLookupsAreCached(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	dir := &countingDir{Store: s}
	h := newHarnessWith(t, s, dir, engine.Options{})
	h.users("ann", "dan")
	h.publish("one", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
		{"id":"a","type":"approval","approvers":{"users":["dan"]}},{"id":"end","type":"end"}],"edges":[{"from":"start","to":"a"},{"from":"a","to":"end"}]}`)
	h.start("ann", "one", `{}`)
	h.start("ann", "one", `{}`)
	if n := dir.lookups.Load(); n != 1 {
		t.Fatalf("%d directory lookups for two activations, want 1", n)
	}
	nocache := newHarnessWith(t, s, dir, engine.Options{})
	nocache.noCache(dir)
	nocache.start("ann", "one", `{}`)
	nocache.start("ann", "one", `{}`)
	if n := dir.lookups.Load(); n != 3 {
		t.Fatalf("%d lookups, want 3 (two more without the cache)", n)
	}
}

// noCache rebuilds the harness's engine with rules over dir that cache nothing (tests that change users between
// steps).
func (h *harness) noCache(dir engine.Directory) {
	h.t.Helper()
	d := enginetest.Deps(h.t, h.s, h.tpl, dir)
	d.Rules = enginetest.Rules(h.t, h.s, dir, rules.Options{CacheTTL: -1})
	eng, err := engine.New(d, engine.Options{Clock: h.clk, CallbackKey: []byte("callback-key-for-tests")})
	if err != nil {
		h.t.Fatal(err)
	}
	h.eng = eng
}
