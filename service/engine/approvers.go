package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/model"
)

// Who decides an approval node is the Rules' answer (service/rules: manager chains, roles seen from the
// initiator, departments, delegation, self approval, dedupe, on_no_approver); the engine knows nothing of
// managers, departments or delegations. It resolves what only the instance knows (context paths, inline groups,
// who approved before) into the question, asks it when the node activates, and records the answer in the step:
// tasks, automatic decisions with their reason, and the notes of approvers dropped.

// Rules answers who works on an approval node (or who is copied, for cc).
type Rules interface {
	// Assign answers q. With cachedOnly (inside the instance's transaction) it answers only from memory and
	// says ok=false when it would have to read; the engine then asks again outside the transaction. An error is
	// a failure of a read (the step fails), never "nobody": that is Assignment.NoApprover.
	Assign(ctx context.Context, q AssignQuery, cachedOnly bool) (a *Assignment, ok bool, err error)
}

// AssignQuery is what the engine asks of the Rules about one approval node (or one node's cc).
type AssignQuery struct {
	Tenant    string `json:"tenant"`
	Template  string `json:"template"`
	Initiator string `json:"initiator"`
	Node      string `json:"node"`
	// Approvers are the node's approvers (or cc): roles, scope, departments and relation are the Rules' to
	// resolve; users and context paths are already in Users, groups in Groups.
	Approvers model.Approvers `json:"approvers"`
	// Users are the named users (static, then from the context), in order.
	Users []string `json:"users,omitempty"`
	// Groups are the signer groups of a parallel sign (inline or from the context); then nothing else counts.
	Groups [][]string `json:"groups,omitempty"`
	// CC: the people copied, not approvers: no delegation, no automatic decision, no on_no_approver.
	CC               bool   `json:"cc,omitempty"`
	ExcludeInitiator bool   `json:"exclude_initiator,omitempty"`
	OnNoApprover     string `json:"on_no_approver,omitempty"`
	SelfApproval     string `json:"self_approval,omitempty"`
	// Tried says which of the engine's sources named nobody (a context path holding an empty list, an empty
	// signer group), for the message when nobody is left.
	Tried []string `json:"tried,omitempty"`
	// ApprovedBefore (with a dedupe option): who approved the approval nodes that count as before this one.
	ApprovedBefore []string `json:"approved_before,omitempty"`
	// At is the step's time (delegation windows); it is not part of the question's identity.
	At time.Time `json:"-"`
}

// Assignment is the Rules' answer: the signer groups (one without parallel sign) or, when nobody is left,
// NoApprover; Notes are history items to write whatever the answer.
type Assignment struct {
	Groups     [][]Assignee `json:"groups"`
	Notes      []Note       `json:"notes,omitempty"`
	NoApprover *NoApprover  `json:"no_approver,omitempty"`
}

// Assignee is one signer.
type Assignee struct {
	User string `json:"user"`
	// DelegatedFrom: the user the task was meant for, who delegated it to User.
	DelegatedFrom string `json:"delegated_from,omitempty"`
	// InPlaceOf: with self_approval manager, the initiator whose task User decides.
	InPlaceOf string `json:"in_place_of,omitempty"`
	// Auto is why the task is approved automatically (model.AutoSelfApproval, model.AutoDedupe), "" when
	// somebody decides it.
	Auto string `json:"auto,omitempty"`
}

// Note is a history item about the resolution: Action (approver.dropped, approver.admins, ...) and its data.
type Note struct {
	Action string         `json:"action"`
	Data   map[string]any `json:"data"`
}

// NoApprover says what happens when nobody is left: Policy is model.NoApproverError, Pass or Reject (admins
// was answered with the admins as the signers, or with error when the tenant has none); Message says who was
// tried; Dropped lists the approvers dropped on the way.
type NoApprover struct {
	Policy  string   `json:"policy"`
	Message string   `json:"message"`
	Dropped []string `json:"dropped,omitempty"`
}

// assign asks the Rules, from memory inside the transaction when they can, else outside it (see reads).
func (s *step) assign(q AssignQuery) (*Assignment, error) {
	q.Tenant, q.Template, q.Initiator, q.At = s.inst.TenantID, s.inst.Template, s.inst.Initiator, s.now
	if a, ok, err := s.e.rules.Assign(s.ctx, q, true); err != nil || ok {
		return a, err
	}
	key, _ := json.Marshal(q)
	v, err := s.read("assign\x00"+string(key), func(ctx context.Context) (any, error) {
		a, _, err := s.e.rules.Assign(ctx, q, false)
		return a, err
	})
	if err != nil {
		return nil, err
	}
	a, _ := v.(*Assignment)
	if a == nil {
		return nil, fmt.Errorf("engine: the rules gave no answer for node %s", q.Node)
	}
	return a, nil
}

