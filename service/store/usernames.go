package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

// UsernameConflict is a user who keeps no username key because an older user of the tenant holds the same one
// ("Admin" created beside "admin" before usernames were unique regardless of case): both stay as they are,
// the conflict is reported until one of them is deleted.
type UsernameConflict struct {
	TenantID string
	Username string
	// Holder is the older user whose name has the same model.UsernameKey.
	Holder string
}

// migrationSteps are the parts of a migration that SQL cannot do, run right after its statements on the same
// connection, by the migration's name (so that renumbering a migration cannot attach a step to another).
var migrationSteps = map[string]func(ctx context.Context, s *Store, db *gorm.DB) error{
	"account_ids": stepAccountIDs,
}

// stepAccountIDs gives every user an account id (oldest first, so ids sort like creation), every API token whose
// owner exists that owner's id, and every user the key of their name where no older user holds it.
func stepAccountIDs(ctx context.Context, s *Store, db *gorm.DB) error {
	var users []struct {
		TenantID string
		Username string
	}
	if err := db.WithContext(ctx).Raw("SELECT tenant_id, username FROM users WHERE account_id = '' ORDER BY created_at, username").Scan(&users).Error; err != nil {
		return fmt.Errorf("store: unable to list users without an account id: %w", err)
	}
	for _, u := range users {
		if err := db.WithContext(ctx).Exec("UPDATE users SET account_id = ? WHERE tenant_id = ? AND username = ? AND account_id = ''",
			uuid.Must(uuid.NewV7()).String(), u.TenantID, u.Username).Error; err != nil {
			return fmt.Errorf("store: unable to give user %s an account id: %w", u.Username, err)
		}
	}
	// Tokens whose owner is gone keep owner_id '': they never work again (the owner check needs the id).
	err := db.WithContext(ctx).Exec("UPDATE api_tokens SET owner_id = COALESCE((SELECT account_id FROM users " +
		"WHERE users.tenant_id = api_tokens.tenant_id AND users.username = api_tokens.owner), '') WHERE owner <> '' AND owner_id = ''").Error
	if err != nil {
		return fmt.Errorf("store: unable to bind API tokens to their owners' accounts: %w", err)
	}
	_, err = s.keyUsernames(ctx, db, "")
	return err
}

// keyUsernames gives the users of tenant ("" = every tenant) that have no username key the key of their name,
// oldest first, unless another user holds it; it returns those left without one. Nothing else changes.
func (s *Store) keyUsernames(ctx context.Context, db *gorm.DB, tenant string) ([]UsernameConflict, error) {
	type row struct {
		TenantID    string
		Username    string
		UsernameKey *string
		CreatedAt   time.Time
	}
	q := db.WithContext(ctx).Table("users").Select("tenant_id, username, username_key, created_at")
	if tenant != "" {
		q = q.Where("tenant_id = ?", tenant)
	}
	var rows []row
	if err := q.Order("created_at, username").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to read usernames: %w", err)
	}
	holders := map[[2]string]string{} // (tenant, key) -> username
	for _, r := range rows {
		if r.UsernameKey != nil {
			holders[[2]string{r.TenantID, *r.UsernameKey}] = r.Username
		}
	}
	var conflicts []UsernameConflict
	for _, r := range rows {
		if r.UsernameKey != nil {
			continue
		}
		k := [2]string{r.TenantID, model.UsernameKey(r.Username)}
		if h, taken := holders[k]; taken {
			conflicts = append(conflicts, UsernameConflict{TenantID: r.TenantID, Username: r.Username, Holder: h})
			continue
		}
		if err := db.WithContext(ctx).Exec("UPDATE users SET username_key = ? WHERE tenant_id = ? AND username = ? AND username_key IS NULL",
			k[1], r.TenantID, r.Username).Error; err != nil {
			return nil, fmt.Errorf("store: unable to key username %s: %w", r.Username, err)
		}
		holders[k] = r.Username
	}
	return conflicts, nil
}

// UsernameConflicts keys what can be keyed and returns the users that still share a username key with an older
// user; Migrate logs them at every start.
func (s *Store) UsernameConflicts(ctx context.Context) ([]UsernameConflict, error) {
	var out []UsernameConflict
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var err error
		out, err = s.keyUsernames(ctx, tx, "")
		return err
	})
	return out, err
}
