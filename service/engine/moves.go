package engine

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/template"
)

// descendants returns the nodes reachable from id along edges, excluding id. (Branches are not followed: they are
// taken only on errors and timeouts.)
func descendants(c *template.Compiled, id string) map[string]bool {
	return reach(id, func(n string) []string {
		var out []string
		for _, i := range c.OutgoingIndexes(n) {
			out = append(out, c.Def.Edges[i].To)
		}
		return out
	})
}

// ancestors returns the nodes from which id is reachable, excluding id.
func ancestors(c *template.Compiled, id string) map[string]bool {
	return reach(id, func(n string) []string {
		var out []string
		for _, i := range c.IncomingIndexes(n) {
			out = append(out, c.Def.Edges[i].From)
		}
		return out
	})
}

// reach walks the graph from id by next and returns every node met, excluding id.
func reach(id string, next func(string) []string) map[string]bool {
	out := map[string]bool{}
	stack := []string{id}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, m := range next(n) {
			if !out[m] && m != id {
				out[m] = true
				stack = append(stack, m)
			}
		}
	}
	return out
}

// resetRegion undoes the flow in a region of the graph: active visits there are cancelled (their tasks,
// bookmarks and timers with them), decided nodes are reset so they can run again, and the edges leaving the
// region and the pivot are forgotten, so conditions are evaluated again on the way back.
func (s *step) resetRegion(pivot string, region map[string]bool, reason string) error {
	ids := make([]string, 0, len(region))
	for id := range region {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		ns := s.node(id)
		if ns == nil || ns.State == model.NodeReset {
			continue
		}
		if ns.Active() {
			if err := s.endVisit(ns, model.MoveCancel); err != nil {
				return err
			}
			if err := s.cancelNodeTasks(ns.NodeInstanceID, reason); err != nil {
				return err
			}
		}
		if err := s.moveNode(ns, model.MoveReset); err != nil {
			return err
		}
	}
	for id := range region {
		for _, i := range s.c.OutgoingIndexes(id) {
			s.inst.State.Edges[i] = model.EdgeUnknown
		}
	}
	for _, i := range s.c.OutgoingIndexes(pivot) {
		s.inst.State.Edges[i] = model.EdgeUnknown
	}
	return nil
}

// ReturnTarget is a node a task may be returned to.
type ReturnTarget struct {
	NodeID string `json:"node_id"`
	Name   string `json:"name"`
	Type   string `json:"type"`
}

// returnTargets lists the upstream nodes of a node that completed in this instance (people-facing ones: the
// start, meaning the initiator — only when the initiator is a person — and approval nodes), in activation order.
func (s *step) returnTargets(nodeID string) []ReturnTarget {
	up := ancestors(s.c, nodeID)
	var nss []*model.NodeVisit
	for id := range up {
		ns := s.node(id)
		n := s.c.Def.Node(id)
		if ns == nil || ns.State != model.NodeCompleted || (n.Type != model.NodeStart && n.Type != model.NodeApproval) {
			continue
		}
		if n.Type == model.NodeStart && !personInitiator(s.inst.Initiator) {
			continue // nobody could resubmit (no_initiator)
		}
		nss = append(nss, ns)
	}
	sort.Slice(nss, func(i, j int) bool { return nss[i].Seq < nss[j].Seq })
	out := make([]ReturnTarget, 0, len(nss))
	for _, ns := range nss {
		out = append(out, ReturnTarget{NodeID: ns.NodeID, Name: ns.Name, Type: ns.Type})
	}
	return out
}

