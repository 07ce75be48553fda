package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/halley-bpm/halley/model"
)

type delegationRow struct {
	ID        string `gorm:"primaryKey"`
	TenantID  string
	FromUser  string
	ToUser    string
	StartsAt  time.Time
	EndsAt    time.Time
	Templates string
	Reason    string
	CreatedBy string
	CreatedAt time.Time
}

func (delegationRow) TableName() string { return "delegations" }

func (r *delegationRow) toModel() *model.Delegation {
	d := &model.Delegation{ID: r.ID, TenantID: r.TenantID, From: r.FromUser, To: r.ToUser, StartsAt: r.StartsAt.UTC(), EndsAt: r.EndsAt.UTC(),
		Reason: r.Reason, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.UTC(), Templates: []string{}}
	_ = json.Unmarshal([]byte(r.Templates), &d.Templates) // written by CreateDelegation
	return d
}

var _ model.DelegationStore = (*Store)(nil)

// CreateDelegation writes d after checking, under the delegator's user row lock, that no other delegation of
// theirs overlaps it.
func (s *Store) CreateDelegation(ctx context.Context, d *model.Delegation) error {
	d.ID = uuid.Must(uuid.NewV7()).String()
	d.CreatedAt = s.now()
	if d.Templates == nil {
		d.Templates = []string{}
	}
	tpl, _ := json.Marshal(d.Templates)
	row := delegationRow{ID: d.ID, TenantID: d.TenantID, FromUser: d.From, ToUser: d.To, StartsAt: d.StartsAt.UTC(), EndsAt: d.EndsAt.UTC(),
		Templates: string(tpl), Reason: d.Reason, CreatedBy: d.CreatedBy, CreatedAt: d.CreatedAt}
	return s.inTx(ctx, func(tx *gorm.DB) error {
		// The delegator's user row serialises their delegations (SQLite serialises write transactions anyway).
		var u userRow
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("tenant_id = ? AND username = ?", d.TenantID, d.From).Take(&u).Error; err != nil {
			return notFound(err, "user %q not found", d.From)
		}
		var n int64
		if err := tx.Model(&delegationRow{}).Where("tenant_id = ? AND from_user = ? AND starts_at < ? AND ends_at > ?", d.TenantID, d.From, row.EndsAt, row.StartsAt).
			Count(&n).Error; err != nil {
			return fmt.Errorf("store: unable to check delegations: %w", err)
		}
		if n > 0 {
			return model.CodedError(model.EUNPROCESSABLE, "delegation_overlaps", "%s already has a delegation that overlaps this window", d.From).
				WithDetails(map[string]any{"field": "starts_at"})
		}
		if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("store: unable to create delegation: %w", err)
		}
		return s.auditIn(ctx, tx, nil, d)
	})
}

// GetDelegation returns ENOTFOUND when there is no such delegation.
func (s *Store) GetDelegation(ctx context.Context, tenant, id string) (*model.Delegation, error) {
	var r delegationRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND id = ?", tenant, id).Take(&r).Error; err != nil {
		return nil, notFound(err, "delegation %q not found", id)
	}
	return r.toModel(), nil
}

// DeleteDelegation removes a delegation; ENOTFOUND when there is none.
func (s *Store) DeleteDelegation(ctx context.Context, tenant, id string) error {
	return s.inTx(ctx, func(tx *gorm.DB) error {
		var r delegationRow
		if err := tx.Where("tenant_id = ? AND id = ?", tenant, id).Take(&r).Error; err != nil {
			return notFound(err, "delegation %q not found", id)
		}
		if err := tx.Where("tenant_id = ? AND id = ?", tenant, id).Delete(&delegationRow{}).Error; err != nil {
			return fmt.Errorf("store: unable to delete delegation: %w", err)
		}
		return s.auditIn(ctx, tx, r.toModel(), nil)
	})
}

// ListDelegations lists the delegations from or to user ("" = all) ending after endsAfter, by start time: all of
// them, read in keyset pages (the rules resolver applies every one; a cap would silently drop delegations).
func (s *Store) ListDelegations(ctx context.Context, tenant, user string, endsAfter time.Time) ([]*model.Delegation, error) {
	const page = 1000
	var out []*model.Delegation
	var last *delegationRow
	for {
		q := s.db.WithContext(ctx).Where("tenant_id = ? AND ends_at > ?", tenant, endsAfter.UTC())
		if user != "" {
			q = q.Where("(from_user = ? OR to_user = ?)", user, user)
		}
		if last != nil {
			q = q.Where("(starts_at > ? OR (starts_at = ? AND id > ?))", last.StartsAt, last.StartsAt, last.ID)
		}
		var rows []delegationRow
		if err := q.Order("starts_at, id").Limit(page).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("store: unable to list delegations: %w", err)
		}
		for i := range rows {
			out = append(out, rows[i].toModel())
		}
		if len(rows) < page {
			if out == nil {
				out = []*model.Delegation{}
			}
			return out, nil
		}
		last = &rows[len(rows)-1]
	}
}
