package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/model"
)

// startApproval resolves the approvers of an approval node and opens its tasks.
func (r *run) startApproval(n *model.Node, ns *model.NodeVisit) error {
	groups, err := r.resolveGroups(n)
	if errors.Is(err, errNeedRead) {
		return err
	}
	if err != nil {
		return r.nodeError(n.ID, model.NodeErrNoApprover, err.Error())
	}
	// Approvers who are no user, or a disabled one, are dropped (each noted in the history).
	for g, users := range groups {
		kept, err := r.presentUsers(n.ID, users)
		if err != nil {
			return err
		}
		if len(kept) == 0 {
			what := "approver"
			if len(groups) > 1 {
				what = fmt.Sprintf("approver of signer group %d", g+1)
			}
			return r.nodeFailure(&model.NodeFailure{Code: model.NodeErrNoApprover, NodeID: n.ID,
				Message: fmt.Sprintf("no %s of node %q exists and is enabled (dropped: %s)", what, n.ID, strings.Join(users, ", ")),
				Data:    mustJSON(map[string]any{"dropped": users})})
		}
		groups[g] = kept
	}
	mode := r.groupMode(n)
	ns.Groups = make([]model.SignTally, len(groups))
	for g, users := range groups {
		ns.Groups[g].Total = len(users)
		for pos, u := range users {
			m := model.MoveOpen
			if mode == model.SignSequential && pos > 0 {
				m = model.MoveQueue // not yet their turn
			}
			if _, err := r.newTask(n, ns, u, m, model.TaskKindApproval, g, pos, ""); err != nil {
				return err
			}
		}
	}
	if n.Timeout > 0 {
		r.armTimer(ns, model.TimerApprovalTimeout, r.now.Add(n.Timeout.Std()), nil)
	}
	return nil
}

// groupMode is how each signer group decides: group_sign with parallel sign, else sign.
func (r *run) groupMode(n *model.Node) string {
	if n.Approvers.HasGroups() {
		return n.GroupSignMode()
	}
	return n.SignMode()
}

// newTask creates a task of a node visit by a move from model.TaskNone: open (pending) or queue (waiting).
func (r *run) newTask(n *model.Node, ns *model.NodeVisit, assignee string, m model.Move, kind string, group, pos int, parent string) (*model.Task, error) {
	status, err := r.newTaskStatus(m, n.ID)
	if err != nil {
		return nil, err
	}
	t := &model.Task{ID: r.nextID("t"), TenantID: r.inst.TenantID, InstanceID: r.inst.ID, NodeID: n.ID, NodeName: n.Label(),
		NodeInstanceID: ns.NodeInstanceID, Assignee: assignee, Status: status, Kind: kind, Group: group, Position: pos, ParentID: parent,
		CreatedAt: r.now, Title: r.inst.Title, Template: r.inst.Template, Initiator: r.inst.Initiator}
	r.w.NewTasks = append(r.w.NewTasks, t)
	r.w.Tasks = append(r.w.Tasks, t)
	r.history("task.created", n.ID, t.ID, "", map[string]any{"assignee": assignee, "status": status, "kind": kind})
	if status == model.TaskPending {
		r.event("task.created", n.ID, t)
	}
	return t, nil
}

// resolveGroups returns the signer groups of an approval node (one group unless it uses parallel sign).
func (r *run) resolveGroups(n *model.Node) ([][]string, error) {
	a := n.Approvers
	var groups [][]string
	switch {
	case len(a.Groups) > 0:
		for _, g := range a.Groups {
			groups = append(groups, dedupe(g))
		}
	case a.GroupsContext != "":
		v := r.contextValue(a.GroupsContext)
		if !v.IsArray() {
			return nil, fmt.Errorf("groups_context %q does not name an array of groups in the context", a.GroupsContext)
		}
		for _, g := range v.Array() {
			users, err := usersOf(g)
			if err != nil {
				return nil, fmt.Errorf("groups_context %q: %v", a.GroupsContext, err)
			}
			groups = append(groups, dedupe(users))
		}
	default:
		users, err := r.resolveUsers(a)
		if err != nil {
			return nil, err
		}
		groups = [][]string{users}
	}
	for i, g := range groups {
		if len(g) == 0 {
			return nil, fmt.Errorf("signer group %d of node %q is empty", i+1, n.ID)
		}
	}
	if len(groups) == 0 {
		return nil, fmt.Errorf("no approver could be resolved for node %q", n.ID)
	}
	return groups, nil
}

