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

// step is one engine transaction on one instance (docs/engine.md "One step = one transaction"): it mutates w
// (under the instance row lock) and is thrown away. Every method is deterministic given w, so the store may call
// the whole thing again after a deadlock.
type step struct {
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

func (e *Engine) newStep(ctx context.Context, w *model.Work, c *template.Compiled, actor string) *step {
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
	s := &step{e: e, ctx: ctx, w: w, c: c, inst: w.Instance, now: now, actor: actor}
	s.upgradeEdges()
	return s
}

// nextID returns a new id within the instance: <instance id>.<prefix><n>. Ids of tasks and node visits carry
// their instance id, so an action on a task finds (and locks) its instance without another read.
func (s *step) nextID(prefix string) string {
	s.inst.State.Seq++
	return s.inst.ID + "." + prefix + strconv.Itoa(s.inst.State.Seq)
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

func (s *step) history(action, nodeID, taskID, comment string, data any) {
	var raw json.RawMessage
	if data != nil {
		raw, _ = json.Marshal(data)
	}
	s.w.History = append(s.w.History, model.HistoryEvent{At: s.now, Actor: s.actor, Action: action, NodeID: nodeID, TaskID: taskID, Comment: comment, Data: raw})
}

func (s *step) node(id string) *model.NodeVisit { return s.inst.State.Nodes[id] }

// mergeContext shallow-merges the top-level fields of data (a JSON object) into the instance context.
func (s *step) mergeContext(data json.RawMessage) error {
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
	if err := json.Unmarshal(s.inst.Context, &cur); err != nil || cur == nil {
		cur = map[string]json.RawMessage{}
	}
	for k, v := range patch {
		cur[k] = v
	}
	b, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	s.inst.Context = b
	return nil
}

// setContextPath stores raw under a top-level key of the context (a node id: letters, digits, '-', '_').
func (s *step) setContextPath(key string, raw json.RawMessage) error {
	if len(raw) == 0 {
		raw = json.RawMessage("null")
	}
	b, err := sjson.SetRawBytes(s.inst.Context, key, raw)
	if err != nil {
		return err
	}
	s.inst.Context = b
	return nil
}

// activate starts a new visit of a node by a move that makes it active (activate, reenter, retry, branch) and
// runs it as far as it goes without waiting.
func (s *step) activate(id string, m model.Move) error {
	s.depth++
	defer func() { s.depth-- }()
	if s.depth > 10000 {
		return fmt.Errorf("engine: instance %s: activation recursion too deep at node %s", s.inst.ID, id)
	}
	n := s.c.Def.Node(id)
	if n == nil {
		return fmt.Errorf("engine: node %q is not in %s@%d", id, s.c.Key, s.c.Version)
	}
	ns, err := s.newVisit(n, m)
	if err != nil {
		return err
	}
	if a, ok := s.retryAttempt[id]; ok {
		ns.Attempt = a
		delete(s.retryAttempt, id)
	}
	s.history("node.activated", id, "", "", nil)
	s.event("node.activated", id, nil)
	if !n.CC.IsZero() {
		if err := s.copyTo(n, ns); err != nil {
			return err
		}
	}
	if n.IsIgnore {
		s.history("node.ignored", id, "", "", nil)
		ns.PreDone, ns.AfterDone = true, true // an ignored node runs no plugins
		return s.complete(id)
	}
	if n.Type == model.NodeCallback {
		// Known before the node's pre plugins run, so that they can hand it to the system that calls back.
		tok := CallbackToken(s.e.callbackKey, s.inst.ID, ns.NodeInstanceID)
		ns.CallbackURL = fmt.Sprintf("%s/api/v1/callback/%s/%s?token=%s", s.e.publicURL, s.inst.ID, ns.NodeInstanceID, tok)
	}
	if len(n.Plugins.Pre) > 0 && n.Type != model.NodeAuto {
		return s.startChain(ns, PhasePre, n.Plugins.Pre, thenRun)
	}
	return s.runNode(n, ns)
}

// runNode does a node's own work, once its pre plugins (if any) ran.
func (s *step) runNode(n *model.Node, ns *model.NodeVisit) error {
	id := n.ID
	switch n.Type {
	case model.NodeStart, model.NodeEnd, model.NodeError:
		return s.complete(id)
	case model.NodeTerminate:
		if err := s.endVisit(ns, model.MoveComplete); err != nil {
			return err
		}
		return s.finish(model.MoveTerminate, "terminate node "+id)
	case model.NodeAuto:
		// An auto node's work is its plugins: pre then after, in phase "auto"; a "reject" decision rejects it.
		if names := append(append([]string{}, n.Plugins.Pre...), n.Plugins.After...); len(names) > 0 {
			s.armPluginTimeout(n, ns)
			return s.startChain(ns, PhaseAuto, names, thenAuto)
		}
		return s.complete(id)
	case model.NodeApproval:
		return s.startApproval(n, ns)
	case model.NodeDelay:
		return s.startDelay(n, ns)
	case model.NodeCallback:
		return s.startCallback(n, ns)
	}
	return fmt.Errorf("engine: node %s has unknown type %q", id, n.Type)
}

// complete marks a node completed, evaluates its outgoing edges and advances. A node none of whose outgoing edges
// is taken does not complete: its no_route error goes to its error handler (ignoring it completes the node with
// every outgoing edge pruned).
func (s *step) complete(id string) error {
	ns := s.node(id)
	if n := s.c.Def.Node(id); len(n.Plugins.After) > 0 && !ns.AfterDone && n.Type != model.NodeAuto {
		return s.startChain(ns, PhaseAfter, n.Plugins.After, thenComplete)
	}
	s.releaseVisit(ns)
	s.history("node.completed", id, "", "", nil)
	out := s.c.Def.Outgoing(id)
	if len(out) == 0 {
		if err := s.closeVisit(ns, model.MoveComplete); err != nil {
			return err
		}
		return s.settle()
	}
	idx := s.edgeIndexes(id)
	taken := 0
	for _, i := range idx {
		e := s.c.Def.Edges[i]
		if e.Default {
			continue
		}
		if cond := s.c.Conditions[i]; cond == nil || cond.Match(s.inst.Context) {
			s.inst.State.Edges[i] = model.EdgeTaken
			taken++
		} else {
			s.inst.State.Edges[i] = model.EdgePruned
		}
	}
	for _, i := range idx {
		if s.c.Def.Edges[i].Default {
			if taken == 0 {
				s.inst.State.Edges[i] = model.EdgeTaken
				taken++
			} else {
				s.inst.State.Edges[i] = model.EdgePruned
			}
		}
	}
	if taken == 0 {
		msg := fmt.Sprintf("no outgoing edge of node %q is taken: every condition is false and there is no default edge", id)
		if s.c.Def.Node(id).ErrorHandler.Op() == model.ErrorOpIgnore {
			// Ignoring it cannot mean completing the node again: that is what just failed, and it would recurse
			// until the stack overflows. The node stays completed with every outgoing edge pruned (as set above),
			// and the joins downstream decide what follows.
			f := &model.NodeFailure{Code: model.NodeErrNoRoute, NodeID: id, Message: msg}
			s.history("node.error", id, "", msg, failureData(f, ns.Attempt))
			s.history("node.error_ignored", id, "", msg, nil)
			s.stranded = f
			if err := s.closeVisit(ns, model.MoveComplete); err != nil {
				return err
			}
			return s.propagate(idx)
		}
		// No route out of a node is a modelling error, not a quiet end: it goes to the error handler, the node
		// not completed.
		for _, i := range idx {
			s.inst.State.Edges[i] = model.EdgeUnknown
		}
		return s.nodeError(id, model.NodeErrNoRoute, msg)
	}
	if err := s.closeVisit(ns, model.MoveComplete); err != nil {
		return err
	}
	return s.propagate(idx)
}

// reject marks an approval node rejected: its outgoing edges are killed (seeds/003).
func (s *step) reject(id, reason string) error {
	ns := s.node(id)
	if n := s.c.Def.Node(id); len(n.Plugins.After) > 0 && !ns.AfterDone {
		s.cancelNodeTasks(ns.NodeInstanceID, reason)
		return s.startChain(ns, PhaseAfter, n.Plugins.After, thenReject)
	}
	if err := s.endVisit(ns, model.MoveReject); err != nil {
		return err
	}
	if err := s.cancelNodeTasks(ns.NodeInstanceID, reason); err != nil {
		return err
	}
	s.history("node.rejected", id, "", reason, nil)
	return s.kill(id, causeRejection)
}

// propagate considers the targets of edges that just got a state, then settles the instance.
func (s *step) propagate(idx []int) error {
	s.advancing++
	err := s.considerTargets(idx)
	s.advancing--
	if err != nil {
		return err
	}
	return s.settle()
}

func (s *step) considerTargets(idx []int) error {
	seen := map[string]bool{}
	for _, i := range idx {
		to := s.c.Def.Edges[i].To
		if seen[to] {
			continue
		}
		seen[to] = true
		if s.inst.Ended() {
			return nil
		}
		if err := s.consider(to); err != nil {
			return err
		}
	}
	return nil
}

// visitIsCurrent reports whether a node's state belongs to the current pass over it: a node reset by a return
// (issue 9) has its incoming edges reset too, so any state it still holds is from this pass.
func (s *step) visitIsCurrent(ns *model.NodeVisit) bool {
	return ns.State != "" && ns.State != model.NodeReset
}

func (s *step) edgeIndexes(from string) []int { return s.c.OutgoingIndexes(from) }

// settle decides whether the instance is over: completed when an end node completed and nothing is active; when
// nothing active can still reach an end, completed if an end was reached, else ended as blocked says. Inside a
// propagation it waits for the outermost one.
func (s *step) settle() error {
	if s.inst.Ended() || s.advancing > 0 {
		return nil
	}
	active := false
	ended := false
	for _, ns := range s.inst.State.Nodes {
		if ns.Active() {
			active = true
		}
		if ns.State == model.NodeCompleted && ns.Type == model.NodeEnd {
			ended = true
		}
	}
	if ended && !active {
		return s.finish(model.MoveComplete, "")
	}
	if !s.endReachable() {
		if ended {
			// An end was reached on one branch; the remaining active branches cannot reach another one. They are
			// cancelled and the instance completes.
			return s.finish(model.MoveComplete, "")
		}
		return s.blocked()
	}
	return nil
}

// blocked ends an instance that can reach no end any more: failed when a failure killed the way, rejected when a
// rejection did, failed with no_route when routing left the taken branches nowhere to go.
func (s *step) blocked() error {
	switch {
	case s.cause == causeFailure && s.failure != nil:
		return s.fail(s.failure, "no end node can be reached any more: "+s.failure.Message)
	case s.cause == causeRejection:
		return s.finish(model.MoveReject, "no end node can be reached any more")
	case s.stranded != nil:
		return s.fail(s.stranded, "no end node can be reached any more: "+s.stranded.Message)
	}
	return s.finish(model.MoveReject, "no end node can be reached any more")
}

// endReachable reports whether an active node can still reach an end node through edges neither pruned nor
// killed and nodes not yet decided whose join may still fire.
func (s *step) endReachable() bool {
	var queue []string
	seen := map[string]bool{}
	for id, ns := range s.inst.State.Nodes {
		if ns.Active() {
			queue = append(queue, id)
			seen[id] = true
		}
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if n := s.c.Def.Node(id); n.Type == model.NodeEnd || n.Type == model.NodeTerminate {
			return true
		}
		for _, i := range s.c.OutgoingIndexes(id) {
			if st := s.inst.State.Edges[i]; st == model.EdgePruned || st == model.EdgeKilled {
				continue
			}
			to := s.c.Def.Edges[i].To
			if seen[to] {
				continue
			}
			if ns := s.node(to); ns != nil && s.visitIsCurrent(ns) && !ns.Active() {
				continue // decided already (completed nodes were passed; skipped/rejected/failed block)
			}
			if !s.couldFire(to) {
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
func (s *step) finish(m model.Move, reason string) error {
	if err := s.moveInstance(m); err != nil {
		return err
	}
	now := s.now
	s.inst.EndedAt = &now
	for _, ns := range s.sortedNodes() {
		if ns.Active() {
			if err := s.endVisit(ns, model.MoveCancel); err != nil {
				return err
			}
		}
	}
	if err := s.cancelAllTasks(reason); err != nil {
		return err
	}
	status := s.inst.Status
	var data any
	if status == model.StatusFailed && s.inst.State.Error != nil {
		data = map[string]any{"error": s.inst.State.Error}
	}
	s.history("instance."+string(status), "", "", reason, data)
	s.event("instance."+string(status), "", nil)
	return nil
}

// fail ends the instance failed with f as its error.
func (s *step) fail(f *model.NodeFailure, reason string) error {
	s.inst.State.Error = f
	return s.finish(model.MoveFail, reason)
}

func (s *step) sortedNodes() []*model.NodeVisit {
	out := make([]*model.NodeVisit, 0, len(s.inst.State.Nodes))
	for _, ns := range s.inst.State.Nodes {
		out = append(out, ns)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeInstanceID < out[j].NodeInstanceID })
	return out
}

// nodeError applies the node's error_handler (seed: errorHandler) to a node error with a code (model.NodeErr*):
// retry, ignore, catch or throw.
func (s *step) nodeError(id, code, msg string) error {
	return s.nodeFailure(&model.NodeFailure{Code: code, NodeID: id, Message: msg})
}

func (s *step) nodeFailure(f *model.NodeFailure) error {
	id := f.NodeID
	n := s.c.Def.Node(id)
	ns := s.node(id)
	ns.Error, ns.ErrorCode = f.Message, f.Code
	s.history("node.error", id, "", f.Message, failureData(f, ns.Attempt))
	h := n.ErrorHandler
	switch h.Op() {
	case model.ErrorOpRetry:
		if ns.Attempt < h.Retry.Count {
			if err := s.moveNode(ns, model.MoveWait); err != nil {
				return err
			}
			ns.Attempt++
			ns.WaitingFor = "retry"
			period := h.Retry.Period.Std()
			if period <= 0 {
				period = time.Second
			}
			s.armTimer(ns, model.TimerRetry, s.now.Add(period), map[string]any{"attempt": ns.Attempt})
			s.history("node.retry_scheduled", id, "", "", map[string]any{"attempt": ns.Attempt, "at": s.now.Add(period)})
			return nil
		}
		// Retries exhausted: to the catch branch when one is named, else thrown.
		if h.Catch.Branch != "" {
			return s.catch(f, h.Catch.Branch)
		}
		return s.throw(f)
	case model.ErrorOpIgnore:
		s.history("node.error_ignored", id, "", f.Message, nil)
		ns.Error, ns.ErrorCode = "", ""
		if ns.Chain != nil {
			return s.chainNext(ns) // a failed plugin is passed over as if it had succeeded
		}
		return s.complete(id)
	case model.ErrorOpCatch:
		return s.catch(f, h.Catch.Branch)
	}
	return s.throw(f)
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
func (s *step) failNode(f *model.NodeFailure, reason string) error {
	ns := s.node(f.NodeID)
	if err := s.endVisit(ns, model.MoveFail); err != nil {
		return err
	}
	if err := s.cancelNodeTasks(ns.NodeInstanceID, reason); err != nil {
		return err
	}
	s.history("node.failed", f.NodeID, "", f.Message, f)
	s.failure = f
	return nil
}

// catch fails the node and continues at the branch node with the error at context.error; the failed node's
// outgoing edges are killed.
func (s *step) catch(f *model.NodeFailure, branch string) error {
	id := f.NodeID
	if err := s.failNode(f, "caught error"); err != nil {
		return err
	}
	s.history("node.error_caught", id, "", f.Message, map[string]any{"branch": branch, "code": f.Code})
	if err := s.setContextPath("error", errorDoc(f)); err != nil {
		return err
	}
	idx := s.edgeIndexes(id)
	for _, i := range idx {
		s.inst.State.Edges[i] = model.EdgeKilled
	}
	s.cause = max(s.cause, causeFailure)
	if err := s.activate(branch, model.MoveBranch); err != nil {
		return err
	}
	return s.propagate(idx)
}

func errorDoc(f *model.NodeFailure) json.RawMessage {
	b, _ := json.Marshal(f)
	return b
}

// throw sends an unhandled error to the template's error node (with the error at context.error and the failed
// node's outgoing edges killed), or fails the instance. Either way the error is the instance's `error`.
func (s *step) throw(f *model.NodeFailure) error {
	id := f.NodeID
	if err := s.failNode(f, "node failed"); err != nil {
		return err
	}
	s.inst.State.Error = f
	if en := s.c.Def.ErrorNode(); en != nil {
		if cur := s.node(en.ID); cur == nil || !cur.Active() {
			if err := s.setContextPath("error", errorDoc(f)); err != nil {
				return err
			}
			s.history("error.thrown", id, "", f.Message, map[string]any{"error_node": en.ID, "code": f.Code})
			idx := s.edgeIndexes(id)
			for _, i := range idx {
				s.inst.State.Edges[i] = model.EdgeKilled
			}
			s.cause = max(s.cause, causeFailure)
			s.advancing++ // the error node runs first: the killed edges must not end the instance before it is active
			err := s.activate(en.ID, model.MoveBranch)
			s.advancing--
			if err != nil {
				return err
			}
			if len(idx) == 0 {
				return s.settle()
			}
			return s.propagate(idx)
		}
	}
	return s.fail(f, fmt.Sprintf("node %s failed: %s", id, f.Message))
}

// contextValue reads a gjson path from the context.
func (s *step) contextValue(path string) gjson.Result { return gjson.GetBytes(s.inst.Context, path) }
