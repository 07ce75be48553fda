package engine_test

import (
	"context"
	"sync"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// recorder is a StepObserver that keeps every report.
type recorder struct {
	mu      sync.Mutex
	reports []engine.StepReport
}

func (r *recorder) StepDone(_ context.Context, rep engine.StepReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, rep)
}

// The step observer hears of every step: what it was, on which instance, the moves it made when it committed,
// and the error when it failed (with no moves).
func TestStepObserver(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		rec := &recorder{}
		h := newHarnessWith(t, s, s, engine.Options{Observer: rec})
		h.users("bob")
		h.publish("one", `{"nodes":[{"id":"start","type":"start","trigger":{"kind":"manual"}},
			{"id":"n","type":"approval","approvers":{"users":["bob"]}},{"id":"end","type":"end"}],
			"edges":[{"from":"start","to":"n"},{"from":"n","to":"end"}]}`)
		id := h.start("bob", "one", `{}`)
		tk := h.task(id, "n", "bob")
		if err := h.reject("carol", tk.ID); err == nil {
			t.Fatal("carol rejected bob's task")
		}
		h.decide(id, "n", "bob", true)

		if len(rec.reports) != 3 {
			t.Fatalf("%d reports, want 3: %+v", len(rec.reports), rec.reports)
		}
		start, refused, approve := rec.reports[0], rec.reports[1], rec.reports[2]
		if start.Action != "start" || start.InstanceID != id || start.TenantID != model.DefaultTenant || start.Err != nil ||
			!moved(start, "instance", "start", "", "running") || !moved(start, "node", "activate", "", "active") ||
			!moved(start, "task", "open", "", "pending") {
			t.Fatalf("start report %+v", start)
		}
		if refused.Action != "reject" || !model.IsKind(refused.Err, model.EFORBIDDEN) || len(refused.Moves) != 0 {
			t.Fatalf("refused report %+v", refused)
		}
		if approve.Action != "approve" || approve.Err != nil || approve.Took <= 0 ||
			!moved(approve, "task", "approve", "pending", "approved") || !moved(approve, "node", "complete", "active", "completed") ||
			!moved(approve, "instance", "complete", "running", "completed") {
			t.Fatalf("approve report %+v", approve)
		}
		if first := approve.Moves[0]; first.Kind != "task" || first.Subject != tk.ID || first.NodeType != "" {
			t.Fatalf("the approval's first move %+v, want its task's", first)
		}
		// The template and the type of every node moved (what a trace shows of a step).
		if start.Template != "one" || approve.Template != "one" || refused.Template != "" {
			t.Fatalf("templates of the reports: %q %q %q", start.Template, approve.Template, refused.Template)
		}
		types := map[string]string{}
		for _, x := range append(start.Moves, approve.Moves...) {
			if x.Kind == "node" {
				types[x.Subject] = x.NodeType
			}
		}
		if types["start"] != model.NodeStart || types["n"] != model.NodeApproval || types["end"] != model.NodeEnd {
			t.Fatalf("node types of the moves: %v", types)
		}
	})
}

func moved(r engine.StepReport, kind string, m model.Move, from, to string) bool {
	for _, x := range r.Moves {
		if x.Kind == kind && x.Move == m && x.From == from && x.To == to {
			return true
		}
	}
	return false
}