// assignQuery builds the question about an approval node: its context paths and groups resolved. An error is a
// context that does not name users (the node error no_approver).
func (s *step) assignQuery(n *model.Node) (AssignQuery, error) {
	a := n.Approvers
	q := AssignQuery{Node: n.ID, Approvers: a, ExcludeInitiator: n.ExcludeInitiator, OnNoApprover: n.OnNoApprover,
		SelfApproval: s.c.Def.Options.SelfApproval}
	q.Approvers.Users, q.Approvers.Context, q.Approvers.Groups, q.Approvers.GroupsContext = nil, "", nil, ""
	switch {
	case len(a.Groups) > 0:
		for _, g := range a.Groups {
			q.Groups = append(q.Groups, dedupe(g))
		}
	case a.GroupsContext != "":
		v := s.contextValue(a.GroupsContext)
		if !v.IsArray() {
			return q, fmt.Errorf("groups_context %q does not name an array of groups in the context", a.GroupsContext)
		}
		for _, g := range v.Array() {
			users, err := usersOf(g)
			if err != nil {
				return q, fmt.Errorf("groups_context %q: %v", a.GroupsContext, err)
			}
			q.Groups = append(q.Groups, dedupe(users))
		}
		for i, g := range q.Groups {
			if len(g) == 0 {
				q.Tried = append(q.Tried, fmt.Sprintf("signer group %d from groups_context %q is empty", i+1, a.GroupsContext))
			}
		}
		if len(q.Groups) == 0 {
			return q, fmt.Errorf("groups_context %q names no group", a.GroupsContext)
		}
	default:
		users, err := s.namedUsers(a)
		if err != nil {
			return q, err
		}
		q.Users = users
		if a.Context != "" && len(users) == len(dedupe(a.Users)) {
			q.Tried = append(q.Tried, fmt.Sprintf("context path %q names nobody", a.Context))
		}
	}
	q.ApprovedBefore = s.approvedBefore(n)
	return q, nil
}

// namedUsers are the static users and those of the context path, in order.
func (s *step) namedUsers(a model.Approvers) ([]string, error) {
	users := append([]string{}, a.Users...)
	if a.Context != "" {
		v := s.contextValue(a.Context)
		if !v.Exists() {
			return nil, fmt.Errorf("approvers context path %q is not in the instance context", a.Context)
		}
		us, err := usersOf(v)
		if err != nil {
			return nil, fmt.Errorf("approvers context path %q: %v", a.Context, err)
		}
		users = append(users, us...)
	}
	return dedupe(users), nil
}

// approvedBefore is who counts as having approved before node n (options.dedupe): with "consecutive" the
// approvers of the approval nodes directly upstream of n (through the non-approval nodes between them), with
// "any" the approvers of every other approval node of the instance.
func (s *step) approvedBefore(n *model.Node) []string {
	var out []string
	switch s.c.Def.Options.Dedupe {
	case model.DedupeAny:
		for _, ns := range s.sortedNodes() {
			if ns.NodeID != n.ID && ns.State == model.NodeCompleted {
				out = append(out, ns.ApprovedBy...)
			}
		}
	case model.DedupeConsecutive:
		seen := map[string]bool{n.ID: true}
		var walk func(id string)
		walk = func(id string) {
			for _, e := range s.c.Def.Incoming(id) {
				if seen[e.From] {
					continue
				}
				seen[e.From] = true
				ns, src := s.node(e.From), s.c.Def.Node(e.From)
				switch {
				case ns == nil || src == nil || ns.State != model.NodeCompleted:
				case src.Type == model.NodeApproval:
					out = append(out, ns.ApprovedBy...)
				default:
					walk(e.From)
				}
			}
		}
		walk(n.ID)
	}
	return dedupe(out)
}

// checkAssignable refuses a user who may not be given a task now (transfer, add-sign): 422 unknown_user or
// user_disabled.
func (e *Engine) checkAssignable(ctx context.Context, tenant, name string) error {
	u, err := e.dir.GetUser(ctx, tenant, name)
	switch {
	case model.IsKind(err, model.ENOTFOUND):
		return model.CodedError(model.EUNPROCESSABLE, "unknown_user", "user %q does not exist", name)
	case err != nil:
		return err
	case u.Disabled:
		return model.CodedError(model.EUNPROCESSABLE, "user_disabled", "user %q is disabled and gets no new tasks", name)
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
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

// notes writes the Rules' notes about node id into the history.
func (s *step) notes(id string, a *Assignment) {
	for _, n := range a.Notes {
		s.history(n.Action, id, "", "", n.Data)
	}
}

// copyTo writes CC records for a node's cc people (抄送).
func (s *step) copyTo(n *model.Node, ns *model.NodeVisit) error {
	q := AssignQuery{Node: n.ID, Approvers: n.CC, CC: true}
	q.Approvers.Users, q.Approvers.Context = nil, ""
	users, err := s.namedUsers(n.CC)
	if err != nil {
		// A cc list that resolves to nobody must not stop the flow; it is recorded.
		s.history("cc.unresolved", n.ID, "", err.Error(), nil)
		return nil
	}
	q.Users = users
	a, err := s.assign(q)
	if err != nil {
		return err
	}
	if a.NoApprover != nil || len(a.Groups) == 0 {
		msg := "nobody to copy"
		if a.NoApprover != nil {
			msg = a.NoApprover.Message
		}
		s.history("cc.unresolved", n.ID, "", msg, nil)
		return nil
	}
	users = users[:0]
	for _, x := range a.Groups[0] {
		users = append(users, x.User)
	}
	for _, u := range users {
		s.w.CC = append(s.w.CC, &model.CCRecord{ID: s.nextID("c"), TenantID: s.inst.TenantID, InstanceID: s.inst.ID, NodeID: n.ID, Username: u, CreatedAt: s.now})
	}
	s.history("cc.sent", n.ID, "", "", map[string]any{"users": users})
	s.event("cc.created", n.ID, nil, eventExtra{Users: users, NodeName: n.Label()})
	return nil
}
