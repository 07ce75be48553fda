package model

import (
	"context"
	"slices"
	"time"
)

// Delegation hands a user's new tasks to another user for a while (委托, out of office): a task created for From
// while the delegation is active (StartsAt <= now < EndsAt) and matches Templates (all templates when empty) is
// assigned to To, with delegated_from set. Delegations never chain.
type Delegation struct {
	ID        string    `json:"id"`
	TenantID  string    `json:"-"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	StartsAt  time.Time `json:"starts_at"`
	EndsAt    time.Time `json:"ends_at"`
	Templates []string  `json:"templates"`
	Reason    string    `json:"reason"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
}

// ActiveAt reports whether the delegation is in force at t for template.
func (d *Delegation) ActiveAt(t time.Time, template string) bool {
	return !t.Before(d.StartsAt) && t.Before(d.EndsAt) && (len(d.Templates) == 0 || slices.Contains(d.Templates, template))
}

// DelegationStore keeps delegations.
type DelegationStore interface {
	// CreateDelegation writes d (setting its id and creation time) unless another delegation of d.From overlaps
	// its window: then EUNPROCESSABLE delegation_overlaps, checked and written in one transaction so that two
	// racing requests cannot both pass.
	CreateDelegation(ctx context.Context, d *Delegation) error
	// GetDelegation returns ENOTFOUND when there is none.
	GetDelegation(ctx context.Context, tenant, id string) (*Delegation, error)
	// DeleteDelegation removes one; ENOTFOUND when there is none.
	DeleteDelegation(ctx context.Context, tenant, id string) error
	// ListDelegations lists the delegations from or to user ("" = every user) that end after endsAfter, by
	// start time.
	ListDelegations(ctx context.Context, tenant, user string, endsAfter time.Time) ([]*Delegation, error)
}
