package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/template"
)

// run is one engine transaction on one instance: it mutates w (under the instance row lock) and is thrown away.
// Every method is deterministic given w, so the store may call the whole thing again after a deadlock.
type run struct {
	e            *Engine
	ctx          context.Context
	w            *model.Work
	c            *template.Compiled
	inst         *model.Instance
	now          time.Time
	actor        string
	retryAttempt map[string]int // attempt count carried into a node run again after its retry back-off
	// depth guards the recursion of automatic steps (a DAG cannot loop, but an error node catching its own
	// error could).
	depth int
	// advancing counts the propagations in progress. The instance is settled only when the outermost one is
	// done: halfway through, the targets of edges just taken are not activated yet, so nothing may look active
	// and a running instance would be rejected (or completed) too early.
	advancing int
	// reads are the answers of reads done outside the transaction (nil: read at once).
	reads *reads
	// cause is why this step killed edges (causeRejection, causeFailure), failure the node error of a failure
	// among them, and stranded a routing dead end (a partial join given too few branches, an ignored no_route):
	// they decide the status of an instance that this step leaves with no reachable end (see blocked).
	cause    int
	failure  *model.NodeFailure
	stranded *model.NodeFailure
}

func (e *Engine) newRun(ctx context.Context, w *model.Work, c *template.Compiled, actor string) *run {
	if w.ChangedTasks == nil {
		w.ChangedTasks = map[string]*model.Task{}
	}
	st := &w.Instance.State
	if st.Nodes == nil {
		st.Nodes = map[string]*model.NodeVisit{}
	}
	if len(st.Edges) != len(c.Def.Edges) {
		edges := make([]byte, len(c.Def.Edges))
		copy(edges, st.Edges)
		st.Edges = edges
	}
	now := e.clock.Now().UTC()
	w.Instance.UpdatedAt = now
	w.Instance.Rev++
	r := &run{e: e, ctx: ctx, w: w, c: c, inst: w.Instance, now: now, actor: actor}
	r.upgradeEdges()
	return r
}

// nextID returns a new id within the instance: <instance id>.<prefix><n>. Ids of tasks and node visits carry
// their instance id, so an action on a task finds (and locks) its instance without another read.
func (r *run) nextID(prefix string) string {
	r.inst.State.Seq++
	return r.inst.ID + "." + prefix + strconv.Itoa(r.inst.State.Seq)
}

// InstanceOf returns the instance id a task, node visit or bookmark id belongs to, or "".
func InstanceOf(id string) string {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i] == '.' {
			return id[:i]
		}
	}
	return ""
}

func (r *run) history(action, nodeID, taskID, comment string, data any) {
	var raw json.RawMessage
	if data != nil {
		raw, _ = json.Marshal(data)
	}
	r.w.History = append(r.w.History, model.HistoryEvent{At: r.now, Actor: r.actor, Action: action, NodeID: nodeID, TaskID: taskID, Comment: comment, Data: raw})
}

func (r *run) node(id string) *model.NodeVisit { return r.inst.State.Nodes[id] }

// mergeContext shallow-merges the top-level fields of data (a JSON object) into the instance context.
func (r *run) mergeContext(data json.RawMessage) error {
	if len(data) == 0 || string(data) == "null" {
		return nil
	}
	var patch map[string]json.RawMessage
	if err := json.Unmarshal(data, &patch); err != nil {
		return model.CodedError(model.EINVALID, "invalid_data", "data must be a JSON object")
	}
	if len(patch) == 0 {
		return nil
	}
	var cur map[string]json.RawMessage
	if err := json.Unmarshal(r.inst.Context, &cur); err != nil || cur == nil {
		cur = map[string]json.RawMessage{}
	}
	for k, v := range patch {
		cur[k] = v
	}
	b, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	r.inst.Context = b
	return nil
}

// setContextPath stores raw under a top-level key of the context (a node id: letters, digits, '-', '_').
func (r *run) setContextPath(key string, raw json.RawMessage) error {
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	b, err := sjson.SetRawBytes(r.inst.Context, key, raw)
	if err != nil {
		return err
	}
	r.inst.Context = b
	return nil
}