// resolveUsers resolves users, roles, a context path and a relation to a list of usernames, in that order,
// without duplicates.
func (r *run) resolveUsers(a model.Approvers) ([]string, error) {
	users := append([]string{}, a.Users...)
	for _, role := range a.Roles {
		us, err := r.usersWithRole(role)
		if err != nil {
			return nil, err
		}
		users = append(users, us...)
	}
	if a.Context != "" {
		v := r.contextValue(a.Context)
		if !v.Exists() {
			return nil, fmt.Errorf("approvers context path %q is not in the instance context", a.Context)
		}
		us, err := usersOf(v)
		if err != nil {
			return nil, fmt.Errorf("approvers context path %q: %v", a.Context, err)
		}
		users = append(users, us...)
	}
	switch a.Relation {
	case "":
	case model.RelationInitiatorManager, model.RelationInitiatorDepartmentLeader:
		u, err := r.getUser(r.inst.Initiator)
		if errors.Is(err, errNeedRead) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("relation %s: the initiator %q is not a user", a.Relation, r.inst.Initiator)
		}
		if a.Relation == model.RelationInitiatorManager {
			if u.Manager == "" {
				return nil, fmt.Errorf("relation %s: %q has no manager", a.Relation, u.Username)
			}
			users = append(users, u.Manager)
			break
		}
		if u.Department == "" {
			return nil, fmt.Errorf("relation %s: %q has no department", a.Relation, u.Username)
		}
		d, err := r.getDepartment(u.Department)
		if errors.Is(err, errNeedRead) {
			return nil, err
		}
		if err != nil || d.Leader == "" {
			return nil, fmt.Errorf("relation %s: department %q has no leader", a.Relation, u.Department)
		}
		users = append(users, d.Leader)
	default:
		return nil, fmt.Errorf("unknown relation %q", a.Relation)
	}
	users = dedupe(users)
	if len(users) == 0 {
		// Say what was tried: "roles are all empty" would be wrong when a role simply has no holder.
		var tried []string
		if len(a.Roles) > 0 {
			tried = append(tried, fmt.Sprintf("roles %s have no users", strings.Join(a.Roles, ", ")))
		}
		if a.Context != "" {
			tried = append(tried, fmt.Sprintf("context path %q names nobody", a.Context))
		}
		if len(tried) == 0 {
			tried = append(tried, "users, roles, context and relation are all empty")
		}
		return nil, fmt.Errorf("no approver could be resolved: %s", strings.Join(tried, "; "))
	}
	return users, nil
}

// usersWithRole, getUser and getDepartment ask the directory through r.read: never inside the transaction.
func (r *run) usersWithRole(role string) ([]string, error) {
	tenant := r.inst.TenantID
	v, err := r.read("role\x00"+role, func(ctx context.Context) (any, error) { return r.e.dir.UsersWithRole(ctx, tenant, role) })
	us, _ := v.([]string)
	return us, err
}

func (r *run) getUser(name string) (*model.User, error) {
	tenant := r.inst.TenantID
	v, err := r.read("user\x00"+name, func(ctx context.Context) (any, error) { return r.e.dir.GetUser(ctx, tenant, name) })
	u, _ := v.(*model.User)
	if err == nil && u == nil {
		err = model.Errorf(model.ENOTFOUND, "user %q not found", name)
	}
	return u, err
}

func (r *run) getDepartment(name string) (*model.Department, error) {
	tenant := r.inst.TenantID
	v, err := r.read("department\x00"+name, func(ctx context.Context) (any, error) { return r.e.dir.GetDepartment(ctx, tenant, name) })
	d, _ := v.(*model.Department)
	if err == nil && d == nil {
		err = model.Errorf(model.ENOTFOUND, "department %q not found", name)
	}
	return d, err
}

