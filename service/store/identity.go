package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/halley-bpm/halley/model"
)

type userRow struct {
	TenantID     string `gorm:"primaryKey"`
	Username     string `gorm:"primaryKey"`
	PasswordHash string
	DisplayName  string
	Department   string
	Manager      string
	Roles        string
	Disabled     bool
	// PasswordChangeRequired is set while the bootstrap admin has the default password.
	PasswordChangeRequired bool
	Language               string
	Email                  string
	Mobile                 string
	IMID                   string `gorm:"column:im_id"`
	TokenVersion           int64
	AccountID              string
	UsernameKey            *string // NULL only for a user who kept a look-alike name from before migration account_ids
	CreatedAt              time.Time
	UpdatedAt              time.Time
}

func (userRow) TableName() string { return "users" }

type userRoleRow struct {
	TenantID string `gorm:"primaryKey"`
	Role     string `gorm:"primaryKey"`
	Username string `gorm:"primaryKey"`
}

func (userRoleRow) TableName() string { return "user_roles" }

func toUserRow(u *model.User) userRow {
	roles, _ := json.Marshal(u.Roles)
	key := model.UsernameKey(u.Username)
	return userRow{TenantID: u.TenantID, Username: u.Username, PasswordHash: u.PasswordHash, DisplayName: u.DisplayName,
		Department: u.Department, Manager: u.Manager, Roles: string(roles), Disabled: u.Disabled, PasswordChangeRequired: u.PasswordChangeRequired,
		Language: u.Language, Email: u.Email, Mobile: u.Mobile, IMID: u.IMID, TokenVersion: u.TokenVersion, AccountID: u.AccountID,
		UsernameKey: &key, CreatedAt: u.CreatedAt.UTC(), UpdatedAt: u.UpdatedAt.UTC()}
}

func (r *userRow) toModel() *model.User {
	u := &model.User{TenantID: r.TenantID, Username: r.Username, PasswordHash: r.PasswordHash, DisplayName: r.DisplayName,
		Department: r.Department, Manager: r.Manager, Disabled: r.Disabled, PasswordChangeRequired: r.PasswordChangeRequired,
		Language: r.Language, Email: r.Email, Mobile: r.Mobile, IMID: r.IMID, TokenVersion: r.TokenVersion, AccountID: r.AccountID,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	_ = json.Unmarshal([]byte(r.Roles), &u.Roles)
	if u.Roles == nil {
		u.Roles = []string{}
	}
	return u
}

var _ model.IdentityStore = (*Store)(nil)

// CreateUser inserts a user, with a new account id, and its role index rows in one transaction; see
// model.IdentityStore.
func (s *Store) CreateUser(ctx context.Context, u *model.User) error {
	err := s.createUser(ctx, u)
	if err == nil {
		s.userChanged(u.TenantID, u.Username)
	}
	return err
}

// OnUserChange has fn called after a user was created, changed or deleted through this store (a cache of users
// forgets the user: notify's in-step notifications). One fn; set it before serving.
func (s *Store) OnUserChange(fn func(tenant, username string)) { s.userHook.Store(&fn) }

func (s *Store) userChanged(tenant, username string) {
	if fn := s.userHook.Load(); fn != nil {
		(*fn)(tenant, username)
	}
}

func (s *Store) createUser(ctx context.Context, u *model.User) error {
	if u.TenantID == "" {
		u.TenantID = model.DefaultTenant
	}
	now := s.now()
	u.CreatedAt, u.UpdatedAt = now, now
	u.AccountID = uuid.Must(uuid.NewV7()).String()
	row := toUserRow(u)
	return s.inTx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			if isDuplicate(err) {
				var holder string
				if tx.Raw("SELECT username FROM users WHERE tenant_id = ? AND username_key = ?", u.TenantID, *row.UsernameKey).
					Scan(&holder).Error == nil && holder != "" && holder != u.Username {
					return model.CodedError(model.ECONFLICT, "user_exists",
						"username %q is taken: user %q has the same name but for letter case or Unicode form", u.Username, holder).
						WithDetails(map[string]any{"conflicts_with": holder})
				}
				return model.CodedError(model.ECONFLICT, "user_exists", "user %q already exists", u.Username)
			}
			return fmt.Errorf("store: unable to create user %s: %w", u.Username, err)
		}
		if len(u.Roles) > 0 {
			rs := make([]userRoleRow, len(u.Roles))
			for i, r := range u.Roles {
				rs[i] = userRoleRow{TenantID: u.TenantID, Role: r, Username: u.Username}
			}
			if err := tx.Create(&rs).Error; err != nil {
				return fmt.Errorf("store: unable to index roles of user %s: %w", u.Username, err)
			}
		}
		return s.auditIn(ctx, tx, nil, u.AuditState())
	})
}

