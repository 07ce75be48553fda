package engine

import (
	"fmt"

	"github.com/halley-bpm/halley/model"
)

// Transitions. Every change of a node's state, a task's status or the instance's status in a step goes through
// one of the functions below, checked against its table in model/states.go (model.NodeMachine, TaskMachine,
// InstanceMachine). A move the table refuses is a programming error: the step fails with an error wrapping
// model.ErrTransition, its transaction is rolled back, and the error is logged.

// moveNode changes the state of a node's current visit.
func (r *run) moveNode(ns *model.NodeVisit, m model.Move) error {
	to, err := model.NodeMachine.Next(m, ns.State)
	if err != nil {
		return r.refused(err, "node "+ns.NodeID+" ("+ns.NodeInstanceID+")")
	}
	ns.State = to
	return nil
}

// newVisit starts a new visit of a node by a move from the state of its last visit (model.NodeNone when it has
// none): activate, skip, reenter, retry or branch.
func (r *run) newVisit(n *model.Node, m model.Move) (*model.NodeVisit, error) {
	from, visit := model.NodeNone, 1
	if prev := r.node(n.ID); prev != nil {
		from, visit = prev.State, prev.Visit+1
	}
	to, err := model.NodeMachine.Next(m, from)
	if err != nil {
		return nil, r.refused(err, "node "+n.ID)
	}
	now := r.now
	ns := &model.NodeVisit{NodeID: n.ID, Name: n.Label(), Type: n.Type, State: to, NodeInstanceID: r.nextID("n"), Visit: visit, StartedAt: &now}
	ns.Seq = r.inst.State.Seq
	r.inst.State.Nodes[n.ID] = ns
	return ns, nil
}

// endVisit ends a node's visit by a move to a final state (complete, reject, fail, cancel): what the visit holds
// open is closed (releaseVisit) and it ends now.
func (r *run) endVisit(ns *model.NodeVisit, m model.Move) error {
	if err := r.closeVisit(ns, m); err != nil {
		return err
	}
	r.releaseVisit(ns)
	return nil
}

// closeVisit moves a node's visit to a final state, ending now, once releaseVisit closed what it held open.
func (r *run) closeVisit(ns *model.NodeVisit, m model.Move) error {
	if err := r.moveNode(ns, m); err != nil {
		return err
	}
	now := r.now
	ns.EndedAt = &now
	return nil
}

// releaseVisit closes what a node visit holds open: the plugin run it waits for, its bookmarks and its timers.
func (r *run) releaseVisit(ns *model.NodeVisit) {
	r.closeAbandonedRun(ns)
	ns.WaitingFor = ""
	ns.Chain = nil
	// Only delay and callback visits open bookmarks (waits.go); other visits spare the step an UPDATE.
	if n := r.c.Def.Node(ns.NodeID); n == nil || n.Type == model.NodeDelay || n.Type == model.NodeCallback {
		r.w.CloseBookmarks = append(r.w.CloseBookmarks, ns.NodeInstanceID)
	}
	r.cancelTimers(ns)
}

// moveTask changes a task's status. A move that decides or cancels it stamps the decision time and the comment (a
// cancellation without a comment keeps the task's own); one that opens a decided task again (reclaim, restore)
// clears them.
func (r *run) moveTask(t *model.Task, m model.Move, comment string) error {
	from := t.Status
	to, err := model.TaskMachine.Next(m, from)
	if err != nil {
		return r.refused(err, "task "+t.ID)
	}
	t.Status = to
	switch {
	case !to.Open():
		now := r.now
		t.DecidedAt = &now
		if comment != "" || to != model.TaskCancelled {
			t.Comment = comment
		}
	case !from.Open():
		t.DecidedAt, t.Comment, t.DecidedBy = nil, "", ""
	}
	r.changed(t)
	return nil
}

// newTaskStatus is the status a task is created in by a move from model.TaskNone (open or queue).
func (r *run) newTaskStatus(m model.Move, nodeID string) (model.TaskStatus, error) {
	to, err := model.TaskMachine.Next(m, model.TaskNone)
	if err != nil {
		return to, r.refused(err, "a new task of node "+nodeID)
	}
	return to, nil
}

// moveInstance changes the instance's status.
func (r *run) moveInstance(m model.Move) error {
	to, err := model.InstanceMachine.Next(m, r.inst.Status)
	if err != nil {
		return r.refused(err, "instance "+r.inst.ID)
	}
	r.inst.Status = to
	return nil
}

// refused logs a move a table refused and returns it as the step's error.
func (r *run) refused(err error, what string) error {
	r.e.log.Error("engine: a step made a move its table does not allow; the step fails", "instance_id", r.inst.ID, "what", what, "err", err)
	return fmt.Errorf("engine: instance %s, %s: %w", r.inst.ID, what, err)
}
