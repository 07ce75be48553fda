package engine

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/halley-bpm/halley/model"
)

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

// activateRetry runs a node again after its retry back-off, keeping its attempt count.
func (s *step) activateRetry(id string) error {
	prev := s.node(id)
	if err := s.endVisit(prev, model.MoveFail); err != nil {
		return err
	}
	if s.retryAttempt == nil {
		s.retryAttempt = map[string]int{}
	}
	s.retryAttempt[id] = prev.Attempt
	return s.activate(id, model.MoveRetry)
}