// activate starts a new visit of a node by a move that makes it active (activate, reenter, retry, branch) and
// runs it as far as it goes without waiting.
func (r *run) activate(id string, m model.Move) error {
	r.depth++
	defer func() { r.depth-- }()
	if r.depth > 10000 {
		return fmt.Errorf("engine: instance %s: activation recursion too deep at node %s", r.inst.ID, id)
	}
	n := r.c.Def.Node(id)
	if n == nil {
		return fmt.Errorf("engine: node %q is not in %s@%d", id, r.c.Key, r.c.Version)
	}
	ns, err := r.newVisit(n, m)
	if err != nil {
		return err
	}
	if a, ok := r.retryAttempt[id]; ok {
		ns.Attempt = a
		delete(r.retryAttempt, id)
	}
	r.history("node.activated", id, "", "", nil)
	r.event("node.activated", id, nil)
	if !n.CC.IsZero() {
		if err := r.copyTo(n, ns); err != nil {
			return err
		}
	}
	if n.IsIgnore {
		r.history("node.ignored", id, "", "", nil)
		ns.PreDone, ns.AfterDone = true, true // an ignored node runs no plugins
		return r.complete(id)
	}
	if n.Type == model.NodeCallback {
		// Known before the node's pre plugins run, so that they can hand it to the system that calls back.
		tok := CallbackToken(r.e.callbackKey, r.inst.ID, ns.NodeInstanceID)
		ns.CallbackURL = fmt.Sprintf("%s/api/v1/callback/%s/%s?token=%s", r.e.publicURL, r.inst.ID, ns.NodeInstanceID, tok)
	}
	if len(n.Plugins.Pre) > 0 && n.Type != model.NodeAuto {
		return r.startChain(ns, PhasePre, n.Plugins.Pre, thenRun)
	}
	return r.runNode(n, ns)
}

// runNode does a node's own work, once its pre plugins (if any) ran.
func (r *run) runNode(n *model.Node, ns *model.NodeVisit) error {
	id := n.ID
	switch n.Type {
	case model.NodeStart, model.NodeEnd, model.NodeError:
		return r.complete(id)
	case model.NodeTerminate:
		if err := r.endVisit(ns, model.MoveComplete); err != nil {
			return err
		}
		return r.finish(model.MoveTerminate, "terminate node "+id)
	case model.NodeAuto:
		// An auto node's work is its plugins: pre then after, in phase "auto"; a "reject" decision rejects it.
		if names := append(append([]string{}, n.Plugins.Pre...), n.Plugins.After...); len(names) > 0 {
			r.armPluginTimeout(n, ns)
			return r.startChain(ns, PhaseAuto, names, thenAuto)
		}
		return r.complete(id)
	case model.NodeApproval:
		return r.startApproval(n, ns)
	case model.NodeDelay:
		return r.startDelay(n, ns)
	case model.NodeCallback:
		return r.startCallback(n, ns)
	}
	return fmt.Errorf("engine: node %s has unknown type %q", id, n.Type)
}