// GetUser returns ENOTFOUND when the user does not exist.
func (s *Store) GetUser(ctx context.Context, tenant, username string) (*model.User, error) {
	var r userRow
	err := s.db.WithContext(ctx).Where("tenant_id = ? AND username = ?", tenant, username).Take(&r).Error
	if err != nil {
		return nil, notFound(err, "user %q not found", username)
	}
	return r.toModel(), nil
}

// ListUsers pages through users by username. The cursor is the last username of the previous page.
func (s *Store) ListUsers(ctx context.Context, tenant, role string, page model.Page) ([]*model.User, string, error) {
	q := s.db.WithContext(ctx).Model(&userRow{}).Where("users.tenant_id = ?", tenant)
	if role != "" {
		q = q.Joins("JOIN user_roles ON user_roles.tenant_id = users.tenant_id AND user_roles.username = users.username AND user_roles.role = ?", role)
	}
	if page.Cursor != "" {
		q = q.Where("users.username > ?", page.Cursor)
	}
	var rows []userRow
	if err := q.Order("users.username").Limit(page.Limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: unable to list users: %w", err)
	}
	next := ""
	if len(rows) > page.Limit {
		rows = rows[:page.Limit]
		next = rows[len(rows)-1].Username
	}
	out := make([]*model.User, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, next, nil
}

// UserStates answers, for each of names that is a user of the tenant, whether that user is disabled; names that
// are no user are left out. One query (names come in batches of at most 500).
func (s *Store) UserStates(ctx context.Context, tenant string, names []string) (map[string]bool, error) {
	out := make(map[string]bool, len(names))
	for len(names) > 0 {
		n := min(len(names), 500)
		var rows []struct {
			Username string
			Disabled bool
		}
		if err := s.db.WithContext(ctx).Model(&userRow{}).Select("username, disabled").
			Where("tenant_id = ? AND username IN ?", tenant, names[:n]).Find(&rows).Error; err != nil {
			return nil, fmt.Errorf("store: unable to look up users: %w", err)
		}
		for _, r := range rows {
			out[r.Username] = r.Disabled
		}
		names = names[n:]
	}
	return out, nil
}

// UsersWithRole lists the usernames holding role, sorted.
func (s *Store) UsersWithRole(ctx context.Context, tenant, role string) ([]string, error) {
	var names []string
	err := s.db.WithContext(ctx).Model(&userRoleRow{}).Where("tenant_id = ? AND role = ?", tenant, role).
		Order("username").Pluck("username", &names).Error
	if err != nil {
		return nil, fmt.Errorf("store: unable to list users with role %s: %w", role, err)
	}
	return names, nil
}

// CountUsers counts users across tenants (the admin bootstrap runs when it is 0).
func (s *Store) CountUsers(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&userRow{}).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("store: unable to count users: %w", err)
	}
	return n, nil
}