// ReturnTargets lists where a pending task may be returned to (GET /tasks/{id}/return-targets), and says whether
// the start would have been a target but is left out because the instance has no person as its initiator
// (no_initiator).
func (e *Engine) ReturnTargets(ctx context.Context, actor *model.Principal, taskID string) ([]ReturnTarget, bool, error) {
	t, err := e.GetTask(ctx, actor, taskID)
	if err != nil {
		return nil, false, err
	}
	inst, _, err := e.store.GetInstance(ctx, actor.TenantID, t.InstanceID)
	if err != nil {
		return nil, false, err
	}
	c, err := e.templates.Compiled(ctx, actor.TenantID, inst.Template, inst.Version)
	if err != nil {
		return nil, false, err
	}
	if !t.Open() || inst.Ended() {
		return []ReturnTarget{}, false, nil
	}
	s := &step{e: e, ctx: ctx, c: c, inst: inst, w: &model.Work{Instance: inst}}
	noInitiator := false
	if start := c.Def.Start(); start != nil && !personInitiator(inst.Initiator) && ancestors(c, t.NodeID)[start.ID] {
		noInitiator = true
	}
	return s.returnTargets(t.NodeID), noInitiator, nil
}

// Return sends the instance back to an upstream node that completed (驳回/回退): everything downstream of it is
// cancelled and reset, and it runs again with fresh tasks; to "start" the initiator gets a resubmit task.
func (e *Engine) Return(ctx context.Context, actor *model.Principal, taskID, to, comment string) (*InstanceView, error) {
	if to == "" {
		return nil, model.CodedError(model.EINVALID, "invalid_target", "to is required: the id of the node to return to")
	}
	w, err := e.taskAction(ctx, "return", actor, taskID, func(s *step, t *model.Task) error {
		target := s.c.Def.Node(to)
		if target == nil {
			return model.CodedError(model.EUNPROCESSABLE, "invalid_return_target", "node %q is not in this template", to)
		}
		if !ancestors(s.c, t.NodeID)[to] {
			return model.CodedError(model.EUNPROCESSABLE, "invalid_return_target", "node %q is not upstream of %q", to, t.NodeID)
		}
		if ns := s.node(to); ns == nil || ns.State != model.NodeCompleted {
			return model.CodedError(model.EUNPROCESSABLE, "invalid_return_target", "node %q has not completed in this instance", to)
		}
		if target.Type == model.NodeStart && !personInitiator(s.inst.Initiator) {
			return model.CodedError(model.EUNPROCESSABLE, "no_initiator",
				"this instance was started by %q, not by a person: nobody could resubmit it; return it to an approval node instead", s.inst.Initiator)
		}
		from := t.NodeID
		if err := s.moveTask(t, model.MoveCancel, comment); err != nil {
			return err
		}
		s.history("task.returned", from, t.ID, comment, map[string]any{"from": from, "to": to})
		if err := s.resetRegion(to, descendants(s.c, to), "returned to "+to); err != nil {
			return err
		}
		if target.Type == model.NodeStart {
			return s.awaitResubmit(target)
		}
		return s.activate(to, model.MoveReenter)
	})
	if err != nil {
		return nil, err
	}
	return e.view(w.Instance, nil, false), nil
}

// personInitiator reports whether an instance's initiator is a person who can be given the resubmit task of a
// return to start: not a synthetic initiator (crontab, anonymous form, an API token, a message sender's token),
// nor one of the reserved names old instances were started under.
func personInitiator(initiator string) bool {
	return model.IsPersonInitiator(initiator) && !slices.Contains(model.ReservedUsernames, initiator)
}

// awaitResubmit parks the start node on a resubmit task for the initiator (who approves it, optionally with data
// editing the context, to run the flow again — or rejects it to withdraw).
func (s *step) awaitResubmit(start *model.Node) error {
	ns, err := s.newVisit(start, model.MoveReenter)
	if err != nil {
		return err
	}
	ns.WaitingFor = "resubmit"
	ns.PreDone, ns.AfterDone = true, true
	s.history("node.activated", start.ID, "", "returned to the initiator", nil)
	_, err = s.newTask(start, ns, s.inst.Initiator, model.MoveOpen, model.TaskKindResubmit, 0, 0, "")
	return err
}

// resubmitted: the initiator approved (run the flow again from the start) or rejected (withdraw) a resubmit task.
func (s *step) resubmitted(t *model.Task, d decision) error {
	if !d.Approve {
		return s.finish(model.MoveWithdraw, "the initiator withdrew instead of resubmitting")
	}
	s.history("instance.resubmitted", t.NodeID, t.ID, d.Comment, nil)
	s.retitle()
	return s.complete(s.c.Def.Start().ID)
}

