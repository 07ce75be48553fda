// Package rules says who decides an approval node (the engine's Rules): the people named by users, roles (seen
// from the initiator with a scope), departments and relations to the initiator (manager, department leader, the
// manager chain); who is dropped (no user, disabled, the initiator with exclude_initiator); whose tasks go to a
// delegate (out of office); which signers are approved automatically and why (self approval, dedupe); and what
// happens when nobody is left (on_no_approver). It also keeps the delegations (POST/GET/DELETE /delegations).
// The engine asks it when a node activates and records the answer in its step; it knows nothing of managers,
// departments or delegations.
package rules

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/engine"
)

// Directory is what the rules read of people and departments.
type Directory interface {
	UsersWithRole(ctx context.Context, tenant, role string) ([]string, error)
	GetUser(ctx context.Context, tenant, username string) (*model.User, error)
	GetDepartment(ctx context.Context, tenant, name string) (*model.Department, error)
	DepartmentMembers(ctx context.Context, tenant, department string) ([]string, error)
	// UserStates answers, for each name that is a user, whether it is disabled; other names are left out.
	UserStates(ctx context.Context, tenant string, names []string) (map[string]bool, error)
}

// Deps are the service's collaborators; both are required.
type Deps struct {
	Directory   Directory
	Delegations model.DelegationStore
}

// Options tune the service; the zero value is the default.
type Options struct {
	Clock  clock.Clock  // default clock.Real{}; delegation windows of new delegations are checked against it
	Logger *slog.Logger // default slog.Default()
	// CacheTTL is how long the service remembers whether a user exists and is enabled, and a tenant's
	// delegations (default 5s; negative: not at all). It lets an activation that names only users be answered
	// inside the engine's transaction, without a read that runs the step twice. A change made on this replica
	// (a delegation created or deleted) applies at once; one made elsewhere, or a user disabled meanwhile, within
	// CacheTTL.
	CacheTTL time.Duration
}

// Service answers the engine's questions and keeps delegations.
type Service struct {
	dir   Directory
	dels  model.DelegationStore
	clock clock.Clock
	log   *slog.Logger
	ttl   time.Duration

	mu      sync.Mutex
	users   map[string]userState         // tenant \x00 name
	tenants map[string]tenantDelegations // tenant
}

type userState struct {
	exists, disabled bool
	at               time.Time
}

type tenantDelegations struct {
	list        []*model.Delegation
	at, horizon time.Time
}

var _ engine.Rules = (*Service)(nil)

