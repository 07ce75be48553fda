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
func (s *step) moveNode(ns *model.NodeVisit, m model.Move) error {
	to, err := model.NodeMachine.Next(m, ns.State)
	if err != nil {
		return s.refused(err, "node "+ns.NodeID+" ("+ns.NodeInstanceID+")")
	}
	s.moved("node", ns.NodeID, ns.Type, m, string(ns.State), string(to))
	ns.State = to
	return nil
}

// newVisit starts a new visit of a node by a move from the state of its last visit (model.NodeNone when it has
// none): activate, skip, reenter, retry or branch.
func (s *step) newVisit(n *model.Node, m model.Move) (*model.NodeVisit, error) {
	from, visit := model.NodeNone, 1
	if prev := s.node(n.ID); prev != nil {
		from, visit = prev.State, prev.Visit+1
	}
	to, err := model.NodeMachine.Next(m, from)
	if err != nil {
		return nil, s.refused(err, "node "+n.ID)
	}
	s.moved("node", n.ID, n.Type, m, string(from), string(to))
	now := s.now
	ns := &model.NodeVisit{NodeID: n.ID, Name: n.Label(), Type: n.Type, State: to, NodeInstanceID: s.nextID("n"), Visit: visit, StartedAt: &now}
	ns.Seq = s.inst.State.Seq
	s.inst.State.Nodes[n.ID] = ns
	return ns, nil
}

// endVisit ends a node's visit by a move to a final state (complete, reject, fail, cancel): what the visit holds
// open is closed (releaseVisit) and it ends now.
func (s *step) endVisit(ns *model.NodeVisit, m model.Move) error {
	if err := s.closeVisit(ns, m); err != nil {
		return err
	}
	s.releaseVisit(ns)
	return nil
}

// closeVisit moves a node's visit to a final state, ending now, once releaseVisit closed what it held open.
func (s *step) closeVisit(ns *model.NodeVisit, m model.Move) error {
	if err := s.moveNode(ns, m); err != nil {
		return err
	}
	now := s.now
	ns.EndedAt = &now
	return nil
}

// releaseVisit closes what a node visit holds open: the plugin run it waits for, its bookmarks and its timers.
func (s *step) releaseVisit(ns *model.NodeVisit) {
	s.closeAbandonedRun(ns)
	ns.WaitingFor = ""
	ns.Chain = nil
	// Only delay and callback visits open bookmarks (waits.go); other visits spare the step an UPDATE.
	if n := s.c.Def.Node(ns.NodeID); n == nil || n.Type == model.NodeDelay || n.Type == model.NodeCallback {
		s.w.CloseBookmarks = append(s.w.CloseBookmarks, ns.NodeInstanceID)
	}
	s.cancelTimers(ns)
	s.releaseChildren(ns, "node "+ns.NodeID+" of the parent ended") // a subprocess node's running children (subprocess.go)
}

// newTask creates a task of a node visit by a move from model.TaskNone: open (pending) or queue (waiting).
func (s *step) newTask(n *model.Node, ns *model.NodeVisit, assignee string, m model.Move, kind string, group, pos int, parent string) (*model.Task, error) {
	status, err := model.TaskMachine.Next(m, model.TaskNone)
	if err != nil {
		return nil, s.refused(err, "a new task of node "+n.ID)
	}
	t := &model.Task{ID: s.nextID("t"), TenantID: s.inst.TenantID, InstanceID: s.inst.ID, NodeID: n.ID, NodeName: n.Label(),
		NodeInstanceID: ns.NodeInstanceID, Assignee: assignee, Status: status, Kind: kind, Group: group, Position: pos, ParentID: parent,
		CreatedAt: s.now, Title: s.inst.Title, Template: s.inst.Template, Initiator: s.inst.Initiator}
	s.moved("task", t.ID, "", m, "", string(status))
	s.w.NewTasks = append(s.w.NewTasks, t)
	s.w.Tasks = append(s.w.Tasks, t)
	s.history("task.created", n.ID, t.ID, "", map[string]any{"assignee": assignee, "status": status, "kind": kind})
	if status == model.TaskPending {
		s.event("task.created", n.ID, t)
	}
	return t, nil
}

// moveTask changes a task's status. A move that decides or cancels it stamps the decision time and the comment (a
// cancellation without a comment keeps the task's own); one that opens a decided task again (reclaim, restore)
// clears them.
func (s *step) moveTask(t *model.Task, m model.Move, comment string) error {
	from := t.Status
	to, err := model.TaskMachine.Next(m, from)
	if err != nil {
		return s.refused(err, "task "+t.ID)
	}
	s.moved("task", t.ID, "", m, string(from), string(to))
	t.Status = to
	switch {
	case !to.Open():
		now := s.now
		t.DecidedAt = &now
		if comment != "" || to != model.TaskCancelled {
			t.Comment = comment
		}
	case !from.Open():
		t.DecidedAt, t.Comment, t.DecidedBy = nil, "", ""
	}
	s.changed(t)
	return nil
}

// moveInstance changes the instance's status.
func (s *step) moveInstance(m model.Move) error {
	to, err := model.InstanceMachine.Next(m, s.inst.Status)
	if err != nil {
		return s.refused(err, "instance "+s.inst.ID)
	}
	s.moved("instance", s.inst.ID, "", m, string(s.inst.Status), string(to))
	s.inst.Status = to
	return nil
}

// refused logs a move a table refused and returns it as the step's error.
func (s *step) refused(err error, what string) error {
	s.e.log.ErrorContext(s.ctx, "engine: a step made a move its table does not allow; the step fails", "instance_id", s.inst.ID, "what", what, "err", err)
	return fmt.Errorf("engine: instance %s, %s: %w", s.inst.ID, what, err)
}