// complete marks a node completed, evaluates its outgoing edges and advances. A node none of whose outgoing edges
// is taken does not complete: its no_route error goes to its error handler (ignoring it completes the node with
// every outgoing edge pruned).
func (r *run) complete(id string) error {
	ns := r.node(id)
	if n := r.c.Def.Node(id); len(n.Plugins.After) > 0 && !ns.AfterDone && n.Type != model.NodeAuto {
		return r.startChain(ns, PhaseAfter, n.Plugins.After, thenComplete)
	}
	r.releaseVisit(ns)
	r.history("node.completed", id, "", "", nil)
	out := r.c.Def.Outgoing(id)
	if len(out) == 0 {
		if err := r.closeVisit(ns, model.MoveComplete); err != nil {
			return err
		}
		return r.settle()
	}
	idx := r.edgeIndexes(id)
	taken := 0
	for _, i := range idx {
		e := r.c.Def.Edges[i]
		if e.Default {
			continue
		}
		if cond := r.c.Conditions[i]; cond == nil || cond.Match(r.inst.Context) {
			r.inst.State.Edges[i] = model.EdgeTaken
			taken++
		} else {
			r.inst.State.Edges[i] = model.EdgePruned
		}
	}
	for _, i := range idx {
		if r.c.Def.Edges[i].Default {
			if taken == 0 {
				r.inst.State.Edges[i] = model.EdgeTaken
				taken++
			} else {
				r.inst.State.Edges[i] = model.EdgePruned
			}
		}
	}
	if taken == 0 {
		msg := fmt.Sprintf("no outgoing edge of node %q is taken: every condition is false and there is no default edge", id)
		if r.c.Def.Node(id).ErrorHandler.Op() == model.ErrorOpIgnore {
			// Ignoring it cannot mean completing the node again: that is what just failed, and it would recurse
			// until the stack overflows. The node stays completed with every outgoing edge pruned (as set above),
			// and the joins downstream decide what follows.
			f := &model.NodeFailure{Code: model.NodeErrNoRoute, NodeID: id, Message: msg}
			r.history("node.error", id, "", msg, failureData(f, ns.Attempt))
			r.history("node.error_ignored", id, "", msg, nil)
			r.stranded = f
			if err := r.closeVisit(ns, model.MoveComplete); err != nil {
				return err
			}
			return r.propagate(idx)
		}
		// No route out of a node is a modelling error, not a quiet end: it goes to the error handler, the node
		// not completed.
		for _, i := range idx {
			r.inst.State.Edges[i] = model.EdgeUnknown
		}
		return r.nodeError(id, model.NodeErrNoRoute, msg)
	}
	if err := r.closeVisit(ns, model.MoveComplete); err != nil {
		return err
	}
	return r.propagate(idx)
}

// reject marks an approval node rejected: its outgoing edges are killed (seeds/003).
func (r *run) reject(id, reason string) error {
	ns := r.node(id)
	if n := r.c.Def.Node(id); len(n.Plugins.After) > 0 && !ns.AfterDone {
		r.cancelNodeTasks(ns.NodeInstanceID, reason)
		return r.startChain(ns, PhaseAfter, n.Plugins.After, thenReject)
	}
	if err := r.endVisit(ns, model.MoveReject); err != nil {
		return err
	}
	if err := r.cancelNodeTasks(ns.NodeInstanceID, reason); err != nil {
		return err
	}
	r.history("node.rejected", id, "", reason, nil)
	return r.kill(id, causeRejection)
}

// propagate considers the targets of edges that just got a state, then settles the instance.
func (r *run) propagate(idx []int) error {
	r.advancing++
	err := r.considerTargets(idx)
	r.advancing--
	if err != nil {
		return err
	}
	return r.settle()
}

func (r *run) considerTargets(idx []int) error {
	seen := map[string]bool{}
	for _, i := range idx {
		to := r.c.Def.Edges[i].To
		if seen[to] {
			continue
		}
		seen[to] = true
		if r.inst.Ended() {
			return nil
		}
		if err := r.consider(to); err != nil {
			return err
		}
	}
	return nil
}

// visitIsCurrent reports whether a node's state belongs to the current pass over it: a node reset by a return
// (issue 9) has its incoming edges reset too, so any state it still holds is from this pass.
func (r *run) visitIsCurrent(ns *model.NodeVisit) bool {
	return ns.State != "" && ns.State != model.NodeReset
}

func (r *run) edgeIndexes(from string) []int { return r.c.OutgoingIndexes(from) }

// settle decides whether the instance is over: completed when an end node completed and nothing is active; when
// nothing active can still reach an end, completed if an end was reached, else ended as blocked says. Inside a
// propagation it waits for the outermost one.
func (r *run) settle() error {
	if r.inst.Ended() || r.advancing > 0 {
		return nil
	}
	active := false
	ended := false
	for _, ns := range r.inst.State.Nodes {
		if ns.Active() {
			active = true
		}
		if ns.State == model.NodeCompleted && ns.Type == model.NodeEnd {
			ended = true
		}
	}
	if ended && !active {
		return r.finish(model.MoveComplete, "")
	}
	if !r.endReachable() {
		if ended {
			// An end was reached on one branch; the remaining active branches cannot reach another one. They are
			// cancelled and the instance completes.
			return r.finish(model.MoveComplete, "")
		}
		return r.blocked()
	}
	return nil
}