// New returns the service, or an error naming what is missing.
func New(d Deps, opts Options) (*Service, error) {
	switch {
	case d.Directory == nil:
		return nil, errors.New("rules: Directory is required")
	case d.Delegations == nil:
		return nil, errors.New("rules: Delegations is required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = 5 * time.Second
	}
	return &Service{dir: d.Directory, dels: d.Delegations, clock: opts.Clock, log: opts.Logger, ttl: opts.CacheTTL,
		users: map[string]userState{}, tenants: map[string]tenantDelegations{}}, nil
}

// errMiss: answering from memory only, the answer needs a read.
var errMiss = errors.New("rules: not in memory")

// Assign answers who decides a node (engine.Rules).
func (r *Service) Assign(ctx context.Context, q engine.AssignQuery, cachedOnly bool) (*engine.Assignment, bool, error) {
	res := &resolver{r: r, ctx: ctx, q: q, cachedOnly: cachedOnly, a: &engine.Assignment{}, tried: slices.Clone(q.Tried)}
	err := res.run()
	switch {
	case errors.Is(err, errMiss):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	return res.a, true, nil
}

// resolver answers one question.
type resolver struct {
	r          *Service
	ctx        context.Context
	q          engine.AssignQuery
	cachedOnly bool
	a          *engine.Assignment
	tried      []string // why nobody was found, for the message
	dropped    []string
}

func (x *resolver) note(action string, data map[string]any) {
	x.a.Notes = append(x.a.Notes, engine.Note{Action: action, Data: data})
}

func (x *resolver) run() error {
	q := x.q
	groups := q.Groups
	if len(groups) == 0 {
		users, err := x.named()
		if err != nil {
			return err
		}
		groups = [][]string{users}
	}
	var out [][]engine.Assignee
	empty := 0
	for _, g := range groups {
		signers, err := x.signers(g)
		if err != nil {
			return err
		}
		if len(signers) == 0 {
			empty++
			if q.OnNoApprover == model.NoApproverPass {
				continue // an empty group passes: the others decide
			}
		}
		out = append(out, signers)
	}
	if empty == 0 {
		x.a.Groups = out
		return nil
	}
	msg := x.message(len(groups) > 1)
	if q.CC {
		x.a.NoApprover = &engine.NoApprover{Policy: model.NoApproverError, Message: msg}
		return nil
	}
	switch q.OnNoApprover {
	case model.NoApproverPass:
		if len(out) > 0 {
			x.note("approver.none", map[string]any{"reason": model.AutoNoApprover, "message": msg, "groups_passed": empty})
			x.a.Groups = out
			return nil
		}
		x.a.NoApprover = &engine.NoApprover{Policy: model.NoApproverPass, Message: msg, Dropped: x.dropped}
	case model.NoApproverReject:
		x.a.NoApprover = &engine.NoApprover{Policy: model.NoApproverReject, Message: msg, Dropped: x.dropped}
	case model.NoApproverAdmins:
		admins, err := x.admins()
		if err != nil {
			return err
		}
		if len(admins) == 0 {
			x.a.NoApprover = &engine.NoApprover{Policy: model.NoApproverError, Message: msg + "; the tenant has no enabled admin either", Dropped: x.dropped}
			return nil
		}
		x.note("approver.admins", map[string]any{"reason": model.AutoNoApprover, "message": msg, "users": admins})
		for i, g := range out {
			if len(g) == 0 {
				out[i] = nil
				for _, u := range admins {
					out[i] = append(out[i], engine.Assignee{User: u})
				}
			}
		}
		x.a.Groups = out
	default:
		x.a.NoApprover = &engine.NoApprover{Policy: model.NoApproverError, Message: msg, Dropped: x.dropped}
	}
	return nil
}

// message says why nobody is left.
func (x *resolver) message(groups bool) string {
	what := "no approver"
	if groups {
		what = "a signer group has no approver"
	}
	parts := slices.Clone(x.tried)
	if len(x.dropped) > 0 {
		parts = append(parts, fmt.Sprintf("dropped: %s", strings.Join(x.dropped, ", ")))
	}
	if len(parts) == 0 {
		parts = append(parts, "users, roles, departments, context and relation name nobody")
	}
	return fmt.Sprintf("%s of node %q could be resolved: %s", what, x.q.Node, strings.Join(parts, "; "))
}

// named resolves users, roles, departments and the relation to names, in that order, without duplicates.
func (x *resolver) named() ([]string, error) {
	a := x.q.Approvers
	users := slices.Clone(x.q.Users)
	for _, role := range a.Roles {
		us, err := x.roleHolders(role, a.Scope)
		if err != nil {
			return nil, err
		}
		if len(us) == 0 {
			x.tried = append(x.tried, fmt.Sprintf("role %s has no holder%s", role, scopeText(a.Scope)))
		}
		users = append(users, us...)
	}
	for _, d := range a.Departments {
		us, err := x.members(d)
		if err != nil {
			return nil, err
		}
		if len(us) == 0 {
			x.tried = append(x.tried, fmt.Sprintf("department %s has no member", d))
		}
		users = append(users, us...)
	}
	if a.Relation != "" {
		us, err := x.relation(a)
		if err != nil {
			return nil, err
		}
		users = append(users, us...)
	}
	return dedupe(users), nil
}

func scopeText(scope string) string {
	switch scope {
	case model.ScopeInitiatorDepartment:
		return " in the initiator's department"
	case model.ScopeInitiatorDepartmentTree:
		return " in the initiator's department or above it"
	}
	return ""
}

// relation resolves a relation to the initiator; nobody (with the reason in tried) when the data has no one.
func (x *resolver) relation(a model.Approvers) ([]string, error) {
	ini, err := x.user(x.q.Initiator)
	if err != nil {
		return nil, err
	}
	if ini == nil {
		x.tried = append(x.tried, fmt.Sprintf("relation %s: the initiator %q is not a user", a.Relation, x.q.Initiator))
		return nil, nil
	}
	switch a.Relation {
	case model.RelationInitiatorManager:
		if ini.Manager == "" {
			x.tried = append(x.tried, fmt.Sprintf("relation %s: %q has no manager", a.Relation, ini.Username))
			return nil, nil
		}
		return []string{ini.Manager}, nil
	case model.RelationInitiatorDepartmentLeader:
		if ini.Department == "" {
			x.tried = append(x.tried, fmt.Sprintf("relation %s: %q has no department", a.Relation, ini.Username))
			return nil, nil
		}
		d, err := x.department(ini.Department)
		if err != nil {
			return nil, err
		}
		if d == nil || d.Leader == "" {
			x.tried = append(x.tried, fmt.Sprintf("relation %s: department %q has no leader", a.Relation, ini.Department))
			return nil, nil
		}
		return []string{d.Leader}, nil
	case model.RelationInitiatorManagers:
		return x.chain(ini, a.Levels, a.UntilRole)
	}
	return nil, fmt.Errorf("rules: unknown relation %q", a.Relation)
}

// maxChainHops bounds a manager chain walked for until_role (levels is at most model.MaxManagerLevels).
const maxChainHops = 64

// chain is the initiator's manager chain, nearest first: levels managers, or up to and including the first
// holder of untilRole (the whole chain when nobody holds it). A loop in the manager data ends the chain.
func (x *resolver) chain(ini *model.User, levels int, untilRole string) ([]string, error) {
	var out []string
	seen := map[string]bool{ini.Username: true}
	cur := ini
	for hop := 0; hop < maxChainHops; hop++ {
		m := cur.Manager
		if m == "" {
			break
		}
		if seen[m] {
			x.note("approver.chain_loop", map[string]any{"user": cur.Username, "manager": m})
			break
		}
		seen[m] = true
		out = append(out, m)
		if levels > 0 && len(out) >= levels {
			break
		}
		next, err := x.user(m)
		if err != nil {
			return nil, err
		}
		if next == nil {
			break // the manager is no user: dropped later, and the chain ends there
		}
		if untilRole != "" && next.HasRole(untilRole) {
			break
		}
		cur = next
	}
	if len(out) == 0 {
		x.tried = append(x.tried, fmt.Sprintf("relation %s: %q has no manager", model.RelationInitiatorManagers, ini.Username))
	}
	return out, nil
}

// roleHolders are a role's holders in the scope.
func (x *resolver) roleHolders(role, scope string) ([]string, error) {
	holders, err := x.holders(role)
	if err != nil || scope == "" || scope == model.ScopeTenant || len(holders) == 0 {
		return holders, err
	}
	ini, err := x.user(x.q.Initiator)
	if err != nil || ini == nil || ini.Department == "" {
		return nil, err
	}
	seen := map[string]bool{}
	for dept := ini.Department; dept != "" && !seen[dept]; {
		seen[dept] = true
		members, err := x.members(dept)
		if err != nil {
			return nil, err
		}
		var in []string
		for _, h := range holders {
			if slices.Contains(members, h) {
				in = append(in, h)
			}
		}
		if len(in) > 0 || scope == model.ScopeInitiatorDepartment {
			return in, nil
		}
		d, err := x.department(dept)
		if err != nil || d == nil {
			return nil, err
		}
		dept = d.Parent
	}
	return nil, nil
}

// signers turns one group's names into signers: the names that are no user or a disabled one are dropped, the
// initiator with exclude_initiator too; delegations, self approval and dedupe apply.
func (x *resolver) signers(names []string) ([]engine.Assignee, error) {
	q := x.q
	present, err := x.present(names)
	if err != nil {
		return nil, err
	}
	var out []engine.Assignee
	add := func(a engine.Assignee) {
		for _, o := range out {
			if o.User == a.User {
				return
			}
		}
		out = append(out, a)
	}
	for _, u := range present {
		if q.CC {
			add(engine.Assignee{User: u})
			continue
		}
		if q.ExcludeInitiator && u == q.Initiator {
			x.note("approver.excluded", map[string]any{"user": u, "reason": "exclude_initiator"})
			x.tried = append(x.tried, fmt.Sprintf("the initiator %s is excluded", u))
			continue
		}
		a := engine.Assignee{User: u}
		d, err := x.delegation(u)
		if err != nil {
			return nil, err
		}
		if d != nil {
			ok, err := x.usable(d.To)
			if err != nil {
				return nil, err
			}
			switch {
			case !ok:
				x.note("delegation.skipped", map[string]any{"user": u, "to": d.To, "reason": "the delegate is no enabled user"})
			case q.ExcludeInitiator && d.To == q.Initiator:
				x.note("delegation.skipped", map[string]any{"user": u, "to": d.To, "reason": "exclude_initiator"})
			default:
				a.User, a.DelegatedFrom = d.To, u
			}
		}
		if a.User == q.Initiator {
			switch q.SelfApproval {
			case model.SelfApprovalPass:
				a.Auto = model.AutoSelfApproval
			case model.SelfApprovalManager:
				m, err := x.managerOf(q.Initiator)
				if err != nil {
					return nil, err
				}
				if m == "" {
					// Nobody above them: they still may not decide their own request. They are no approver here;
					// the others decide, or on_no_approver says what happens when nobody is left.
					x.note("approver.self", map[string]any{"user": a.User, "reason": "the initiator has no enabled manager to decide in their place"})
					x.tried = append(x.tried, fmt.Sprintf("the initiator %s has no enabled manager to decide in their place", a.User))
					continue
				}
				a.User, a.InPlaceOf = m, q.Initiator
			}
		}
		if a.Auto == "" && slices.Contains(q.ApprovedBefore, a.User) {
			a.Auto = model.AutoDedupe
		}
		add(a)
	}
	return out, nil
}

// managerOf is the initiator's manager when they are an enabled user, else "".
func (x *resolver) managerOf(name string) (string, error) {
	u, err := x.user(name)
	if err != nil || u == nil || u.Manager == "" || u.Manager == name {
		return "", err
	}
	ok, err := x.usable(u.Manager)
	if err != nil || !ok {
		return "", err
	}
	return u.Manager, nil
}

// admins are the tenant's enabled admins (without the initiator under exclude_initiator).
func (x *resolver) admins() ([]string, error) {
	holders, err := x.holders(model.RoleAdmin)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, u := range holders {
		if x.q.ExcludeInitiator && u == x.q.Initiator {
			continue
		}
		ok, err := x.usable(u)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, u)
		}
	}
	return out, nil
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