// lockAdmins locks the tenant's admin role rows, in key order, and returns their usernames. Every update and
// delete of a user takes this lock first: so changes that might each remove an admin are serialised (they never
// deadlock, and the last-admin check reads what the other committed), at the cost of one small locking read.
func (s *Store) lockAdmins(tx *gorm.DB, tenant string) ([]string, error) {
	var admins []string
	if err := tx.Model(&userRoleRow{}).Clauses(s.lockClause()...).Where("tenant_id = ? AND role = ?", tenant, model.RoleAdmin).
		Order("username").Pluck("username", &admins).Error; err != nil {
		return nil, fmt.Errorf("store: unable to lock the admins of tenant %s: %w", tenant, err)
	}
	return admins, nil
}

// checkNotLastAdmin is ECONFLICT last_admin when no enabled admin but username would remain (admins: lockAdmins).
func (s *Store) checkNotLastAdmin(tx *gorm.DB, tenant, username string, admins []string) error {
	var others int64
	err := tx.Model(&userRow{}).Clauses(s.lockClause()...).
		Where("tenant_id = ? AND username IN ? AND username <> ? AND disabled = ?", tenant, append(admins, ""), username, false).
		Count(&others).Error
	if err != nil {
		return fmt.Errorf("store: unable to count the admins of tenant %s: %w", tenant, err)
	}
	if others == 0 {
		return model.CodedError(model.ECONFLICT, "last_admin",
			"%s is the last enabled admin: make another user an admin first, so that someone can still manage Halley", username)
	}
	return nil
}

// UpdateUser changes a user under lock; see model.IdentityStore. A change that ends the user's sessions
// (model.RevokesTokens) bumps token_version in the same write.
func (s *Store) UpdateUser(ctx context.Context, tenant, username string, fn func(u *model.User) error) (*model.User, error) {
	u, err := s.updateUser(ctx, tenant, username, fn)
	if err == nil {
		s.userChanged(tenant, username)
	}
	return u, err
}

