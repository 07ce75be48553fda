package engine_test

import (
	"context"
	"testing"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestPluginResultCarriesItsLog: PluginQueue.CompleteLogged writes an attempt's run log record in the step that
// records its result (the instance moves on and the record is there, together); a second completion of the same
// attempt (a rescued duplicate) and the completion of a run a terminate closed meanwhile write nothing and say so,
// for the executor to write the record on its own (idempotent: one row per attempt).
func TestPluginResultCarriesItsLog(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		h := newHarness(t, s)
		local := h.localExecutor(engine.Options{})
		h.users("ann")
		h.plugin("tick")
		h.publish("p", oneNode(`{"id":"n","type":"auto","plugins":{"pre":["tick"]}}`))
		q := h.eng.PluginQueue()
		rec := func(job plugin.Job) *model.PluginRunLog {
			return &model.PluginRunLog{RunID: job.RunID, Attempt: job.Attempt, TenantID: model.DefaultTenant, Plugin: job.Spec.Name,
				InstanceID: job.Input.InstanceID, Record: "=== run " + job.RunID + " ===\n", CreatedAt: t0}
		}
		res := plugin.Result{ExitCode: 0, StartedAt: t0, EndedAt: t0, Output: &plugin.Output{}}

		id := h.start("ann", "p", `{}`)
		job := local.jobs[0]
		logged, err := q.CompleteLogged(context.Background(), "here", job, res, rec(job))
		if err != nil || !logged {
			t.Fatalf("CompleteLogged = %v, %v; want the record written with the result", logged, err)
		}
		h.wantStatus(id, model.StatusCompleted)
		if n := h.rows("plugin_run_logs", "run_id = ? AND attempt = ? AND instance_id = ?", job.RunID, 1, id); n != 1 {
			t.Fatalf("%d log records of the run, want 1", n)
		}
		logs, err := s.RunLogs(h.ctx, model.DefaultTenant, job.RunID)
		if err != nil || len(logs) != 1 || logs[0].Record != "=== run "+job.RunID+" ===\n" || logs[0].Plugin != "tick" {
			t.Fatalf("RunLogs = %+v, %v", logs, err)
		}

		// The same attempt again: finished already, nothing written, and the caller is told.
		logged, err = q.CompleteLogged(context.Background(), "here", job, res, rec(job))
		if err != nil || logged {
			t.Fatalf("a second completion: %v, %v; want false, nil", logged, err)
		}
		if n := h.rows("plugin_run_logs", "run_id = ?", job.RunID); n != 1 {
			t.Fatalf("%d log records after a second completion, want 1", n)
		}

		// The instance is terminated while its run is in flight: the result and its record are still kept.
		gone := h.start("ann", "p", `{}`)
		job = local.jobs[1]
		if _, err := h.eng.Terminate(h.ctx, admin, gone, "stop"); err != nil {
			t.Fatal(err)
		}
		logged, err = q.CompleteLogged(context.Background(), "here", job, res, rec(job))
		if err != nil {
			t.Fatal(err)
		}
		if n := h.rows("plugin_run_logs", "run_id = ?", job.RunID); logged || n != 0 {
			t.Fatalf("completion of a run the terminate closed: logged %v with %d records; want false and none (the executor writes it)", logged, n)
		}
	})
}
