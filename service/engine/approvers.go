package engine

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

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