func (s *Store) updateUser(ctx context.Context, tenant, username string, fn func(u *model.User) error) (*model.User, error) {
	var out *model.User
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		admins, err := s.lockAdmins(tx, tenant)
		if err != nil {
			return err
		}
		var row userRow
		if err := tx.Clauses(s.lockClause()...).Where("tenant_id = ? AND username = ?", tenant, username).Take(&row).Error; err != nil {
			return notFound(err, "user %q not found", username)
		}
		before := row.toModel()
		u := row.toModel()
		if err := fn(u); err != nil {
			return err
		}
		u.TenantID, u.Username, u.CreatedAt, u.TokenVersion, u.AccountID = before.TenantID, before.Username, before.CreatedAt, before.TokenVersion, before.AccountID
		if before.IsEnabledAdmin() && !u.IsEnabledAdmin() {
			if err := s.checkNotLastAdmin(tx, tenant, username, admins); err != nil {
				return err
			}
		}
		if model.RevokesTokens(before, u) {
			u.TokenVersion++
		}
		u.UpdatedAt = s.now()
		next := toUserRow(u)
		err = tx.Model(&userRow{}).Where("tenant_id = ? AND username = ?", tenant, username).Updates(map[string]any{
			"password_hash": next.PasswordHash, "display_name": next.DisplayName, "department": next.Department, "manager": next.Manager,
			"roles": next.Roles, "disabled": next.Disabled, "password_change_required": next.PasswordChangeRequired,
			"language": next.Language, "email": next.Email, "mobile": next.Mobile, "im_id": next.IMID, "token_version": next.TokenVersion,
			"updated_at": next.UpdatedAt,
		}).Error
		if err != nil {
			return fmt.Errorf("store: unable to update user %s: %w", username, err)
		}
		if !slices.Equal(before.Roles, u.Roles) {
			if err := tx.Where("tenant_id = ? AND username = ?", tenant, username).Delete(&userRoleRow{}).Error; err != nil {
				return fmt.Errorf("store: unable to re-index roles of user %s: %w", username, err)
			}
			if len(u.Roles) > 0 {
				rs := make([]userRoleRow, len(u.Roles))
				for i, r := range u.Roles {
					rs[i] = userRoleRow{TenantID: tenant, Role: r, Username: username}
				}
				if err := tx.Create(&rs).Error; err != nil {
					return fmt.Errorf("store: unable to index roles of user %s: %w", username, err)
				}
			}
		}
		out = u
		return s.auditIn(ctx, tx, before.AuditState(), u.AuditState())
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteUser deletes a user; see model.IdentityStore.
func (s *Store) DeleteUser(ctx context.Context, tenant, username string) (*model.User, error) {
	u, err := s.deleteUser(ctx, tenant, username)
	if err == nil {
		s.userChanged(tenant, username)
	}
	return u, err
}

func (s *Store) deleteUser(ctx context.Context, tenant, username string) (*model.User, error) {
	var out *model.User
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		admins, err := s.lockAdmins(tx, tenant)
		if err != nil {
			return err
		}
		var row userRow
		if err := tx.Clauses(s.lockClause()...).Where("tenant_id = ? AND username = ?", tenant, username).Take(&row).Error; err != nil {
			return notFound(err, "user %q not found", username)
		}
		u := row.toModel()
		if u.IsEnabledAdmin() {
			if err := s.checkNotLastAdmin(tx, tenant, username, admins); err != nil {
				return err
			}
		}
		if err := tx.Where("tenant_id = ? AND username = ?", tenant, username).Delete(&userRoleRow{}).Error; err != nil {
			return fmt.Errorf("store: unable to delete the roles of user %s: %w", username, err)
		}
		if err := tx.Where("tenant_id = ? AND username = ?", tenant, username).Delete(&userRow{}).Error; err != nil {
			return fmt.Errorf("store: unable to delete user %s: %w", username, err)
		}
		if err := tx.Where("tenant_id = ? AND owner = ?", tenant, username).Delete(&apiTokenRow{}).Error; err != nil {
			return fmt.Errorf("store: unable to delete the API tokens of user %s: %w", username, err)
		}
		// A look-alike of the deleted name that kept no key (see UsernameConflict) may take it now.
		if _, err := s.keyUsernames(ctx, tx, tenant); err != nil {
			return err
		}
		out = u
		return s.auditIn(ctx, tx, u.AuditState(), nil)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

type apiTokenRow struct {
	ID         string `gorm:"primaryKey"`
	TenantID   string
	Name       string
	TokenHash  string
	Roles      string
	Owner      string
	OwnerID    string
	CreatedBy  string
	CreatedAt  time.Time
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

func (apiTokenRow) TableName() string { return "api_tokens" }

func (r *apiTokenRow) toModel() *model.APIToken {
	t := &model.APIToken{ID: r.ID, TenantID: r.TenantID, Name: r.Name, Hash: r.TokenHash, Owner: r.Owner, OwnerID: r.OwnerID, CreatedBy: r.CreatedBy,
		CreatedAt: r.CreatedAt.UTC(), ExpiresAt: utcPtr(r.ExpiresAt), LastUsedAt: utcPtr(r.LastUsedAt), RevokedAt: utcPtr(r.RevokedAt)}
	_ = json.Unmarshal([]byte(r.Roles), &t.Roles)
	if t.Roles == nil {
		t.Roles = []string{}
	}
	return t
}

// CreateAPIToken stores a token's hash.
func (s *Store) CreateAPIToken(ctx context.Context, t *model.APIToken) error {
	roles, _ := json.Marshal(t.Roles)
	t.CreatedAt = s.now()
	row := apiTokenRow{ID: t.ID, TenantID: t.TenantID, Name: t.Name, TokenHash: t.Hash, Roles: string(roles), Owner: t.Owner, OwnerID: t.OwnerID, CreatedBy: t.CreatedBy,
		CreatedAt: t.CreatedAt, ExpiresAt: utcPtr(t.ExpiresAt)}
	return s.inTx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			if isDuplicate(err) {
				return model.CodedError(model.ECONFLICT, "token_exists", "token already exists")
			}
			return fmt.Errorf("store: unable to create API token %s: %w", t.Name, err)
		}
		return s.auditIn(ctx, tx, nil, t.AuditState())
	})
}

