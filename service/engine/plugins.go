package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/model"
)

// Plugin phases.
const (
	phasePre   = "pre"
	phaseAuto  = "auto"
	phaseAfter = "after"
)

// What happens when a plugin chain is through.
const (
	thenRun      = "run"      // pre plugins: do the node's own work
	thenComplete = "complete" // after plugins of a passed node
	thenReject   = "reject"   // after plugins of a rejected node
	thenAuto     = "auto"     // an auto node's plugins: complete, or reject on a "reject" decision
)

// pluginRef splits "name" or "name@version".
func pluginRef(ref string) (string, int, error) {
	name, v, ok := strings.Cut(ref, "@")
	if !ok {
		return name, 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return "", 0, fmt.Errorf("plugin reference %q: the version after @ must be a positive number", ref)
	}
	return name, n, nil
}

// resultToken signs a plugin run's result URL.
func resultToken(key []byte, runID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("plugin-run/" + runID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkResultToken reports whether token signs the run id.
func (e *Engine) checkResultToken(runID, token string) bool {
	return token != "" && hmac.Equal([]byte(token), []byte(resultToken(e.callbackKey, runID)))
}

// startChain runs a node visit's plugins one after another, then does what `then` says.
func (s *step) startChain(ns *model.NodeVisit, phase string, names []string, then string) error {
	if ns.State == model.NodeWaiting {
		if err := s.moveNode(ns, model.MoveResume); err != nil {
			return err
		}
	}
	ns.Chain = &model.PluginChain{Phase: phase, Names: names, Then: then}
	return s.queueRun(ns)
}

// queueRun writes a queued run of the chain's current plugin; the executor picks it up after the commit.
func (s *step) queueRun(ns *model.NodeVisit) error {
	ch := ns.Chain
	ref := ch.Names[ch.Index]
	name, version, err := pluginRef(ref)
	if err != nil {
		return s.nodeFailure(&model.NodeFailure{Code: model.NodeErrPluginFailed, NodeID: ns.NodeID, Message: err.Error(),
			Data: json.RawMessage(`{"reason":"bad_reference"}`)})
	}
	v, err := s.read(fmt.Sprintf("plugin\x00%s\x00%d", name, version), func(ctx context.Context) (any, error) {
		return s.e.store.GetPlugin(ctx, s.inst.TenantID, name, version)
	})
	if errors.Is(err, errNeedRead) {
		return err
	}
	p, _ := v.(*model.Plugin)
	if err != nil {
		if model.IsKind(err, model.ENOTFOUND) {
			return s.nodeFailure(&model.NodeFailure{Code: model.NodeErrPluginFailed, NodeID: ns.NodeID,
				Message: fmt.Sprintf("plugin %q is not uploaded", ref), Data: json.RawMessage(`{"reason":"not_uploaded"}`)})
		}
		return err
	}
	id := s.nextID("r")
	cb := ns.CallbackURL
	if cb == "" {
		cb = s.e.urls.PluginResult(id, resultToken(s.e.callbackKey, id))
	}
	node, _ := json.Marshal(s.c.Def.Node(ns.NodeID))
	input, err := json.Marshal(map[string]any{"run_id": id, "instance_id": s.inst.ID, "node_id": ns.NodeID, "phase": ch.Phase,
		"context": json.RawMessage(s.inst.Context), "node": json.RawMessage(node), "callback_url": cb})
	if err != nil {
		return err
	}
	pr := &model.PluginRun{ID: id, TenantID: s.inst.TenantID, Plugin: p.Name, Version: p.Version, InstanceID: s.inst.ID, NodeID: ns.NodeID,
		NodeInstanceID: ns.NodeInstanceID, Phase: ch.Phase, Status: model.RunQueued, Attempt: 1, Input: input, CreatedAt: s.now}
	if worker, until, ok := s.leaseLocal(); ok {
		// This process's executor has a free worker: the run is written leased to it and handed over at the
		// commit (Engine.committed). Should the process die first, the lease expires and a claim runs it.
		lu, st := until.UTC(), s.now
		pr.Status, pr.LeaseOwner, pr.LeaseUntil, pr.StartedAt = model.RunRunning, worker, &lu, &st
	} else {
		s.w.Outbox = append(s.w.Outbox, model.OutboxItem{TenantID: s.inst.TenantID, Kind: model.OutboxPluginRun, Ref: id})
	}
	s.w.NewPluginRuns = append(s.w.NewPluginRuns, pr)
	ch.RunID = id
	ns.WaitingFor = "plugin"
	s.history("plugin.queued", ns.NodeID, "", "", map[string]any{"plugin": p.Name, "version": p.Version, "phase": ch.Phase, "run_id": id})
	return nil
}

// leaseLocal asks this process's executor whether it takes a new run at once.
func (s *step) leaseLocal() (string, time.Time, bool) {
	return s.e.plugins.lease()
}

// chainNext moves a chain to its next plugin, or finishes it.
func (s *step) chainNext(ns *model.NodeVisit) error {
	ch := ns.Chain
	ch.Index++
	if ch.Index < len(ch.Names) {
		return s.queueRun(ns)
	}
	ns.Chain, ns.WaitingFor = nil, ""
	n := s.c.Def.Node(ns.NodeID)
	switch ch.Then {
	case thenRun:
		ns.PreDone = true
		return s.runNode(n, ns)
	case thenReject:
		ns.AfterDone = true
		return s.reject(ns.NodeID, "rejected")
	case thenAuto:
		ns.AfterDone = true
		if ch.Decision == "reject" {
			if err := s.endVisit(ns, model.MoveReject); err != nil {
				return err
			}
			s.history("node.rejected", ns.NodeID, "", "rejected by plugin decision", nil)
			return s.kill(ns.NodeID, causeRejection)
		}
		return s.complete(ns.NodeID)
	}
	ns.AfterDone = true
	return s.complete(ns.NodeID)
}

// pluginOutcome is what became of a plugin run.
type pluginOutcome struct {
	Status   string          // model.RunSucceeded, RunFailed, RunTimedOut or RunWaiting (async)
	Context  json.RawMessage // merged into the instance context on success
	Decision string
	Error    string
	ExitCode *int
	Stdout   string
	Stderr   string
	Started  *time.Time
	Ended    *time.Time
	// From are the statuses the run may be in for this outcome to apply (a second result is a conflict).
	From []string
	// Log, when set, is the attempt's run log record: written in the step that records the result.
	Log *model.PluginRunLog
}

// errRunClosed answers a result for a run that no longer counts: 409 run_closed, and nothing changes.
func errRunClosed(id, why string) error {
	return model.CodedError(model.ECONFLICT, "run_closed", "plugin run %s is closed: %s", id, why)
}

// pluginResult applies a plugin run's outcome to its instance, recording the run in the same transaction, so a
// result counts once. Runs whose node visit is over (or whose instance ended) are recorded without effect (the
// executor reports every run it finished; one the engine closed already — timed out, cancelled — is ECONFLICT);
// strict (a result posted by the plugin's system) refuses them with run_closed instead.
func (e *Engine) pluginResult(ctx context.Context, pr *model.PluginRun, out pluginOutcome, strict bool) error {
	_, err := e.pluginResultLogged(ctx, pr, out, strict)
	return err
}

// pluginResultLogged is pluginResult, also reporting whether out.Log was written with the result (it is not when
// the run has no instance to step, or the step failed).
func (e *Engine) pluginResultLogged(ctx context.Context, pr *model.PluginRun, out pluginOutcome, strict bool) (logged bool, err error) {
	pr.Status, pr.Error, pr.ExitCode, pr.Stdout, pr.Stderr = out.Status, out.Error, out.ExitCode, out.Stdout, out.Stderr
	if out.Started != nil {
		pr.StartedAt = out.Started
	}
	pr.EndedAt = out.Ended
	if pr.StartedAt != nil && pr.EndedAt != nil {
		ms := pr.EndedAt.Sub(*pr.StartedAt).Milliseconds()
		pr.DurationMS = &ms
	}
	if len(out.Context) > 0 {
		pr.Output = out.Context
	}
	if pr.NodeID == "" {
		// An event subscription's run: nothing in an instance waits for it.
		return false, e.store.FinishRunOnly(ctx, pr)
	}
	record := func(s *step) {
		s.w.RunUpdates = append(s.w.RunUpdates, model.RunUpdate{Run: pr, From: out.From})
		if out.Log != nil {
			s.w.RunLogs = append(s.w.RunLogs, out.Log)
		}
	}
	_, err = e.update(ctx, "plugin_result", pr.TenantID, pr.InstanceID, "plugin:"+pr.Plugin, func(s *step) error {
		ns := s.node(pr.NodeID)
		if s.inst.Ended() || ns == nil || ns.Chain == nil || ns.Chain.RunID != pr.ID {
			if strict {
				return errRunClosed(pr.ID, "its node is no longer waiting for it")
			}
			record(s)
			return nil // the visit moved on (terminated, returned, timed out): record the run only
		}
		record(s)
		data := map[string]any{"plugin": pr.Plugin, "version": pr.Version, "run_id": pr.ID, "status": out.Status}
		if out.ExitCode != nil {
			data["exit_code"] = *out.ExitCode
		}
		switch out.Status {
		case model.RunWaiting:
			ns.WaitingFor = "plugin_result"
			s.history("plugin.waiting", ns.NodeID, "", "", data)
			return nil
		case model.RunSucceeded:
			s.history("plugin.succeeded", ns.NodeID, "", "", data)
			if err := s.mergeContext(out.Context); err != nil {
				return err
			}
			if ns.Chain.Phase == phaseAuto && out.Decision != "" {
				ns.Chain.Decision = out.Decision
			}
			return s.chainNext(ns)
		}
		s.history("plugin.failed", ns.NodeID, "", out.Error, data)
		code := model.NodeErrPluginFailed
		if out.Status == model.RunTimedOut {
			code = model.NodeErrPluginTimeout // the plugin's own timeout: its process was killed
		}
		fd, _ := json.Marshal(map[string]any{"run_id": pr.ID, "plugin": pr.Plugin, "version": pr.Version, "status": out.Status, "exit_code": out.ExitCode})
		return s.nodeFailure(&model.NodeFailure{Code: code, NodeID: ns.NodeID,
			Message: fmt.Sprintf("plugin %s@%d %s: %s", pr.Plugin, pr.Version, out.Status, out.Error), Data: fd})
	})
	if strict && model.IsKind(err, model.ENOTFOUND) {
		return false, errRunClosed(pr.ID, "its instance is gone")
	}
	if model.IsKind(err, model.ENOTFOUND) {
		return false, e.store.FinishRunOnly(ctx, pr)
	}
	return err == nil && out.Log != nil, err
}

// armPluginTimeout arms an auto node's timeout for the visit's plugin run (unless one is armed): when it passes
// before the plugins are through, the run is timed out and the node error is plugin_timeout.
func (s *step) armPluginTimeout(n *model.Node, ns *model.NodeVisit) {
	if n.Type != model.NodeAuto || n.Timeout <= 0 {
		return
	}
	for _, id := range ns.Timers {
		if timerKind(ns, id) == model.TimerPluginTimeout {
			return
		}
	}
	s.armTimer(ns, model.TimerPluginTimeout, s.now.Add(n.Timeout.Std()), nil)
}

// pluginTimedOut handles an auto node's timeout: the run in flight (queued, running or waiting for its async
// result) is closed as timed_out — a result arriving later is refused — a retry back-off in progress is
// dropped, and the node error plugin_timeout goes to the error handler (retry starts a new run).
func (s *step) pluginTimedOut(n *model.Node, ns *model.NodeVisit) error {
	if ns.Chain == nil {
		return nil // nothing runs: the visit is between plugins (cannot be: a chain is set until the node leaves)
	}
	for _, id := range append([]string(nil), ns.Timers...) {
		if timerKind(ns, id) == model.TimerRetry {
			s.dropTimer(ns, id)
		}
	}
	msg := fmt.Sprintf("the node's timeout of %s passed before its plugins were through", n.Timeout)
	var data json.RawMessage
	if ns.WaitingFor != "retry" && ns.Chain.RunID != "" {
		now := s.now
		s.w.RunUpdates = append(s.w.RunUpdates, model.RunUpdate{Run: &model.PluginRun{ID: ns.Chain.RunID, Status: model.RunTimedOut,
			Error: msg, EndedAt: &now}, From: []string{model.RunQueued, model.RunRunning, model.RunWaiting}, Close: true})
		s.history("plugin.timed_out", ns.NodeID, "", msg, map[string]any{"run_id": ns.Chain.RunID})
		data, _ = json.Marshal(map[string]any{"run_id": ns.Chain.RunID})
	}
	return s.nodeFailure(&model.NodeFailure{Code: model.NodeErrPluginTimeout, NodeID: ns.NodeID, Message: msg, Data: data})
}

// closeAbandonedRun closes the run a visit's plugin chain waits for when the visit ends some other way
// (terminate, withdraw, jump, return, a caught error): it is cancelled, and a result for it is refused.
func (s *step) closeAbandonedRun(ns *model.NodeVisit) {
	if ns.Chain == nil || ns.Chain.RunID == "" || ns.WaitingFor == "retry" {
		return
	}
	for _, u := range s.w.RunUpdates {
		if u.Run.ID == ns.Chain.RunID {
			return // its result (or its timeout) is recorded in this step
		}
	}
	now := s.now
	s.w.RunUpdates = append(s.w.RunUpdates, model.RunUpdate{Run: &model.PluginRun{ID: ns.Chain.RunID, Status: model.RunCancelled,
		Error: "its node visit ended before it", EndedAt: &now}, From: []string{model.RunQueued, model.RunRunning, model.RunWaiting}, Close: true})
}

// AsyncResult finishes a plugin run that replied {"async": true}. The caller is an admin or holds the signed
// result token. 404 unknown run, 409 not waiting for a result.
func (e *Engine) AsyncResult(ctx context.Context, actor *model.Principal, runID, token, status string, data json.RawMessage) (*model.PluginRun, error) {
	if status != model.RunSucceeded && status != model.RunFailed {
		return nil, model.CodedError(model.EINVALID, "invalid_status", "status must be succeeded or failed")
	}
	data = json.RawMessage(strings.TrimSpace(string(data)))
	if len(data) > 0 && string(data) != "null" && data[0] != '{' {
		return nil, model.CodedError(model.EINVALID, "invalid_data", "data must be a JSON object")
	}
	if err := model.CheckDocumentDepth("data", data); err != nil {
		return nil, err
	}
	// The decision of the structured form is checked like a plugin's stdout (plugin.parseOutput): anything but
	// approve or reject would be stored and silently read as approve.
	if d := gjson.GetBytes(data, "decision"); gjson.GetBytes(data, "context").Exists() && d.Exists() &&
		(d.Type != gjson.String || (d.Str != "" && d.Str != "approve" && d.Str != "reject")) {
		return nil, model.CodedError(model.EINVALID, "invalid_decision", `decision must be "approve", "reject" or empty, not %s`, d.Raw)
	}
	if !e.checkResultToken(runID, token) && !actor.IsAdmin() {
		if actor == nil {
			return nil, model.CodedError(model.EUNAUTHORIZED, "invalid_result_token", "the result token is missing or wrong")
		}
		return nil, model.CodedError(model.EFORBIDDEN, "not_allowed", "only an admin or the signed result URL may finish a plugin run")
	}
	tenant := model.DefaultTenant
	if actor != nil {
		tenant = actor.TenantID
	}
	run, err := e.store.GetRun(ctx, tenant, runID)
	if err != nil {
		return nil, err
	}
	if run.Status != model.RunWaiting {
		return nil, errRunClosed(runID, "it is "+run.Status+", not waiting for a result").(*model.Error).WithDetails(map[string]any{"status": run.Status})
	}
	now := e.clock.Now().UTC()
	out := pluginOutcome{Status: status, Ended: &now, From: []string{model.RunWaiting}, Stdout: run.Stdout, Stderr: run.Stderr, ExitCode: run.ExitCode}
	if status == model.RunSucceeded {
		var ctxPatch struct {
			Context  json.RawMessage `json:"context"`
			Decision string          `json:"decision"`
		}
		// data is either the context patch itself or {"context": {...}, "decision": "..."}.
		if len(data) > 0 && json.Unmarshal(data, &ctxPatch) == nil && len(ctxPatch.Context) > 0 {
			out.Context, out.Decision = ctxPatch.Context, ctxPatch.Decision
		} else {
			out.Context = data
		}
	} else {
		out.Error = "the plugin's system reported failure"
		if len(data) > 0 {
			out.Error += ": " + string(data)
		}
	}
	if err := e.pluginResult(ctx, run, out, true); err != nil {
		if model.IsKind(err, model.ECONFLICT) {
			var de *model.Error
			if errors.As(err, &de) && de.Code != "run_closed" {
				// Another result, or the node's timeout, closed it between the read and this step.
				return nil, errRunClosed(runID, "another result or its timeout closed it first")
			}
		}
		return nil, err
	}
	return e.store.GetRun(ctx, tenant, runID)
}

// phaseEvent is the phase of a plugin run for an event subscription.
const phaseEvent = "event"

// EventPluginStore is what EventPlugins keeps: plugin versions to look up and the runs it queues.
type EventPluginStore interface {
	GetPlugin(ctx context.Context, tenant, name string, version int) (*model.Plugin, error)
	// CreatePluginRun queues a run outside an instance's transaction.
	CreatePluginRun(ctx context.Context, r *model.PluginRun) error
}

// EventPlugins queues the runs of plugin subscriptions (subscription.PluginRuns): runs of no node, with an event
// as their context, whose results change no instance. It needs no engine, so the subscription service that uses
// it is built before the engine that asks the subscription service which events are wanted.
type EventPlugins struct {
	store EventPluginStore
	wake  Notifier
}

// NewEventPlugins returns the queue of event plugin runs; wake is the plugin executor, woken to claim them.
func NewEventPlugins(store EventPluginStore, wake Notifier) (*EventPlugins, error) {
	if store == nil || wake == nil {
		return nil, fmt.Errorf("engine: event plugins need a store and an executor to wake")
	}
	return &EventPlugins{store: store, wake: wake}, nil
}

// QueueEventPlugin queues a run of the latest version of a plugin with an event as its context (plugin
// subscriptions). The run belongs to no node: its result is recorded and changes no instance.
func (q *EventPlugins) QueueEventPlugin(ctx context.Context, tenant, name, instanceID string, event json.RawMessage) (string, error) {
	p, err := q.store.GetPlugin(ctx, tenant, name, 0)
	if err != nil {
		return "", err
	}
	id := "event-" + uuid.Must(uuid.NewV7()).String()
	input, err := json.Marshal(map[string]any{"run_id": id, "instance_id": instanceID, "node_id": "", "phase": phaseEvent,
		"context": event, "node": nil, "callback_url": ""})
	if err != nil {
		return "", err
	}
	run := &model.PluginRun{ID: id, TenantID: tenant, Plugin: p.Name, Version: p.Version, InstanceID: instanceID, Phase: phaseEvent, Input: input}
	if err := q.store.CreatePluginRun(ctx, run); err != nil {
		return "", err
	}
	q.wake.Notify()
	return id, nil
}
