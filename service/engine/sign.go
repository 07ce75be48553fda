package engine

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/halley-bpm/halley/model"
)

// startApproval asks the Rules who decides an approval node and opens its tasks; signers the Rules decide
// automatically are approved at once (sequential sign: when their turn comes), and nobody left is the node's
// on_no_approver.
func (s *step) startApproval(n *model.Node, ns *model.NodeVisit) error {
	q, err := s.assignQuery(n)
	if err != nil {
		return s.nodeError(n.ID, model.NodeErrNoApprover, err.Error())
	}
	a, err := s.assign(q)
	if err != nil {
		return err
	}
	s.notes(n.ID, a)
	if na := a.NoApprover; na != nil {
		return s.noApprover(n, ns, na)
	}
	mode := s.groupMode(n)
	ns.Groups = make([]model.SignTally, len(a.Groups))
	var autos []*model.Task
	for g, signers := range a.Groups {
		ns.Groups[g].Total = len(signers)
		for pos, x := range signers {
			m := model.MoveOpen
			if x.Auto != "" || mode == model.SignSequential && pos > 0 {
				m = model.MoveQueue // not yet their turn, or decided automatically below (no task.created event)
			}
			t, err := s.newTask(n, ns, x.User, m, model.TaskKindApproval, g, pos, "")
			if err != nil {
				return err
			}
			if x.DelegatedFrom != "" {
				t.DelegatedFrom = x.DelegatedFrom
				s.history("task.delegated", n.ID, t.ID, "", map[string]any{"from": x.DelegatedFrom, "to": x.User})
			}
			if x.InPlaceOf != "" {
				s.history("task.in_place_of", n.ID, t.ID, "", map[string]any{"assignee": x.User, "in_place_of": x.InPlaceOf, "reason": model.AutoSelfApproval})
			}
			if x.Auto != "" {
				if ns.AutoTasks == nil {
					ns.AutoTasks = map[string]string{}
				}
				ns.AutoTasks[t.ID] = x.Auto
				if mode != model.SignSequential || pos == 0 {
					autos = append(autos, t)
				}
			}
		}
	}
	if n.Timeout > 0 {
		s.armTimer(ns, model.TimerApprovalTimeout, s.now.Add(n.Timeout.Std()), nil)
	}
	for _, t := range autos {
		if t.Status != model.TaskWaiting || !ns.Active() {
			continue // the node was decided by an earlier automatic approval (or sign): its other tasks are cancelled
		}
		if err := s.autoApprove(t, ns.AutoTasks[t.ID]); err != nil {
			return err
		}
	}
	return nil
}

// autoApprove approves a waiting task automatically for reason and counts it (task.auto_approved).
func (s *step) autoApprove(t *model.Task, reason string) error {
	if err := s.moveTask(t, model.MoveRelease, ""); err != nil {
		return err
	}
	if err := s.moveTask(t, model.MoveApprove, autoComment(reason)); err != nil {
		return err
	}
	t.Auto = true
	s.history("task.auto_approved", t.NodeID, t.ID, "", map[string]any{"assignee": t.Assignee, "reason": reason})
	s.event("task.decided", t.NodeID, t)
	return s.credit(t, true)
}

// noApprover applies a node's on_no_approver when nobody is left to decide it: error (the node error
// no_approver), pass (an automatic approval completes it) or reject (an automatic rejection rejects it); each
// automatic decision is a task of nobody with auto set and a history item with its reason.
func (s *step) noApprover(n *model.Node, ns *model.NodeVisit, na *NoApprover) error {
	switch na.Policy {
	case model.NoApproverPass, model.NoApproverReject:
	default:
		var data json.RawMessage
		if len(na.Dropped) > 0 {
			data = mustJSON(map[string]any{"dropped": na.Dropped})
		}
		return s.nodeFailure(&model.NodeFailure{Code: model.NodeErrNoApprover, NodeID: n.ID, Message: na.Message, Data: data})
	}
	ns.Groups = []model.SignTally{{Total: 1}}
	t, err := s.newTask(n, ns, "", model.MoveQueue, model.TaskKindApproval, 0, 0, "")
	if err != nil {
		return err
	}
	if err := s.moveTask(t, model.MoveRelease, ""); err != nil {
		return err
	}
	t.Auto = true
	data := map[string]any{"reason": model.AutoNoApprover, "message": na.Message}
	if na.Policy == model.NoApproverPass {
		if err := s.moveTask(t, model.MoveApprove, autoComment(model.AutoNoApprover)); err != nil {
			return err
		}
		s.history("task.auto_approved", n.ID, t.ID, "", data)
		return s.credit(t, true)
	}
	if err := s.moveTask(t, model.MoveReject, autoComment(model.AutoNoApprover)); err != nil {
		return err
	}
	s.history("task.auto_rejected", n.ID, t.ID, "", data)
	return s.credit(t, false)
}

