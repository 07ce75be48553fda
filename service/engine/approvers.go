package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/model"
)

// Who may be given a task: approvers resolved from the definition, the context or a relation are dropped when
// they are no user or a disabled one, each with a history note (API.md "Semantics changes"); nobody left is the
// node error no_approver.

// Why an approver was dropped.
const (
	dropUnknown  = "unknown_user"
	dropDisabled = "disabled"
)

// userState is what the directory said about a name: it is a user, and whether that user is disabled.
type userState struct {
	exists, disabled bool
	at               time.Time
}

// userCache remembers user states for a short while (wall clock), so that an approval node's activation does not
// need a directory read — and so a second run of its step — each time.
type userCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[string]userState
}

func newUserCache(ttl time.Duration) *userCache {
	if ttl == 0 {
		ttl = 5 * time.Second
	}
	return &userCache{ttl: ttl, m: map[string]userState{}}
}

func (c *userCache) get(tenant, name string) (userState, bool) {
	if c.ttl < 0 {
		return userState{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, ok := c.m[tenant+"\x00"+name]
	if !ok || time.Since(st.at) > c.ttl {
		return userState{}, false
	}
	return st, true
}

func (c *userCache) put(tenant string, names []string, states map[string]bool) {
	if c.ttl < 0 {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) > 100000 {
		clear(c.m) // bounded memory; forgetting only costs a read
	}
	for _, n := range names {
		d, ok := states[n]
		c.m[tenant+"\x00"+n] = userState{exists: ok, disabled: d, at: now}
	}
}

// presentUsers keeps the users who exist and are enabled, in order, and notes each one dropped in the history
// of node (as approver.dropped with the user and the reason).
func (s *step) presentUsers(node string, users []string) ([]string, error) {
	tenant := s.inst.TenantID
	states := make(map[string]userState, len(users))
	var missing []string
	for _, u := range users {
		if st, ok := s.e.users.get(tenant, u); ok {
			states[u] = st
		} else {
			missing = append(missing, u)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		missing = slices.Compact(missing)
		v, err := s.read("users\x00"+strings.Join(missing, "\x00"), func(ctx context.Context) (any, error) {
			m, err := s.e.dir.UserStates(ctx, tenant, missing)
			if err == nil {
				s.e.users.put(tenant, missing, m)
			}
			return m, err
		})
		if err != nil {
			return nil, err
		}
		m, _ := v.(map[string]bool)
		for _, u := range missing {
			d, ok := m[u]
			states[u] = userState{exists: ok, disabled: d}
		}
	}
	out := make([]string, 0, len(users))
	for _, u := range users {
		st := states[u]
		switch {
		case !st.exists:
			s.history("approver.dropped", node, "", "", map[string]any{"user": u, "reason": dropUnknown})
		case st.disabled:
			s.history("approver.dropped", node, "", "", map[string]any{"user": u, "reason": dropDisabled})
		default:
			out = append(out, u)
		}
	}
	return out, nil
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

// resolveGroups returns the signer groups of an approval node (one group unless it uses parallel sign).
func (s *step) resolveGroups(n *model.Node) ([][]string, error) {
	a := n.Approvers
	var groups [][]string
	switch {
	case len(a.Groups) > 0:
		for _, g := range a.Groups {
			groups = append(groups, dedupe(g))
		}
	case a.GroupsContext != "":
		v := s.contextValue(a.GroupsContext)
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
		users, err := s.resolveUsers(a)
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
func (s *step) resolveUsers(a model.Approvers) ([]string, error) {
	users := append([]string{}, a.Users...)
	for _, role := range a.Roles {
		us, err := s.usersWithRole(role)
		if err != nil {
			return nil, err
		}
		users = append(users, us...)
	}
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
	switch a.Relation {
	case "":
	case model.RelationInitiatorManager, model.RelationInitiatorDepartmentLeader:
		u, err := s.getUser(s.inst.Initiator)
		if errors.Is(err, errNeedRead) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("relation %s: the initiator %q is not a user", a.Relation, s.inst.Initiator)
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
		d, err := s.getDepartment(u.Department)
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
func (s *step) usersWithRole(role string) ([]string, error) {
	tenant := s.inst.TenantID
	v, err := s.read("role\x00"+role, func(ctx context.Context) (any, error) { return s.e.dir.UsersWithRole(ctx, tenant, role) })
	us, _ := v.([]string)
	return us, err
}

func (s *step) getUser(name string) (*model.User, error) {
	tenant := s.inst.TenantID
	v, err := s.read("user\x00"+name, func(ctx context.Context) (any, error) { return s.e.dir.GetUser(ctx, tenant, name) })
	u, _ := v.(*model.User)
	if err == nil && u == nil {
		err = model.Errorf(model.ENOTFOUND, "user %q not found", name)
	}
	return u, err
}

func (s *step) getDepartment(name string) (*model.Department, error) {
	tenant := s.inst.TenantID
	v, err := s.read("department\x00"+name, func(ctx context.Context) (any, error) { return s.e.dir.GetDepartment(ctx, tenant, name) })
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

// copyTo writes CC records for a node's cc people (抄送).
func (s *step) copyTo(n *model.Node, ns *model.NodeVisit) error {
	users, err := s.resolveUsers(n.CC)
	if err != nil {
		// A cc list that resolves to nobody must not stop the flow; it is recorded.
		s.history("cc.unresolved", n.ID, "", err.Error(), nil)
		return nil
	}
	for _, u := range users {
		s.w.CC = append(s.w.CC, &model.CCRecord{ID: s.nextID("c"), TenantID: s.inst.TenantID, InstanceID: s.inst.ID, NodeID: n.ID, Username: u, CreatedAt: s.now})
	}
	s.history("cc.sent", n.ID, "", "", map[string]any{"users": users})
	s.event("cc.created", n.ID, nil, map[string]any{"users": users, "node_name": n.Label()})
	return nil
}