// GetAPITokenByHash returns ENOTFOUND for unknown or revoked tokens. It runs on every request made with an API
// token (nothing caches tokens, so that a deleted one stops working at once on every replica): prebuilt SQL on
// the unique hash index.
func (s *Store) GetAPITokenByHash(ctx context.Context, hash string) (*model.APIToken, error) {
	var r apiTokenRow
	err := s.sqlDB.QueryRowContext(ctx, "SELECT id, tenant_id, name, token_hash, roles, owner, owner_id, created_by, created_at, expires_at, last_used_at "+
		"FROM api_tokens WHERE token_hash = ? AND revoked_at IS NULL", hash).
		Scan(&r.ID, &r.TenantID, &r.Name, &r.TokenHash, &r.Roles, &r.Owner, &r.OwnerID, &r.CreatedBy, &r.CreatedAt, &r.ExpiresAt, &r.LastUsedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, model.Errorf(model.ENOTFOUND, "unknown API token")
	}
	if err != nil {
		return nil, fmt.Errorf("store: unable to read an API token: %w", err)
	}
	return r.toModel(), nil
}

// ListAPITokens pages through the tenant's tokens (revoked ones left out) by name, then id; the cursor is the
// last (name, id).
func (s *Store) ListAPITokens(ctx context.Context, tenant string, page model.Page) ([]*model.APIToken, string, error) {
	q := s.db.WithContext(ctx).Where("tenant_id = ? AND revoked_at IS NULL", tenant)
	if page.Cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(page.Cursor)
		name, id, ok := strings.Cut(string(b), "\x00")
		if err != nil || !ok {
			return nil, "", model.CodedError(model.EINVALID, "invalid_cursor", "cursor is malformed")
		}
		q = q.Where("(name > ? OR (name = ? AND id > ?))", name, name, id)
	}
	var rows []apiTokenRow
	if err := q.Order("name, id").Limit(page.Limit + 1).Find(&rows).Error; err != nil {
		return nil, "", fmt.Errorf("store: unable to list API tokens: %w", err)
	}
	next := ""
	if len(rows) > page.Limit {
		rows = rows[:page.Limit]
		last := rows[len(rows)-1]
		next = base64.RawURLEncoding.EncodeToString([]byte(last.Name + "\x00" + last.ID))
	}
	out := make([]*model.APIToken, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, next, nil
}

// DeleteAPIToken deletes a token and returns what it was; ENOTFOUND for an unknown id.
func (s *Store) DeleteAPIToken(ctx context.Context, tenant, id string) (*model.APIToken, error) {
	var out *model.APIToken
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		var r apiTokenRow
		if err := tx.Clauses(s.lockClause()...).Where("tenant_id = ? AND id = ? AND revoked_at IS NULL", tenant, id).Take(&r).Error; err != nil {
			return notFound(err, "API token %q not found", id)
		}
		if err := tx.Where("id = ?", id).Delete(&apiTokenRow{}).Error; err != nil {
			return fmt.Errorf("store: unable to delete API token %s: %w", id, err)
		}
		out = r.toModel()
		return s.auditIn(ctx, tx, out.AuditState(), nil)
	})
	return out, err
}

// TouchAPIToken records a token's use; see model.IdentityStore. The condition makes the write idempotent across
// replicas: of the requests that see an old last_used_at at the same moment, one updates the row.
func (s *Store) TouchAPIToken(ctx context.Context, id string, at, olderThan time.Time) error {
	_, err := s.sqlDB.ExecContext(ctx, "UPDATE api_tokens SET last_used_at = ? WHERE id = ? AND (last_used_at IS NULL OR last_used_at < ?)",
		at.UTC(), id, olderThan.UTC())
	if err != nil {
		return fmt.Errorf("store: unable to record the use of API token %s: %w", id, err)
	}
	return nil
}

