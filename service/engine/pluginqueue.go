package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
)

// PluginQueue is the plugin executors' queue of the engine's runs: runs are durable rows claimed with a lease
// (FOR UPDATE SKIP LOCKED on MySQL, so every Halley process shares the work and a dead worker's runs are rescued
// when their lease expires), and results go into the engine in the instance's transaction. It also hands the runs
// the engine leased to this process's executor over to it (see LocalExecutor). The engine builds it; executors
// get it with Engine.PluginQueue.
type PluginQueue struct {
	e     *Engine
	files PluginFiles
	local LocalExecutor

	plugins sync.Map // pluginKey -> *model.Plugin (a version never changes)
	mu      sync.Mutex
	runs    map[string]*model.PluginRun // runs this process executes, by id, until Complete
}

var (
	_ plugin.Queue = (*PluginQueue)(nil)
	_ PluginFiles  = (*plugin.Cache)(nil)
)

// PluginFiles gives the local path of a plugin file by its SHA-256, checked against it: *plugin.Cache, which
// fetches files from the database on first use, so a version uploaded on any replica runs on this one.
type PluginFiles interface {
	Path(ctx context.Context, sha256 string) (string, error)
}

func newPluginQueue(e *Engine, files PluginFiles, local LocalExecutor) *PluginQueue {
	return &PluginQueue{e: e, files: files, local: local, runs: map[string]*model.PluginRun{}}
}

// lease says whether this process's executor takes a new run at once, and if so under which worker id and until
// when the run is to be leased; the engine then writes the run leased in the queuing transaction.
func (q *PluginQueue) lease() (string, time.Time, bool) {
	if !q.local.Available() {
		return "", time.Time{}, false
	}
	return q.local.WorkerID(), q.e.clock.Now().Add(q.local.Lease()), true
}

// handOver gives this process's executor the runs committed leased to it.
func (q *PluginQueue) handOver(runs []*model.PluginRun) {
	jobs := make([]plugin.Job, 0, len(runs))
	for _, r := range runs {
		job, err := q.job(context.Background(), r)
		if err != nil {
			// Like a claimed run whose plugin cannot be prepared: it fails. Off the caller's goroutine (the
			// caller is a request that just committed).
			go q.fail(r, err)
			continue
		}
		q.remember(r)
		jobs = append(jobs, job)
	}
	q.local.Offer(jobs...)
}

func (q *PluginQueue) fail(r *model.PluginRun, err error) {
	ctx := context.Background()
	now := q.e.clock.Now().UTC()
	q.e.log.Error("plugin: unable to prepare run", "run_id", r.ID, "plugin", r.Plugin, "err", err)
	if ferr := q.e.pluginResult(ctx, r, pluginOutcome{Status: model.RunFailed, Error: err.Error(), Ended: &now, From: []string{model.RunRunning}}, false); ferr != nil {
		q.e.log.Error("plugin: unable to record failed run", "run_id", r.ID, "err", ferr)
	}
}

func (q *PluginQueue) remember(r *model.PluginRun) {
	q.mu.Lock()
	q.runs[r.ID] = r
	q.mu.Unlock()
}

// run returns (and forgets) the run of a job this process took, else reads it.
func (q *PluginQueue) run(ctx context.Context, id string) (*model.PluginRun, error) {
	q.mu.Lock()
	r, ok := q.runs[id]
	delete(q.runs, id)
	q.mu.Unlock()
	if ok {
		return r, nil
	}
	return q.e.store.GetRun(ctx, model.DefaultTenant, id)
}

type pluginKey struct {
	tenant, name string
	version      int
}

// plugin returns a plugin version, from memory after the first read.
func (q *PluginQueue) plugin(ctx context.Context, tenant, name string, version int) (*model.Plugin, error) {
	k := pluginKey{tenant, name, version}
	if p, ok := q.plugins.Load(k); ok {
		return p.(*model.Plugin), nil
	}
	p, err := q.e.store.GetPlugin(ctx, tenant, name, version)
	if err != nil {
		return nil, err
	}
	q.plugins.Store(k, p)
	return p, nil
}