func usersOf(v gjson.Result) ([]string, error) {
	switch {
	case v.Type == gjson.String && v.Str != "":
		return []string{v.Str}, nil
	case v.IsArray():
		var out []string
		for _, x := range v.Array() {
			if x.Type != gjson.String || x.Str == "" {
				return nil, fmt.Errorf("expected usernames, found %s", x.Raw)
			}
			out = append(out, x.Str)
		}
		return out, nil
	}
	return nil, fmt.Errorf("expected a username or a list of usernames, found %s", v.Raw)
}

func dedupe(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		s = strings.TrimSpace(s)
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// task returns an open task of the instance by id, or nil.
func (r *run) task(id string) *model.Task {
	for _, t := range r.w.Tasks {
		if t.ID == id {
			return t
		}
	}
	return nil
}

func (r *run) changed(t *model.Task) { r.w.ChangedTasks[t.ID] = t }

// openTasks returns the open tasks of a node visit matching pred (nil = all).
func (r *run) openTasks(nodeInstanceID string, pred func(*model.Task) bool) []*model.Task {
	var out []*model.Task
	for _, t := range r.w.Tasks {
		if t.NodeInstanceID == nodeInstanceID && t.Open() && (pred == nil || pred(t)) {
			out = append(out, t)
		}
	}
	return out
}

// cancelNodeTasks cancels the open tasks of a node visit.
func (r *run) cancelNodeTasks(nodeInstanceID, reason string) error {
	return r.cancelTasks(r.openTasks(nodeInstanceID, nil), reason)
}

// cancelAllTasks cancels every open task of the instance.
func (r *run) cancelAllTasks(reason string) error {
	return r.cancelOpen(func(*model.Task) bool { return true }, reason)
}

// cancelOpen cancels the open tasks of the instance matching pred.
func (r *run) cancelOpen(pred func(*model.Task) bool, reason string) error {
	var ts []*model.Task
	for _, t := range r.w.Tasks {
		if t.Open() && pred(t) {
			ts = append(ts, t)
		}
	}
	return r.cancelTasks(ts, reason)
}

func (r *run) cancelTasks(ts []*model.Task, reason string) error {
	for _, t := range ts {
		if err := r.moveTask(t, model.MoveCancel, reason); err != nil {
			return err
		}
	}
	return nil
}

// Decision is what a signer decides.
type Decision struct {
	Approve bool
	Comment string
	Data    []byte
	// By is who acted; it differs from the assignee when an admin decides for them.
	By string
}

// decide applies a signer's decision to a pending task and advances the instance.
func (r *run) decide(t *model.Task, d Decision) error {
	ns := r.node(t.NodeID)
	if ns == nil || ns.NodeInstanceID != t.NodeInstanceID || !ns.Active() {
		return model.CodedError(model.ECONFLICT, "task_not_open", "task %s belongs to a node visit that is over", t.ID)
	}
	if d.Approve && len(d.Data) > 0 {
		if err := r.applyDecisionData(t, d.Data); err != nil {
			return err
		}
		t.Data = d.Data
	}
	m, action := model.MoveReject, "task.rejected"
	if d.Approve {
		m, action = model.MoveApprove, "task.approved"
	}
	if err := r.moveTask(t, m, d.Comment); err != nil {
		return err
	}
	if d.By != t.Assignee {
		t.DecidedBy = d.By
	}
	data := map[string]any{"assignee": t.Assignee}
	if t.DecidedBy != "" {
		data["on_behalf_of"] = t.Assignee
	}
	r.history(action, t.NodeID, t.ID, d.Comment, data)
	r.event("task.decided", t.NodeID, t)

	if t.Kind == model.TaskKindResubmit {
		return r.resubmitted(t, d)
	}
	switch t.Kind {
	case model.TaskKindSignBefore:
		parent := r.task(t.ParentID)
		if parent == nil {
			return nil
		}
		if !d.Approve {
			if err := r.moveTask(parent, model.MoveCancel, "rejected by an add-sign signer"); err != nil {
				return err
			}
			return r.credit(parent, false)
		}
		if len(r.openTasks(t.NodeInstanceID, func(x *model.Task) bool { return x.ParentID == parent.ID && x.Kind == model.TaskKindSignBefore })) == 0 {
			if err := r.moveTask(parent, model.MoveRelease, ""); err != nil {
				return err
			}
			r.history("task.resumed", parent.NodeID, parent.ID, "add-sign signers approved", nil)
		}
		return nil
	case model.TaskKindSignAfter:
		parent := &model.Task{ID: t.ParentID, NodeID: t.NodeID, NodeInstanceID: t.NodeInstanceID, Group: t.Group, Kind: model.TaskKindApproval}
		if !d.Approve {
			if err := r.cancelOpen(func(x *model.Task) bool { return x.ParentID == t.ParentID }, ""); err != nil {
				return err
			}
			return r.credit(parent, false)
		}
		if len(r.openTasks(t.NodeInstanceID, func(x *model.Task) bool { return x.ParentID == t.ParentID })) == 0 {
			return r.credit(parent, true)
		}
		return nil
	}
	if d.Approve && len(t.AfterSigners) > 0 {
		n := r.c.Def.Node(t.NodeID)
		for _, u := range t.AfterSigners {
			if _, err := r.newTask(n, ns, u, model.MoveOpen, model.TaskKindSignAfter, t.Group, t.Position, t.ID); err != nil {
				return err
			}
		}
		return nil
	}
	return r.credit(t, d.Approve)
}

// credit counts a signer's final decision in its group and decides the group and the node when they are decided.
func (r *run) credit(t *model.Task, approved bool) error {
	ns := r.node(t.NodeID)
	n := r.c.Def.Node(t.NodeID)
	if t.Group >= len(ns.Groups) {
		return fmt.Errorf("engine: task %s has group %d but node %s has %d", t.ID, t.Group, n.ID, len(ns.Groups))
	}
	g := &ns.Groups[t.Group]
	if approved {
		g.Approved++
	} else {
		g.Rejected++
	}
	mode := r.groupMode(n)
	g.Outcome = outcome(mode, n.PassRatio, *g)
	inGroup := func(x *model.Task) bool { return x.Group == t.Group }
	switch g.Outcome {
	case model.Undecided:
		if mode == model.SignSequential && approved {
			return r.promoteNext(ns.NodeInstanceID, t.Group)
		}
		return nil
	case model.Rejected:
		return r.reject(n.ID, "rejected")
	}
	if err := r.cancelTasks(r.openTasks(ns.NodeInstanceID, inGroup), "the signer group is decided"); err != nil {
		return err
	}
	for _, og := range ns.Groups {
		if og.Outcome != model.Approved {
			return nil
		}
	}
	return r.complete(n.ID)
}

// promoteNext makes the next waiting signer of a sequential group pending.
func (r *run) promoteNext(nodeInstanceID string, group int) error {
	var next *model.Task
	for _, x := range r.openTasks(nodeInstanceID, func(x *model.Task) bool {
		return x.Group == group && x.Status == model.TaskWaiting && x.Kind == model.TaskKindApproval
	}) {
		if next == nil || x.Position < next.Position {
			next = x
		}
	}
	if next == nil {
		return nil
	}
	if err := r.moveTask(next, model.MoveRelease, ""); err != nil {
		return err
	}
	r.history("task.pending", next.NodeID, next.ID, "", map[string]any{"assignee": next.Assignee})
	r.event("task.created", next.NodeID, next)
	return nil
}

// outcome decides a signer group from its tally: "" (undecided), approved or rejected.
func outcome(mode string, ratio float64, g model.SignTally) model.Outcome {
	const eps = 1e-9
	switch mode {
	case model.SignOr:
		if g.Approved > 0 {
			return model.Approved
		}
		if g.Rejected > 0 || g.Total == 0 {
			return model.Rejected
		}
	case model.SignVote:
		if g.Total == 0 {
			return model.Rejected
		}
		if float64(g.Approved)/float64(g.Total) >= ratio-eps {
			return model.Approved
		}
		if float64(g.Total-g.Rejected)/float64(g.Total) < ratio-eps {
			return model.Rejected
		}
	default: // all, sequential
		if g.Rejected > 0 {
			return model.Rejected
		}
		if g.Approved >= g.Total {
			return model.Approved
		}
	}
	return model.Undecided
}

// transfer hands a pending task to another user (转签).
func (r *run) transfer(t *model.Task, to, comment, by string) (*model.Task, error) {
	if to == t.Assignee {
		return nil, model.CodedError(model.EUNPROCESSABLE, "same_assignee", "the task is already assigned to %q", to)
	}
	if err := r.checkNewSigner(t, to); err != nil {
		return nil, err
	}
	if err := r.moveTask(t, model.MoveTransfer, comment); err != nil {
		return nil, err
	}
	if by != t.Assignee {
		t.DecidedBy = by
	}
	n := r.c.Def.Node(t.NodeID)
	nt, err := r.newTask(n, r.node(t.NodeID), to, model.MoveOpen, t.Kind, t.Group, t.Position, t.ParentID)
	if err != nil {
		return nil, err
	}
	nt.AfterSigners = t.AfterSigners
	r.history("task.transferred", t.NodeID, t.ID, comment, map[string]any{"from": t.Assignee, "to": to, "new_task_id": nt.ID})
	return nt, nil
}

// checkNewSigner checks a user a task is handed to (transfer) or who is added to sign beside it (add-sign): the
// one place that decides who may newly sign in a node. Nobody signs twice in one node. The definition's approval
// rules belong here as well: with options.self_approval other than "allow" (approval-rules issue), handing the
// task to the initiator is 422 self_approval.
func (r *run) checkNewSigner(t *model.Task, u string) error {
	if len(r.openTasks(t.NodeInstanceID, func(x *model.Task) bool { return x.Assignee == u })) > 0 || slices.Contains(t.AfterSigners, u) {
		return model.CodedError(model.EUNPROCESSABLE, "already_signer", "%q already signs in this node", u)
	}
	return nil
}

// Add-sign positions.
const (
	SignBefore   = "before"
	SignAfter    = "after"
	SignParallel = "parallel"
)

// addSign adds signers to a pending task (加签).
func (r *run) addSign(t *model.Task, users []string, position, comment string) ([]*model.Task, error) {
	ns := r.node(t.NodeID)
	n := r.c.Def.Node(t.NodeID)
	for _, u := range users {
		if u == t.Assignee {
			return nil, model.CodedError(model.EUNPROCESSABLE, "already_signer", "%q already signs in this node", u)
		}
		if err := r.checkNewSigner(t, u); err != nil {
			return nil, err
		}
	}
	var created []*model.Task
	switch position {
	case SignBefore:
		if t.Kind != model.TaskKindApproval {
			return nil, model.CodedError(model.EUNPROCESSABLE, "invalid_position", "add-sign before is only possible on a signer's own task")
		}
		if err := r.moveTask(t, model.MoveHold, ""); err != nil {
			return nil, err
		}
		for _, u := range users {
			nt, err := r.newTask(n, ns, u, model.MoveOpen, model.TaskKindSignBefore, t.Group, t.Position, t.ID)
			if err != nil {
				return nil, err
			}
			created = append(created, nt)
		}
	case SignAfter:
		if t.Kind != model.TaskKindApproval {
			return nil, model.CodedError(model.EUNPROCESSABLE, "invalid_position", "add-sign after is only possible on a signer's own task")
		}
		t.AfterSigners = append(t.AfterSigners, users...)
		r.changed(t)
	case SignParallel:
		if t.Kind != model.TaskKindApproval {
			return nil, model.CodedError(model.EUNPROCESSABLE, "invalid_position", "add-sign parallel is only possible on a signer's own task")
		}
		mode := r.groupMode(n)
		last := 0
		for _, x := range r.w.Tasks {
			if x.NodeInstanceID == t.NodeInstanceID && x.Group == t.Group && x.Position > last {
				last = x.Position
			}
		}
		for i, u := range users {
			m := model.MoveOpen
			if mode == model.SignSequential {
				m = model.MoveQueue
			}
			nt, err := r.newTask(n, ns, u, m, model.TaskKindApproval, t.Group, last+1+i, "")
			if err != nil {
				return nil, err
			}
			created = append(created, nt)
		}
		ns.Groups[t.Group].Total += len(users)
	default:
		return nil, model.CodedError(model.EINVALID, "invalid_position", "position must be before, after or parallel")
	}
	r.history("task.add_sign", t.NodeID, t.ID, comment, map[string]any{"users": users, "position": position})
	return created, nil
}