type departmentRow struct {
	TenantID  string `gorm:"primaryKey"`
	Name      string `gorm:"primaryKey"`
	Leader    string
	Parent    string
	CreatedAt time.Time
}

func (departmentRow) TableName() string { return "departments" }

func (r *departmentRow) toModel() *model.Department {
	return &model.Department{TenantID: r.TenantID, Name: r.Name, Leader: r.Leader, Parent: r.Parent, CreatedAt: r.CreatedAt.UTC()}
}

// CreateDepartment returns ECONFLICT when the name exists.
func (s *Store) CreateDepartment(ctx context.Context, d *model.Department) error {
	d.CreatedAt = s.now()
	row := departmentRow{TenantID: d.TenantID, Name: d.Name, Leader: d.Leader, Parent: d.Parent, CreatedAt: d.CreatedAt}
	return s.inTx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			if isDuplicate(err) {
				return model.CodedError(model.ECONFLICT, "department_exists", "department %q already exists", d.Name)
			}
			return fmt.Errorf("store: unable to create department %s: %w", d.Name, err)
		}
		return s.auditIn(ctx, tx, nil, map[string]any{"name": d.Name, "leader": d.Leader, "parent": d.Parent})
	})
}

// GetDepartment returns ENOTFOUND when there is no such department.
func (s *Store) GetDepartment(ctx context.Context, tenant, name string) (*model.Department, error) {
	var r departmentRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ? AND name = ?", tenant, name).Take(&r).Error; err != nil {
		return nil, notFound(err, "department %q not found", name)
	}
	return r.toModel(), nil
}

// ListDepartments lists every department of the tenant by name.
func (s *Store) ListDepartments(ctx context.Context, tenant string) ([]*model.Department, error) {
	var rows []departmentRow
	if err := s.db.WithContext(ctx).Where("tenant_id = ?", tenant).Order("name").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: unable to list departments: %w", err)
	}
	out := make([]*model.Department, len(rows))
	for i := range rows {
		out[i] = rows[i].toModel()
	}
	return out, nil
}

type idempotencyRow struct {
	TenantID    string `gorm:"primaryKey"`
	Username    string `gorm:"primaryKey"`
	IdemKey     string `gorm:"primaryKey"`
	RequestHash string
	StatusCode  int
	Body        string
	CreatedAt   time.Time
}

func (idempotencyRow) TableName() string { return "idempotency_keys" }

var _ model.IdempotencyStore = (*Store)(nil)

// BeginIdempotent inserts an in-flight record for the key; when one exists it is returned instead, unless it
// was created before expiredBefore, in which case it is replaced.
func (s *Store) BeginIdempotent(ctx context.Context, rec *model.IdempotencyRecord, expiredBefore time.Time) (*model.IdempotencyRecord, bool, error) {
	rec.CreatedAt = s.now()
	row := idempotencyRow{TenantID: rec.TenantID, Username: rec.Username, IdemKey: rec.Key, RequestHash: rec.RequestHash, CreatedAt: rec.CreatedAt}
	var existing *model.IdempotencyRecord
	claimed := false
	err := s.inTx(ctx, func(tx *gorm.DB) error {
		existing, claimed = nil, false
		err := tx.Create(&row).Error
		if err == nil {
			claimed = true
			return nil
		}
		if !isDuplicate(err) {
			return fmt.Errorf("store: unable to record idempotency key: %w", err)
		}
		var old idempotencyRow
		if err := tx.Where("tenant_id = ? AND username = ? AND idem_key = ?", rec.TenantID, rec.Username, rec.Key).Take(&old).Error; err != nil {
			return fmt.Errorf("store: unable to read idempotency key: %w", err)
		}
		if old.CreatedAt.Before(expiredBefore) {
			// The key's last use expired: so did the record of the work it committed.
			if err := tx.Exec("DELETE FROM idempotency_commits WHERE tenant_id = ? AND username = ? AND idem_key = ? AND created_at < ?",
				rec.TenantID, rec.Username, rec.Key, expiredBefore.UTC()).Error; err != nil {
				return fmt.Errorf("store: unable to renew idempotency key: %w", err)
			}
			res := tx.Model(&idempotencyRow{}).Where("tenant_id = ? AND username = ? AND idem_key = ? AND created_at = ?", old.TenantID, old.Username, old.IdemKey, old.CreatedAt).
				Updates(map[string]any{"request_hash": rec.RequestHash, "status_code": 0, "body": "", "created_at": rec.CreatedAt})
			if res.Error != nil {
				return fmt.Errorf("store: unable to renew idempotency key: %w", res.Error)
			}
			claimed = res.RowsAffected == 1
			if claimed {
				return nil
			}
		}
		existing = &model.IdempotencyRecord{TenantID: old.TenantID, Username: old.Username, Key: old.IdemKey, RequestHash: old.RequestHash,
			StatusCode: old.StatusCode, Body: []byte(old.Body), CreatedAt: old.CreatedAt.UTC()}
		return nil
	})
	return existing, claimed, err
}

