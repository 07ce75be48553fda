package engine_test

import (
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestReturnToStartNeedsAPerson: a return to start gives the initiator a resubmit task, so it needs an initiator
// who is a person; for instances started by crontab, an anonymous form, an API token or a message it is 422
// no_initiator, and the start is not offered as a return target.
func TestReturnToStartNeedsAPerson(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		h.users("ann", "bob")
		h.publish("simple", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"lead","type":"approval","approvers":{"users":["bob"]}},{"id":"end","type":"end"}],
			"edges":[{"from":"start","to":"lead"},{"from":"lead","to":"end"}]}`)
		c, err := h.tpl.Compiled(h.ctx, model.DefaultTenant, "simple", 0)
		if err != nil {
			t.Fatal(err)
		}
		targets := func(taskID string) []string {
			ts, _, err := h.eng.ReturnTargets(h.ctx, as("bob"), taskID)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, x := range ts {
				out = append(out, x.NodeID)
			}
			return out
		}

		t.Run("a person: the resubmit task is theirs", func(t *testing.T) {
			h := h.sub(t)
			id := h.start("ann", "simple", `{}`)
			tk := h.task(id, "lead", "bob")
			if got := targets(tk.ID); len(got) != 1 || got[0] != "start" {
				t.Fatalf("targets %v", got)
			}
			if _, err := h.eng.Return(h.ctx, as("bob"), tk.ID, "start", ""); err != nil {
				t.Fatal(err)
			}
			h.wantTasks(id, "start", map[string]model.TaskStatus{"ann": "pending"})
		})

		for _, initiator := range []string{model.InitiatorCron, model.InitiatorAnonymous, "token:erp", "api:push/task", "cron", "anonymous"} {
			t.Run("started by "+initiator, func(t *testing.T) {
				h := h.sub(t)
				v, err := h.eng.StartCompiled(h.ctx, model.DefaultTenant, initiator, c, []byte(`{}`), "", "")
				if err != nil {
					t.Fatal(err)
				}
				tk := h.task(v.ID, "lead", "bob")
				if got := targets(tk.ID); len(got) != 0 {
					t.Fatalf("targets %v, want none", got)
				}
				before, _ := h.get(v.ID)
				_, err = h.eng.Return(h.ctx, as("bob"), tk.ID, "start", "")
				wantErr(t, err, model.EUNPROCESSABLE, "no_initiator")
				after, _ := h.get(v.ID)
				if after.Rev != before.Rev {
					t.Fatal("a refused return changed the instance")
				}
				h.wantTasks(v.ID, "lead", map[string]model.TaskStatus{"bob": "pending"})
			})
		}
	})
}