// Reclaim takes a decision back (追回): allowed to whoever decided the task while no task created after it (nor
// a later signer of its sequence) has been decided. The node runs again from that decision: downstream work is
// cancelled and the task is pending again.
func (e *Engine) Reclaim(ctx context.Context, actor *model.Principal, taskID, comment string) (*model.Task, error) {
	instID := instanceOf(taskID)
	if instID == "" {
		return nil, model.CodedError(model.ENOTFOUND, "task_not_found", "task %q not found", taskID)
	}
	_, all, err := e.store.GetInstance(ctx, actor.TenantID, instID)
	if err != nil {
		return nil, model.CodedError(model.ENOTFOUND, "task_not_found", "task %q not found", taskID)
	}
	var out *model.Task
	_, err = e.update(ctx, "reclaim", actor.TenantID, instID, actor.Username, func(s *step) error {
		var t *model.Task
		for _, x := range all {
			if x.ID == taskID {
				c := *x
				t = &c
			}
		}
		if t == nil {
			return model.CodedError(model.ENOTFOUND, "task_not_found", "task %q not found", taskID)
		}
		decider := t.Assignee
		if t.DecidedBy != "" {
			decider = t.DecidedBy
		}
		if decider != actor.Username && !actor.IsAdmin() {
			return model.CodedError(model.EFORBIDDEN, "not_decider", "only who decided task %s may take the decision back", taskID)
		}
		if t.Status != model.TaskApproved && t.Status != model.TaskRejected {
			return model.CodedError(model.ECONFLICT, "not_decided", "task %s is %s: there is no decision to take back", taskID, t.Status)
		}
		if s.inst.Ended() {
			return model.CodedError(model.ECONFLICT, "instance_ended", "instance %s is %s", s.inst.ID, s.inst.Status)
		}
		for _, x := range all {
			if x.ID == t.ID || (x.Status != model.TaskApproved && x.Status != model.TaskRejected && x.Status != model.TaskTransferred) {
				continue
			}
			// Later: created after the task in another node visit, or a later signer of its own sequence. Task ids carry
			// the instance's sequence number, which orders creations even when their timestamps are equal.
			var later bool
			if x.NodeInstanceID == t.NodeInstanceID {
				later = s.groupMode(s.c.Def.Node(t.NodeID)) == model.SignSequential && x.Group == t.Group && x.Position > t.Position
			} else {
				later = idSeq(x.ID) > idSeq(t.ID)
			}
			if later {
				return model.CodedError(model.ECONFLICT, "downstream_decided", "%s already decided task %s after you; the decision can no longer be taken back", x.Assignee, x.ID).
					WithDetails(map[string]any{"task_id": x.ID, "assignee": x.Assignee})
			}
		}
		ns := s.node(t.NodeID)
		if ns == nil || ns.NodeInstanceID != t.NodeInstanceID {
			return model.CodedError(model.ECONFLICT, "visit_over", "the node of task %s has been entered again since; it cannot be taken back", taskID)
		}
		if !ns.Active() && !model.NodeMachine.Allows(model.MoveReopen, ns.State) {
			// Its visit ended otherwise than by its signers (a timeout branch, a node error): nothing to reopen.
			return model.CodedError(model.ECONFLICT, "visit_over", "the node of task %s is %s; the decision can no longer be taken back", taskID, ns.State)
		}
		// Undo everything downstream of the task's node, then reopen the node's visit at this decision.
		if err := s.resetRegion(t.NodeID, descendants(s.c, t.NodeID), "decision taken back"); err != nil {
			return err
		}
		if !ns.Active() {
			if err := s.moveNode(ns, model.MoveReopen); err != nil {
				return err
			}
			ns.EndedAt, ns.Chain = nil, nil
			ns.AfterDone = false
		}
		n := s.c.Def.Node(t.NodeID)
		mode := s.groupMode(n)
		g := &ns.Groups[t.Group]
		if t.Status == model.TaskApproved {
			g.Approved--
			ns.ApprovedBy = slices.DeleteFunc(ns.ApprovedBy, func(u string) bool { return u == t.Assignee }) // dedupe no longer counts them
		} else {
			g.Rejected--
		}
		g.Outcome = ""
		// Signers the decision had closed (the rest of an or-group, the next of a sequence) open again.
		for _, x := range all {
			if x.NodeInstanceID != t.NodeInstanceID || x.ID == t.ID {
				continue
			}
			switch {
			case x.Status == model.TaskCancelled && x.DecidedAt != nil && t.DecidedAt != nil && x.DecidedAt.Equal(*t.DecidedAt):
				c := *x
				if err := s.moveTask(&c, model.MoveRestore, ""); err != nil {
					return err
				}
				if mode == model.SignSequential && c.Position > t.Position {
					if err := s.moveTask(&c, model.MoveHold, ""); err != nil {
						return err
					}
				}
				s.w.Tasks = append(s.w.Tasks, &c)
			case x.Status == model.TaskPending && mode == model.SignSequential && x.Group == t.Group && x.Position > t.Position:
				if open := s.task(x.ID); open != nil {
					if err := s.moveTask(open, model.MoveHold, ""); err != nil {
						return err
					}
				}
			}
		}
		if err := s.moveTask(t, model.MoveReclaim, ""); err != nil {
			return err
		}
		s.w.Tasks = append(s.w.Tasks, t)
		s.history("task.reclaimed", t.NodeID, t.ID, comment, nil)
		if ns.Timers == nil && n.Timeout > 0 {
			s.armTimer(ns, model.TimerApprovalTimeout, s.now.Add(n.Timeout.Std()), nil)
		}
		out = t
		return nil
	})
	return out, err
}