// autoComment is the comment of an automatic decision (the reason, for people reading a task list).
func autoComment(reason string) string {
	switch reason {
	case model.AutoNoApprover:
		return "automatically decided: nobody to approve"
	case model.AutoSelfApproval:
		return "automatically approved: the initiator approves their own request"
	case model.AutoDedupe:
		return "automatically approved: approved earlier in this process"
	}
	return "automatically decided: " + reason
}

// groupMode is how each signer group decides: group_sign with parallel sign, else sign.
func (s *step) groupMode(n *model.Node) string {
	if n.Approvers.HasGroups() {
		return n.GroupSignMode()
	}
	return n.SignMode()
}

// task returns an open task of the instance by id, or nil.
func (s *step) task(id string) *model.Task {
	for _, t := range s.w.Tasks {
		if t.ID == id {
			return t
		}
	}
	return nil
}

func (s *step) changed(t *model.Task) { s.w.ChangedTasks[t.ID] = t }

// openTasks returns the open tasks of a node visit matching pred (nil = all).
func (s *step) openTasks(nodeInstanceID string, pred func(*model.Task) bool) []*model.Task {
	var out []*model.Task
	for _, t := range s.w.Tasks {
		if t.NodeInstanceID == nodeInstanceID && t.Open() && (pred == nil || pred(t)) {
			out = append(out, t)
		}
	}
	return out
}

// cancelNodeTasks cancels the open tasks of a node visit.
func (s *step) cancelNodeTasks(nodeInstanceID, reason string) error {
	return s.cancelTasks(s.openTasks(nodeInstanceID, nil), reason)
}

// cancelAllTasks cancels every open task of the instance.
func (s *step) cancelAllTasks(reason string) error {
	return s.cancelOpen(func(*model.Task) bool { return true }, reason)
}

// cancelOpen cancels the open tasks of the instance matching pred.
func (s *step) cancelOpen(pred func(*model.Task) bool, reason string) error {
	var ts []*model.Task
	for _, t := range s.w.Tasks {
		if t.Open() && pred(t) {
			ts = append(ts, t)
		}
	}
	return s.cancelTasks(ts, reason)
}

func (s *step) cancelTasks(ts []*model.Task, reason string) error {
	for _, t := range ts {
		if err := s.moveTask(t, model.MoveCancel, reason); err != nil {
			return err
		}
	}
	return nil
}

// decision is what a signer decides.
type decision struct {
	Approve bool
	Comment string
	Data    []byte
	// Attachments are the files that go with the comment.
	Attachments []model.FileRef
	// By is who acted; it differs from the assignee when an admin decides for them.
	By string
}

// decide applies a signer's decision to a pending task and advances the instance.
func (s *step) decide(t *model.Task, d decision) error {
	ns := s.node(t.NodeID)
	if ns == nil || ns.NodeInstanceID != t.NodeInstanceID || !ns.Active() {
		return model.CodedError(model.ECONFLICT, "task_not_open", "task %s belongs to a node visit that is over", t.ID)
	}
	if d.Approve && len(d.Data) > 0 {
		if err := s.applyDecisionData(t, d.Data); err != nil {
			return err
		}
		t.Data = d.Data
	}
	m, action := model.MoveReject, "task.rejected"
	if d.Approve {
		m, action = model.MoveApprove, "task.approved"
	}
	if err := s.moveTask(t, m, d.Comment); err != nil {
		return err
	}
	if d.By != t.Assignee {
		t.DecidedBy = d.By
	}
	data := map[string]any{"assignee": t.Assignee}
	if t.DecidedBy != "" {
		data["on_behalf_of"] = t.Assignee
	}
	if len(d.Attachments) > 0 {
		data["attachments"] = d.Attachments
	}
	s.history(action, t.NodeID, t.ID, d.Comment, data)
	s.event("task.decided", t.NodeID, t)

	if t.Kind == model.TaskKindResubmit {
		return s.resubmitted(t, d)
	}
	switch t.Kind {
	case model.TaskKindSignBefore:
		parent := s.task(t.ParentID)
		if parent == nil {
			return nil
		}
		if !d.Approve {
			if err := s.moveTask(parent, model.MoveCancel, "rejected by an add-sign signer"); err != nil {
				return err
			}
			return s.credit(parent, false)
		}
		if len(s.openTasks(t.NodeInstanceID, func(x *model.Task) bool { return x.ParentID == parent.ID && x.Kind == model.TaskKindSignBefore })) == 0 {
			if err := s.moveTask(parent, model.MoveRelease, ""); err != nil {
				return err
			}
			s.history("task.resumed", parent.NodeID, parent.ID, "add-sign signers approved", nil)
		}
		return nil
	case model.TaskKindSignAfter:
		parent := &model.Task{ID: t.ParentID, NodeID: t.NodeID, NodeInstanceID: t.NodeInstanceID, Group: t.Group, Kind: model.TaskKindApproval}
		if !d.Approve {
			if err := s.cancelOpen(func(x *model.Task) bool { return x.ParentID == t.ParentID }, ""); err != nil {
				return err
			}
			return s.credit(parent, false)
		}
		if len(s.openTasks(t.NodeInstanceID, func(x *model.Task) bool { return x.ParentID == t.ParentID })) == 0 {
			return s.credit(parent, true)
		}
		return nil
	}
	if d.Approve && len(t.AfterSigners) > 0 {
		n := s.c.Def.Node(t.NodeID)
		for _, u := range t.AfterSigners {
			if _, err := s.newTask(n, ns, u, model.MoveOpen, model.TaskKindSignAfter, t.Group, t.Position, t.ID); err != nil {
				return err
			}
		}
		return nil
	}
	return s.credit(t, d.Approve)
}

