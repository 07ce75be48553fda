package rules

import (
	"context"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/halley-bpm/halley/model"
)

// DelegationRequest is the body of POST /delegations.
type DelegationRequest struct {
	To        string    `json:"to"`
	StartsAt  time.Time `json:"starts_at"`
	EndsAt    time.Time `json:"ends_at"`
	Templates []string  `json:"templates"`
	// From: the delegator (admins only; the caller by default).
	From   string `json:"from"`
	Reason string `json:"reason"`
}

// Limits of a delegation request.
const (
	maxDelegationTemplates = 50
	maxReasonLen           = 500
	maxDelegationSpan      = 366 * 24 * time.Hour
)

// invalid is a 422 naming the field.
func invalid(code, field, format string, args ...any) error {
	return model.CodedError(model.EUNPROCESSABLE, code, format, args...).WithDetails(map[string]any{"field": field})
}

// CreateDelegation delegates the new tasks of the caller (or, for an admin, of req.From) to req.To within the
// window. 422 naming the field when to is the delegator, unknown or disabled, when the window is empty,
// inverted, over or longer than a year, or overlaps another delegation of the delegator.
func (r *Service) CreateDelegation(ctx context.Context, actor *model.Principal, req DelegationRequest) (*model.Delegation, error) {
	from := strings.TrimSpace(req.From)
	switch {
	case from == "" && actor.Token:
		return nil, invalid("invalid_from", "from", "an API token delegates for a user: name them in from")
	case from == "":
		from = actor.Username
	case from != actor.Username && !actor.IsAdmin():
		return nil, model.CodedError(model.EFORBIDDEN, "not_allowed", "only admins set a delegation for someone else")
	}
	to := strings.TrimSpace(req.To)
	switch to {
	case "":
		return nil, invalid("invalid_to", "to", "to names the user who gets the tasks")
	case from:
		return nil, invalid("delegate_self", "to", "a delegation to oneself delegates nothing")
	}
	switch {
	case req.StartsAt.IsZero():
		return nil, invalid("invalid_window", "starts_at", "starts_at is required (RFC 3339)")
	case req.EndsAt.IsZero():
		return nil, invalid("invalid_window", "ends_at", "ends_at is required (RFC 3339)")
	case !req.EndsAt.After(req.StartsAt):
		return nil, invalid("invalid_window", "ends_at", "the window is empty or inverted: ends_at must be after starts_at")
	case !req.EndsAt.After(r.clock.Now()):
		return nil, invalid("invalid_window", "ends_at", "the window is over: ends_at is in the past")
	case req.EndsAt.Sub(req.StartsAt) > maxDelegationSpan:
		return nil, invalid("invalid_window", "ends_at", "a delegation lasts at most a year")
	}
	if len(req.Templates) > maxDelegationTemplates {
		return nil, invalid("invalid_templates", "templates", "at most %d templates", maxDelegationTemplates)
	}
	var templates []string
	for _, k := range req.Templates {
		k = strings.TrimSpace(k)
		if k == "" || utf8.RuneCountInString(k) > 128 {
			return nil, invalid("invalid_templates", "templates", "templates lists template keys (1 to 128 characters)")
		}
		if !slices.Contains(templates, k) {
			templates = append(templates, k)
		}
	}
	if utf8.RuneCountInString(req.Reason) > maxReasonLen {
		return nil, invalid("invalid_reason", "reason", "reason is at most %d characters", maxReasonLen)
	}
	for _, f := range [][2]string{{"from", from}, {"to", to}} {
		field, name := f[0], f[1]
		u, err := r.dir.GetUser(ctx, actor.TenantID, name)
		switch {
		case model.IsKind(err, model.ENOTFOUND):
			return nil, invalid("unknown_user", field, "user %q does not exist", name)
		case err != nil:
			return nil, err
		case u.Disabled && field == "to":
			return nil, invalid("user_disabled", field, "user %q is disabled and gets no tasks", name)
		}
	}
	d := &model.Delegation{TenantID: actor.TenantID, From: from, To: to, StartsAt: req.StartsAt.UTC(), EndsAt: req.EndsAt.UTC(),
		Templates: templates, Reason: req.Reason, CreatedBy: actor.Username}
	if err := r.dels.CreateDelegation(ctx, d); err != nil {
		return nil, err
	}
	r.forget(actor.TenantID)
	return d, nil
}

// ListDelegations lists the delegations from or to user that have not ended: the caller's by default; another
// user's for admins only.
func (r *Service) ListDelegations(ctx context.Context, actor *model.Principal, user string) ([]*model.Delegation, error) {
	if user == "" {
		user = actor.Username
	}
	if user != actor.Username && !actor.IsAdmin() {
		return nil, model.CodedError(model.EFORBIDDEN, "not_allowed", "only admins list another user's delegations")
	}
	return r.dels.ListDelegations(ctx, actor.TenantID, user, r.clock.Now())
}

// DeleteDelegation removes a delegation: its delegator or an admin (403 for its delegate, 404 for others).
func (r *Service) DeleteDelegation(ctx context.Context, actor *model.Principal, id string) error {
	d, err := r.dels.GetDelegation(ctx, actor.TenantID, id)
	if err != nil {
		return err
	}
	switch {
	case actor.IsAdmin() || d.From == actor.Username:
	case d.To == actor.Username:
		return model.CodedError(model.EFORBIDDEN, "not_allowed", "only the delegator or an admin removes a delegation")
	default:
		return model.Errorf(model.ENOTFOUND, "delegation %q not found", id)
	}
	if err := r.dels.DeleteDelegation(ctx, actor.TenantID, id); err != nil {
		return err
	}
	r.forget(actor.TenantID)
	return nil
}