// idSeq returns the sequence number in an id like <instance>.t42 (0 when it has none).
func idSeq(id string) int {
	i := strings.LastIndexFunc(id, func(r rune) bool { return r < '0' || r > '9' })
	n, _ := strconv.Atoi(id[i+1:])
	return n
}

// Jump cancels every active node, task, bookmark and timer and activates any node of the version (自由流): the
// operator's repair tool, for admins. A failed instance runs again.
func (e *Engine) Jump(ctx context.Context, actor *model.Principal, id, to, reason string) (*InstanceView, error) {
	if !actor.IsAdmin() {
		return nil, model.CodedError(model.EFORBIDDEN, "admin_required", "only admins may jump an instance")
	}
	if to == "" {
		return nil, model.CodedError(model.EINVALID, "invalid_target", "to is required: the id of the node to jump to")
	}
	w, err := e.update(ctx, "jump", actor.TenantID, id, actor.Username, func(s *step) error {
		n := s.c.Def.Node(to)
		if n == nil {
			return model.CodedError(model.EUNPROCESSABLE, "invalid_jump_target", "node %q is not in this template", to)
		}
		if s.inst.Status != model.StatusRunning && s.inst.Status != model.StatusFailed {
			return model.CodedError(model.ECONFLICT, "instance_ended", "instance %s is %s", id, s.inst.Status)
		}
		var from []string
		for _, ns := range s.sortedNodes() {
			if ns.Active() {
				from = append(from, ns.NodeID)
				if err := s.endVisit(ns, model.MoveCancel); err != nil {
					return err
				}
			}
		}
		if err := s.cancelAllTasks("jumped to " + to); err != nil {
			return err
		}
		s.history("instance.jumped", to, "", reason, map[string]any{"from": from, "to": to})
		if s.inst.Status == model.StatusFailed {
			// The repair: the instance runs again, and its error is history (node.failed keeps it).
			if err := s.moveInstance(model.MoveRepair); err != nil {
				return err
			}
			s.inst.EndedAt, s.inst.State.Error = nil, nil
		}
		region := descendants(s.c, to)
		region[to] = true
		if err := s.resetRegion(to, region, "jumped to "+to); err != nil {
			return err
		}
		if err := s.activate(to, model.MoveActivate); err != nil {
			return err
		}
		return s.settle()
	})
	if err != nil {
		return nil, err
	}
	return e.view(w.Instance, nil, true), nil
}
