package rules

import (
	"slices"
	"time"

	"github.com/halley-bpm/halley/model"
)

// Reads of the directory and the delegations. Answering from memory only (inside the engine's transaction),
// every read that the caches cannot answer is errMiss.

// Why an approver was dropped (approver.dropped data.reason).
const (
	dropUnknown  = "unknown_user"
	dropDisabled = "disabled"
)

// user returns a user, nil when there is no such user.
func (x *resolver) user(name string) (*model.User, error) {
	if x.cachedOnly {
		return nil, errMiss
	}
	u, err := x.r.dir.GetUser(x.ctx, x.q.Tenant, name)
	if model.IsKind(err, model.ENOTFOUND) {
		return nil, nil
	}
	return u, err
}

// department returns a department, nil when there is none.
func (x *resolver) department(name string) (*model.Department, error) {
	if x.cachedOnly {
		return nil, errMiss
	}
	d, err := x.r.dir.GetDepartment(x.ctx, x.q.Tenant, name)
	if model.IsKind(err, model.ENOTFOUND) {
		return nil, nil
	}
	return d, err
}

func (x *resolver) holders(role string) ([]string, error) {
	if x.cachedOnly {
		return nil, errMiss
	}
	return x.r.dir.UsersWithRole(x.ctx, x.q.Tenant, role)
}

func (x *resolver) members(dept string) ([]string, error) {
	if x.cachedOnly {
		return nil, errMiss
	}
	return x.r.dir.DepartmentMembers(x.ctx, x.q.Tenant, dept)
}

// states answers whether each name is a user and whether it is disabled, from the cache while it is fresh.
func (x *resolver) states(names []string) (map[string]userState, error) {
	r := x.r
	tenant := x.q.Tenant
	out := make(map[string]userState, len(names))
	var missing []string
	now := time.Now()
	r.mu.Lock()
	for _, n := range names {
		if st, ok := r.users[tenant+"\x00"+n]; ok && r.ttl > 0 && now.Sub(st.at) <= r.ttl {
			out[n] = st
		} else {
			missing = append(missing, n)
		}
	}
	r.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	if x.cachedOnly {
		return nil, errMiss
	}
	slices.Sort(missing)
	missing = slices.Compact(missing)
	m, err := r.dir.UserStates(x.ctx, tenant, missing)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.users) > 100000 {
		clear(r.users) // bounded memory; forgetting only costs a read
	}
	for _, n := range missing {
		d, ok := m[n]
		st := userState{exists: ok, disabled: d, at: now}
		out[n] = st
		if r.ttl > 0 {
			r.users[tenant+"\x00"+n] = st
		}
	}
	return out, nil
}

// present keeps the names that are enabled users, in order, and notes each one dropped (approver.dropped with
// the user and the reason).
func (x *resolver) present(names []string) ([]string, error) {
	st, err := x.states(names)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(names))
	for _, u := range names {
		s := st[u]
		switch {
		case !s.exists:
			x.dropped = append(x.dropped, u)
			x.note("approver.dropped", map[string]any{"user": u, "reason": dropUnknown})
		case s.disabled:
			x.dropped = append(x.dropped, u)
			x.note("approver.dropped", map[string]any{"user": u, "reason": dropDisabled})
		default:
			out = append(out, u)
		}
	}
	return out, nil
}

// usable reports whether name is an enabled user.
func (x *resolver) usable(name string) (bool, error) {
	st, err := x.states([]string{name})
	if err != nil {
		return false, err
	}
	s := st[name]
	return s.exists && !s.disabled, nil
}

// delegation returns the delegation of user in force at the question's time for its template, or nil. A
// delegate's own delegation is not followed (delegations never chain).
func (x *resolver) delegation(user string) (*model.Delegation, error) {
	list, err := x.delegations()
	if err != nil {
		return nil, err
	}
	for _, d := range list {
		if d.From == user && d.ActiveAt(x.q.At, x.q.Template) {
			return d, nil
		}
	}
	return nil, nil
}

// delegations are the tenant's delegations that end after a day before the question's time, from the cache
// while it is fresh (and was loaded for as early a time).
func (x *resolver) delegations() ([]*model.Delegation, error) {
	r := x.r
	now := time.Now()
	horizon := x.q.At.Add(-24 * time.Hour)
	r.mu.Lock()
	c, ok := r.tenants[x.q.Tenant]
	r.mu.Unlock()
	if ok && r.ttl > 0 && now.Sub(c.at) <= r.ttl && !horizon.Before(c.horizon) {
		return c.list, nil
	}
	if x.cachedOnly {
		return nil, errMiss
	}
	list, err := r.dels.ListDelegations(x.ctx, x.q.Tenant, "", horizon)
	if err != nil {
		return nil, err
	}
	if r.ttl > 0 {
		r.mu.Lock()
		r.tenants[x.q.Tenant] = tenantDelegations{list: list, at: now, horizon: horizon}
		r.mu.Unlock()
	}
	return list, nil
}

// forget drops the cached delegations of a tenant (after a change on this replica).
func (r *Service) forget(tenant string) {
	r.mu.Lock()
	delete(r.tenants, tenant)
	r.mu.Unlock()
}