// credit counts a signer's final decision in its group and decides the group and the node when they are decided.
func (s *step) credit(t *model.Task, approved bool) error {
	ns := s.node(t.NodeID)
	n := s.c.Def.Node(t.NodeID)
	if t.Group >= len(ns.Groups) {
		return fmt.Errorf("engine: task %s has group %d but node %s has %d", t.ID, t.Group, n.ID, len(ns.Groups))
	}
	g := &ns.Groups[t.Group]
	if approved {
		if t.Assignee != "" && !slices.Contains(ns.ApprovedBy, t.Assignee) {
			ns.ApprovedBy = append(ns.ApprovedBy, t.Assignee)
		}
		g.Approved++
	} else {
		g.Rejected++
	}
	mode := s.groupMode(n)
	g.Outcome = outcome(mode, n.PassRatio, *g)
	inGroup := func(x *model.Task) bool { return x.Group == t.Group }
	switch g.Outcome {
	case model.OutcomeUndecided:
		if mode == model.SignSequential && approved {
			return s.promoteNext(ns.NodeInstanceID, t.Group)
		}
		return nil
	case model.OutcomeRejected:
		return s.reject(n.ID, "rejected")
	}
	if err := s.cancelTasks(s.openTasks(ns.NodeInstanceID, inGroup), "the signer group is decided"); err != nil {
		return err
	}
	for _, og := range ns.Groups {
		if og.Outcome != model.OutcomeApproved {
			return nil
		}
	}
	return s.complete(n.ID)
}

// promoteNext makes the next waiting signer of a sequential group pending.
func (s *step) promoteNext(nodeInstanceID string, group int) error {
	var next *model.Task
	for _, x := range s.openTasks(nodeInstanceID, func(x *model.Task) bool {
		return x.Group == group && x.Status == model.TaskWaiting && x.Kind == model.TaskKindApproval
	}) {
		if next == nil || x.Position < next.Position {
			next = x
		}
	}
	if next == nil {
		return nil
	}
	if reason, ok := s.node(next.NodeID).AutoTasks[next.ID]; ok {
		return s.autoApprove(next, reason) // its turn: decided automatically, in order
	}
	if err := s.moveTask(next, model.MoveRelease, ""); err != nil {
		return err
	}
	s.history("task.pending", next.NodeID, next.ID, "", map[string]any{"assignee": next.Assignee})
	s.event("task.created", next.NodeID, next)
	return nil
}

// outcome decides a signer group from its tally: "" (undecided), approved or rejected.
func outcome(mode string, ratio float64, g model.SignTally) model.Outcome {
	const eps = 1e-9
	switch mode {
	case model.SignOr:
		if g.Approved > 0 {
			return model.OutcomeApproved
		}
		if g.Rejected > 0 || g.Total == 0 {
			return model.OutcomeRejected
		}
	case model.SignVote:
		if g.Total == 0 {
			return model.OutcomeRejected
		}
		if float64(g.Approved)/float64(g.Total) >= ratio-eps {
			return model.OutcomeApproved
		}
		if float64(g.Total-g.Rejected)/float64(g.Total) < ratio-eps {
			return model.OutcomeRejected
		}
	default: // all, sequential
		if g.Rejected > 0 {
			return model.OutcomeRejected
		}
		if g.Approved >= g.Total {
			return model.OutcomeApproved
		}
	}
	return model.OutcomeUndecided
}