// blocked ends an instance that can reach no end any more: failed when a failure killed the way, rejected when a
// rejection did, failed with no_route when routing left the taken branches nowhere to go.
func (r *run) blocked() error {
	switch {
	case r.cause == causeFailure && r.failure != nil:
		return r.fail(r.failure, "no end node can be reached any more: "+r.failure.Message)
	case r.cause == causeRejection:
		return r.finish(model.MoveReject, "no end node can be reached any more")
	case r.stranded != nil:
		return r.fail(r.stranded, "no end node can be reached any more: "+r.stranded.Message)
	}
	return r.finish(model.MoveReject, "no end node can be reached any more")
}

// endReachable reports whether an active node can still reach an end node through edges neither pruned nor
// killed and nodes not yet decided whose join may still fire.
func (r *run) endReachable() bool {
	var queue []string
	seen := map[string]bool{}
	for id, ns := range r.inst.State.Nodes {
		if ns.Active() {
			queue = append(queue, id)
			seen[id] = true
		}
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if n := r.c.Def.Node(id); n.Type == model.NodeEnd || n.Type == model.NodeTerminate {
			return true
		}
		for _, i := range r.c.OutgoingIndexes(id) {
			if st := r.inst.State.Edges[i]; st == model.EdgePruned || st == model.EdgeKilled {
				continue
			}
			to := r.c.Def.Edges[i].To
			if seen[to] {
				continue
			}
			if ns := r.node(to); ns != nil && r.visitIsCurrent(ns) && !ns.Active() {
				continue // decided already (completed nodes were passed; skipped/rejected/failed block)
			}
			if !r.couldFire(to) {
				continue
			}
			seen[to] = true
			queue = append(queue, to)
		}
	}
	return false
}

// finish ends the instance by a move to a final status (complete, reject, fail, terminate, withdraw), cancelling
// every active node, open task, bookmark and timer.
func (r *run) finish(m model.Move, reason string) error {
	if err := r.moveInstance(m); err != nil {
		return err
	}
	now := r.now
	r.inst.EndedAt = &now
	for _, ns := range r.sortedNodes() {
		if ns.Active() {
			if err := r.endVisit(ns, model.MoveCancel); err != nil {
				return err
			}
		}
	}
	if err := r.cancelAllTasks(reason); err != nil {
		return err
	}
	status := r.inst.Status
	var data any
	if status == model.StatusFailed && r.inst.State.Error != nil {
		data = map[string]any{"error": r.inst.State.Error}
	}
	r.history("instance."+string(status), "", "", reason, data)
	r.event("instance."+string(status), "", nil)
	return nil
}

// fail ends the instance failed with f as its error.
func (r *run) fail(f *model.NodeFailure, reason string) error {
	r.inst.State.Error = f
	return r.finish(model.MoveFail, reason)
}

func (r *run) sortedNodes() []*model.NodeVisit {
	out := make([]*model.NodeVisit, 0, len(r.inst.State.Nodes))
	for _, ns := range r.inst.State.Nodes {
		out = append(out, ns)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeInstanceID < out[j].NodeInstanceID })
	return out
}

// nodeError applies the node's error_handler (seed: errorHandler) to a node error with a code (model.NodeErr*):
// retry, ignore, catch or throw.
func (r *run) nodeError(id, code, msg string) error {
	return r.nodeFailure(&model.NodeFailure{Code: code, NodeID: id, Message: msg})
}