// FinishIdempotent stores the response of a claimed key.
func (s *Store) FinishIdempotent(ctx context.Context, rec *model.IdempotencyRecord) error {
	err := s.db.WithContext(ctx).Model(&idempotencyRow{}).Where("tenant_id = ? AND username = ? AND idem_key = ?", rec.TenantID, rec.Username, rec.Key).
		Updates(map[string]any{"status_code": rec.StatusCode, "body": string(rec.Body)}).Error
	if err != nil {
		return fmt.Errorf("store: unable to store idempotent response: %w", err)
	}
	return nil
}

// AbandonIdempotent deletes an in-flight key so that the client may retry.
func (s *Store) AbandonIdempotent(ctx context.Context, tenant, username, key string) error {
	err := s.db.WithContext(ctx).Where("tenant_id = ? AND username = ? AND idem_key = ? AND status_code = 0", tenant, username, key).
		Delete(&idempotencyRow{}).Error
	if err != nil {
		return fmt.Errorf("store: unable to release idempotency key: %w", err)
	}
	return nil
}

// IdempotentCommit returns the instance that the key's fenced work changed, if that work committed.
func (s *Store) IdempotentCommit(ctx context.Context, tenant, username, key string) (string, bool, error) {
	var ids []string
	err := s.db.WithContext(ctx).Raw("SELECT instance_id FROM idempotency_commits WHERE tenant_id = ? AND username = ? AND idem_key = ?",
		tenant, username, key).Scan(&ids).Error
	if err != nil {
		return "", false, fmt.Errorf("store: unable to read idempotency commit: %w", err)
	}
	if len(ids) == 0 {
		return "", false, nil
	}
	return ids[0], true, nil
}

// TakeOverIdempotent claims anew a key in flight since before staleBefore. Of several callers at once, one
// gets it: the update moves created_at past staleBefore.
func (s *Store) TakeOverIdempotent(ctx context.Context, tenant, username, key string, staleBefore time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Exec("UPDATE idempotency_keys SET created_at = ? WHERE tenant_id = ? AND username = ? AND idem_key = ? AND status_code = 0 AND created_at < ?",
		s.now(), tenant, username, key, staleBefore.UTC())
	if res.Error != nil {
		return false, fmt.Errorf("store: unable to take over idempotency key: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// DepartmentMembers lists the users of a department by name.
func (s *Store) DepartmentMembers(ctx context.Context, tenant, department string) ([]string, error) {
	var names []string
	err := s.db.WithContext(ctx).Model(&userRow{}).Where("tenant_id = ? AND department = ?", tenant, department).
		Order("username").Pluck("username", &names).Error
	if err != nil {
		return nil, fmt.Errorf("store: unable to list the members of department %s: %w", department, err)
	}
	return names, nil
}