// transfer hands a pending task to another user (转签).
func (s *step) transfer(t *model.Task, to, comment, by string) (*model.Task, error) {
	if to == t.Assignee {
		return nil, model.CodedError(model.EUNPROCESSABLE, "same_assignee", "the task is already assigned to %q", to)
	}
	if err := s.checkNewSigner(t, to); err != nil {
		return nil, err
	}
	if err := s.moveTask(t, model.MoveTransfer, comment); err != nil {
		return nil, err
	}
	if by != t.Assignee {
		t.DecidedBy = by
	}
	n := s.c.Def.Node(t.NodeID)
	nt, err := s.newTask(n, s.node(t.NodeID), to, model.MoveOpen, t.Kind, t.Group, t.Position, t.ParentID)
	if err != nil {
		return nil, err
	}
	nt.AfterSigners = t.AfterSigners
	s.history("task.transferred", t.NodeID, t.ID, comment, map[string]any{"from": t.Assignee, "to": to, "new_task_id": nt.ID})
	return nt, nil
}

// checkNewSigner checks a user a task is handed to (transfer) or who is added to sign beside it (add-sign): the
// one place that decides who may newly sign in a node. Nobody signs twice in one node. The definition's approval
// rules belong here as well: with options.self_approval other than "allow" (approval-rules issue), handing the
// task to the initiator is 422 self_approval.
func (s *step) checkNewSigner(t *model.Task, u string) error {
	if len(s.openTasks(t.NodeInstanceID, func(x *model.Task) bool { return x.Assignee == u })) > 0 || slices.Contains(t.AfterSigners, u) {
		return model.CodedError(model.EUNPROCESSABLE, "already_signer", "%q already signs in this node", u)
	}
	return nil
}

// Add-sign positions.
const (
	signBefore   = "before"
	signAfter    = "after"
	signParallel = "parallel"
)

// addSign adds signers to a pending task (加签).
func (s *step) addSign(t *model.Task, users []string, position, comment string) ([]*model.Task, error) {
	ns := s.node(t.NodeID)
	n := s.c.Def.Node(t.NodeID)
	for _, u := range users {
		if u == t.Assignee {
			return nil, model.CodedError(model.EUNPROCESSABLE, "already_signer", "%q already signs in this node", u)
		}
		if err := s.checkNewSigner(t, u); err != nil {
			return nil, err
		}
	}
	var created []*model.Task
	switch position {
	case signBefore:
		if t.Kind != model.TaskKindApproval {
			return nil, model.CodedError(model.EUNPROCESSABLE, "invalid_position", "add-sign before is only possible on a signer's own task")
		}
		if err := s.moveTask(t, model.MoveHold, ""); err != nil {
			return nil, err
		}
		for _, u := range users {
			nt, err := s.newTask(n, ns, u, model.MoveOpen, model.TaskKindSignBefore, t.Group, t.Position, t.ID)
			if err != nil {
				return nil, err
			}
			created = append(created, nt)
		}
	case signAfter:
		if t.Kind != model.TaskKindApproval {
			return nil, model.CodedError(model.EUNPROCESSABLE, "invalid_position", "add-sign after is only possible on a signer's own task")
		}
		t.AfterSigners = append(t.AfterSigners, users...)
		s.changed(t)
	case signParallel:
		if t.Kind != model.TaskKindApproval {
			return nil, model.CodedError(model.EUNPROCESSABLE, "invalid_position", "add-sign parallel is only possible on a signer's own task")
		}
		mode := s.groupMode(n)
		last := 0
		for _, x := range s.w.Tasks {
			if x.NodeInstanceID == t.NodeInstanceID && x.Group == t.Group && x.Position > last {
				last = x.Position
			}
		}
		for i, u := range users {
			m := model.MoveOpen
			if mode == model.SignSequential {
				m = model.MoveQueue
			}
			nt, err := s.newTask(n, ns, u, m, model.TaskKindApproval, t.Group, last+1+i, "")
			if err != nil {
				return nil, err
			}
			created = append(created, nt)
		}
		ns.Groups[t.Group].Total += len(users)
	default:
		return nil, model.CodedError(model.EINVALID, "invalid_position", "position must be before, after or parallel")
	}
	s.history("task.add_sign", t.NodeID, t.ID, comment, map[string]any{"users": users, "position": position})
	return created, nil
}