func (r *run) nodeFailure(f *model.NodeFailure) error {
	id := f.NodeID
	n := r.c.Def.Node(id)
	ns := r.node(id)
	ns.Error, ns.ErrorCode = f.Message, f.Code
	r.history("node.error", id, "", f.Message, failureData(f, ns.Attempt))
	h := n.ErrorHandler
	switch h.Op() {
	case model.ErrorOpRetry:
		if ns.Attempt < h.Retry.Count {
			if err := r.moveNode(ns, model.MoveWait); err != nil {
				return err
			}
			ns.Attempt++
			ns.WaitingFor = "retry"
			period := h.Retry.Period.Std()
			if period <= 0 {
				period = time.Second
			}
			r.armTimer(ns, model.TimerRetry, r.now.Add(period), map[string]any{"attempt": ns.Attempt})
			r.history("node.retry_scheduled", id, "", "", map[string]any{"attempt": ns.Attempt, "at": r.now.Add(period)})
			return nil
		}
		// Retries exhausted: to the catch branch when one is named, else thrown.
		if h.Catch.Branch != "" {
			return r.catch(f, h.Catch.Branch)
		}
		return r.throw(f)
	case model.ErrorOpIgnore:
		r.history("node.error_ignored", id, "", f.Message, nil)
		ns.Error, ns.ErrorCode = "", ""
		if ns.Chain != nil {
			return r.chainNext(ns) // a failed plugin is passed over as if it had succeeded
		}
		return r.complete(id)
	case model.ErrorOpCatch:
		return r.catch(f, h.Catch.Branch)
	}
	return r.throw(f)
}

// failureData is the data of a node.error history item: the error and the attempt it happened at.
func failureData(f *model.NodeFailure, attempt int) map[string]any {
	d := map[string]any{"code": f.Code, "node_id": f.NodeID, "message": f.Message, "attempt": attempt}
	if len(f.Data) > 0 {
		d["data"] = f.Data
	}
	return d
}

// failNode ends a node's visit as failed, with the history item node.failed carrying its error.
func (r *run) failNode(f *model.NodeFailure, reason string) error {
	ns := r.node(f.NodeID)
	if err := r.endVisit(ns, model.MoveFail); err != nil {
		return err
	}
	if err := r.cancelNodeTasks(ns.NodeInstanceID, reason); err != nil {
		return err
	}
	r.history("node.failed", f.NodeID, "", f.Message, f)
	r.failure = f
	return nil
}

// catch fails the node and continues at the branch node with the error at context.error; the failed node's
// outgoing edges are killed.
func (r *run) catch(f *model.NodeFailure, branch string) error {
	id := f.NodeID
	if err := r.failNode(f, "caught error"); err != nil {
		return err
	}
	r.history("node.error_caught", id, "", f.Message, map[string]any{"branch": branch, "code": f.Code})
	if err := r.setContextPath("error", errorDoc(f)); err != nil {
		return err
	}
	idx := r.edgeIndexes(id)
	for _, i := range idx {
		r.inst.State.Edges[i] = model.EdgeKilled
	}
	r.cause = max(r.cause, causeFailure)
	if err := r.activate(branch, model.MoveBranch); err != nil {
		return err
	}
	return r.propagate(idx)
}

func errorDoc(f *model.NodeFailure) json.RawMessage {
	b, _ := json.Marshal(f)
	return b
}

// throw sends an unhandled error to the template's error node (with the error at context.error and the failed
// node's outgoing edges killed), or fails the instance. Either way the error is the instance's `error`.
func (r *run) throw(f *model.NodeFailure) error {
	id := f.NodeID
	if err := r.failNode(f, "node failed"); err != nil {
		return err
	}
	r.inst.State.Error = f
	if en := r.c.Def.ErrorNode(); en != nil {
		if cur := r.node(en.ID); cur == nil || !cur.Active() {
			if err := r.setContextPath("error", errorDoc(f)); err != nil {
				return err
			}
			r.history("error.thrown", id, "", f.Message, map[string]any{"error_node": en.ID, "code": f.Code})
			idx := r.edgeIndexes(id)
			for _, i := range idx {
				r.inst.State.Edges[i] = model.EdgeKilled
			}
			r.cause = max(r.cause, causeFailure)
			r.advancing++ // the error node runs first: the killed edges must not end the instance before it is active
			err := r.activate(en.ID, model.MoveBranch)
			r.advancing--
			if err != nil {
				return err
			}
			if len(idx) == 0 {
				return r.settle()
			}
			return r.propagate(idx)
		}
	}
	return r.fail(f, fmt.Sprintf("node %s failed: %s", id, f.Message))
}

// contextValue reads a gjson path from the context.
func (r *run) contextValue(path string) gjson.Result { return gjson.GetBytes(r.inst.Context, path) }
