package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
)

// PluginQueue is the plugin executor's queue: runs are durable rows claimed with a lease (FOR UPDATE SKIP LOCKED
// on MySQL, so every Halley process shares the work and a dead worker's runs are rescued when their lease
// expires), and results go into the engine in the instance's transaction.
type PluginQueue struct {
	e     *Engine
	ps    model.PluginStore
	files *plugin.FileStore
}

var _ plugin.Queue = (*PluginQueue)(nil)

// NewPluginQueue returns the queue the executor claims runs from.
func NewPluginQueue(e *Engine, ps model.PluginStore, files *plugin.FileStore) *PluginQueue {
	return &PluginQueue{e: e, ps: ps, files: files}
}

// Claim leases runs and turns them into jobs. A run whose plugin file is gone fails at once.
func (q *PluginQueue) Claim(ctx context.Context, worker string, n int, leaseUntil time.Time) ([]plugin.Job, error) {
	runs, err := q.ps.ClaimRuns(ctx, worker, n, q.e.clock.Now(), leaseUntil)
	if err != nil {
		return nil, err
	}
	jobs := make([]plugin.Job, 0, len(runs))
	for _, r := range runs {
		job, err := q.job(ctx, r)
		if err != nil {
			now := q.e.clock.Now().UTC()
			q.e.log.Error("plugin: unable to prepare run", "run_id", r.ID, "plugin", r.Plugin, "err", err)
			if ferr := q.e.PluginResult(ctx, r, PluginOutcome{Status: model.RunFailed, Error: err.Error(), Ended: &now, From: []string{model.RunRunning}}); ferr != nil {
				q.e.log.Error("plugin: unable to record failed run", "run_id", r.ID, "err", ferr)
			}
			continue
		}
		jobs = append(jobs, job)
	}
	return jobs, nil
}

func (q *PluginQueue) job(ctx context.Context, r *model.PluginRun) (plugin.Job, error) {
	p, err := q.ps.GetPlugin(ctx, r.TenantID, r.Plugin, r.Version)
	if err != nil {
		return plugin.Job{}, err
	}
	path, err := q.files.Path(p.Name, p.Version, p.SHA256)
	if err != nil {
		return plugin.Job{}, err
	}
	var in plugin.Input
	if err := json.Unmarshal(r.Input, &in); err != nil {
		return plugin.Job{}, fmt.Errorf("corrupt input of run %s: %w", r.ID, err)
	}
	return plugin.Job{RunID: r.ID, Attempt: r.Attempt, Spec: plugin.Spec{Name: p.Name, Version: p.Version, Runtime: plugin.Runtime(p.Runtime), Path: path, Timeout: p.Timeout},
		Input: in}, nil
}

// Extend renews the leases of runs still executing.
func (q *PluginQueue) Extend(ctx context.Context, worker string, runIDs []string, leaseUntil time.Time) error {
	return q.ps.ExtendRuns(ctx, worker, runIDs, leaseUntil)
}

// Complete records a finished run and hands its result to the engine.
func (q *PluginQueue) Complete(ctx context.Context, worker string, job plugin.Job, res plugin.Result) error {
	run, err := q.ps.GetRun(ctx, model.DefaultTenant, job.RunID)
	if err != nil {
		return err
	}
	started, ended := res.StartedAt.UTC(), res.EndedAt.UTC()
	out := PluginOutcome{Status: res.Status(), Stdout: string(res.Stdout), Stderr: string(res.Stderr), Started: &started, Ended: &ended,
		From: []string{model.RunRunning}}
	if res.ExitCode >= 0 {
		code := res.ExitCode
		out.ExitCode = &code
	}
	if res.Err != nil {
		out.Error = res.Err.Error()
	}
	if res.Err == nil && res.Output != nil {
		if len(res.Output.Context) > 0 {
			out.Context, _ = json.Marshal(res.Output.Context)
		}
		out.Decision = res.Output.Decision
		if res.Output.Async {
			out.Status = model.RunWaiting
		}
	}
	err = q.e.PluginResult(ctx, run, out)
	if model.IsKind(err, model.ECONFLICT) {
		return nil // finished already (a rescued duplicate): nothing more to record
	}
	return err
}
