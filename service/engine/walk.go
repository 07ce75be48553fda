package engine

import (
	"fmt"

	"github.com/halley-bpm/halley/model"
)

// The walk: a node activates, does its work, completes or is rejected, its outgoing edges get their states,
// their targets are considered by their joins (joins.go), and when nothing more moves the instance is settled:
// completed, ended because no end can be reached any more, or left running.

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
		ns.CallbackURL = s.e.urls.Callback(s.inst.ID, ns.NodeInstanceID, tok)
	}
	if len(n.Plugins.Pre) > 0 && n.Type != model.NodeAuto {
		return s.startChain(ns, phasePre, n.Plugins.Pre, thenRun)
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
			return s.startChain(ns, phaseAuto, names, thenAuto)
		}
		return s.complete(id)
	case model.NodeApproval:
		return s.startApproval(n, ns)
	case model.NodeDelay:
		return s.startDelay(n, ns)
	case model.NodeCallback:
		return s.startCallback(n, ns)
	case model.NodeSubprocess:
		return s.startSubprocess(n, ns) // subprocess.go
	}
	return fmt.Errorf("engine: node %s has unknown type %q", id, n.Type)
}

// complete marks a node completed, evaluates its outgoing edges and advances. A node none of whose outgoing edges
// is taken does not complete: its no_route error goes to its error handler (ignoring it completes the node with
// every outgoing edge pruned).
func (s *step) complete(id string) error {
	ns := s.node(id)
	if n := s.c.Def.Node(id); len(n.Plugins.After) > 0 && !ns.AfterDone && n.Type != model.NodeAuto {
		return s.startChain(ns, phaseAfter, n.Plugins.After, thenComplete)
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
		if err := s.cancelNodeTasks(ns.NodeInstanceID, reason); err != nil {
			return err
		}
		return s.startChain(ns, phaseAfter, n.Plugins.After, thenReject)
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
	s.notifyParent() // a child's end resumes its parent (subprocess.go)
	return nil
}

// fail ends the instance failed with f as its error.
func (s *step) fail(f *model.NodeFailure, reason string) error {
	s.inst.State.Error = f
	return s.finish(model.MoveFail, reason)
}