// Claim leases runs and turns them into jobs. A run whose plugin file is gone fails at once.
func (q *PluginQueue) Claim(ctx context.Context, worker string, n int, leaseUntil time.Time) ([]plugin.Job, error) {
	runs, err := q.e.store.ClaimRuns(ctx, worker, n, q.e.clock.Now(), leaseUntil)
	if err != nil {
		return nil, err
	}
	jobs := make([]plugin.Job, 0, len(runs))
	for _, r := range runs {
		job, err := q.job(ctx, r)
		if err != nil {
			now := q.e.clock.Now().UTC()
			q.e.log.Error("plugin: unable to prepare run", "run_id", r.ID, "plugin", r.Plugin, "err", err)
			if ferr := q.e.pluginResult(ctx, r, pluginOutcome{Status: model.RunFailed, Error: err.Error(), Ended: &now, From: []string{model.RunRunning}}, false); ferr != nil {
				q.e.log.Error("plugin: unable to record failed run", "run_id", r.ID, "err", ferr)
			}
			continue
		}
		q.remember(r)
		jobs = append(jobs, job)
	}
	return jobs, nil
}

func (q *PluginQueue) job(ctx context.Context, r *model.PluginRun) (plugin.Job, error) {
	p, err := q.plugin(ctx, r.TenantID, r.Plugin, r.Version)
	if err != nil {
		return plugin.Job{}, err
	}
	path, err := q.files.Path(ctx, p.SHA256)
	if err != nil {
		return plugin.Job{}, err
	}
	var in plugin.Input
	if err := json.Unmarshal(r.Input, &in); err != nil {
		return plugin.Job{}, fmt.Errorf("corrupt input of run %s: %w", r.ID, err)
	}
	return plugin.Job{RunID: r.ID, TenantID: r.TenantID, Attempt: r.Attempt, Spec: plugin.Spec{Name: p.Name, Version: p.Version, Runtime: plugin.Runtime(p.Runtime), Path: path, Timeout: p.Timeout,
		NetworkOff: p.Network == model.NetworkOff, Cold: !p.Warm},
		Input: in}, nil
}

// Extend renews the leases of runs still executing and returns, with why, those the worker no longer holds: the
// engine closed them (on any replica), they finished, or another worker took them over. The executor stops them.
func (q *PluginQueue) Extend(ctx context.Context, worker string, runIDs []string, leaseUntil time.Time) (map[string]string, error) {
	lost, err := q.e.store.ExtendRuns(ctx, worker, runIDs, leaseUntil)
	if err != nil || len(lost) == 0 {
		return nil, err
	}
	why := make(map[string]string, len(lost))
	for id, status := range lost {
		why[id] = lostWhy(status)
		q.forget(id)
	}
	return why, nil
}

// lostWhy says why a worker no longer holds a run, from the run's status now.
func lostWhy(status string) string {
	switch status {
	case "":
		return "the run is gone"
	case model.RunRunning:
		return "another worker holds its lease (this worker's lease expired)"
	case model.RunTimedOut, model.RunCancelled:
		return "the engine closed the run: " + status
	}
	return "the run is " + status + " already"
}

// stopClosed tells this process's executor which runs a committed step closed, so that it kills their processes
// at once instead of at its next lease renewal.
func (q *PluginQueue) stopClosed(updates []model.RunUpdate) {
	var closed map[string]string
	for _, u := range updates {
		if !u.Close {
			continue
		}
		if closed == nil {
			closed = map[string]string{}
		}
		closed[u.Run.ID] = lostWhy(u.Run.Status)
		q.forget(u.Run.ID)
	}
	if len(closed) > 0 {
		q.local.StopRuns(closed)
	}
}

// forget drops a run this process took and will not complete.
func (q *PluginQueue) forget(id string) {
	q.mu.Lock()
	delete(q.runs, id)
	q.mu.Unlock()
}

// Complete records a finished run and hands its result to the engine.
func (q *PluginQueue) Complete(ctx context.Context, worker string, job plugin.Job, res plugin.Result) error {
	_, err := q.CompleteLogged(ctx, worker, job, res, nil)
	return err
}

var _ plugin.LoggingQueue = (*PluginQueue)(nil)

// CompleteLogged is Complete, writing rec (the attempt's run log record, when not nil) in the step that records
// the result: one commit a run instead of two. It reports whether rec was written; it is not when the run was
// finished already or has no instance to step, and the executor then writes it on its own.
func (q *PluginQueue) CompleteLogged(ctx context.Context, worker string, job plugin.Job, res plugin.Result, rec *model.PluginRunLog) (bool, error) {
	run, err := q.run(ctx, job.RunID)
	if err != nil {
		return false, err
	}
	started, ended := res.StartedAt.UTC(), res.EndedAt.UTC()
	out := pluginOutcome{Status: res.Status(), Stdout: string(res.Stdout), Stderr: string(res.Stderr), Started: &started, Ended: &ended,
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
	out.Log = rec
	logged, err := q.e.pluginResultLogged(ctx, run, out, false)
	if model.IsKind(err, model.ECONFLICT) {
		return false, nil // finished already (a rescued duplicate): nothing more to record
	}
	return logged, err
}
