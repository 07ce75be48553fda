package model

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"time"
)

// DefaultTenant is the one tenant Halley serves until multi-tenancy is switched on; every row carries it.
const DefaultTenant = "default"

// RoleAdmin manages templates, plugins, users and subscriptions.
const RoleAdmin = "admin"

// User is a person who starts processes and decides tasks.
type User struct {
	TenantID     string    `json:"tenant"`
	Username     string    `json:"username"`
	PasswordHash string    `json:"-"`
	DisplayName  string    `json:"display_name"`
	Roles        []string  `json:"roles"`
	Department   string    `json:"department"`
	Manager      string    `json:"manager"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// HasRole reports whether the user holds role.
func (u *User) HasRole(role string) bool { return slices.Contains(u.Roles, role) }

var (
	usernameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)
	roleRe     = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
)

// ValidUsername returns an EINVALID error naming the rule a username breaks.
func ValidUsername(name string) error {
	if !usernameRe.MatchString(name) {
		return CodedError(EINVALID, "invalid_username", "username %q must be 1-64 characters: letters, digits, '.', '_', '@', '-', starting with a letter or digit", name)
	}
	return nil
}

// NormalizeRoles validates, de-duplicates and sorts role names.
func NormalizeRoles(roles []string) ([]string, error) {
	out := make([]string, 0, len(roles))
	for _, r := range roles {
		r = strings.TrimSpace(r)
		if !roleRe.MatchString(r) {
			return nil, CodedError(EINVALID, "invalid_role", "role %q must be 1-64 characters: lowercase letters, digits, '.', '_', '-'", r)
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Validate checks a user's fields (not the password, which is hashed before it reaches the model).
func (u *User) Validate() error {
	if err := ValidUsername(u.Username); err != nil {
		return err
	}
	if len(u.DisplayName) > 128 {
		return CodedError(EINVALID, "invalid_display_name", "display_name is longer than 128 characters")
	}
	if len(u.Department) > 128 {
		return CodedError(EINVALID, "invalid_department", "department is longer than 128 characters")
	}
	if u.Manager != "" {
		if err := ValidUsername(u.Manager); err != nil {
			return CodedError(EINVALID, "invalid_manager", "manager: %s", err.(*Error).Message)
		}
		if u.Manager == u.Username {
			return CodedError(EINVALID, "invalid_manager", "a user cannot be their own manager")
		}
	}
	roles, err := NormalizeRoles(u.Roles)
	if err != nil {
		return err
	}
	u.Roles = roles
	return nil
}

// APIToken is a long-lived credential for a business system. Only its hash is stored.
type APIToken struct {
	ID        string     `json:"id"`
	TenantID  string     `json:"tenant"`
	Name      string     `json:"name"`
	Hash      string     `json:"-"`
	Roles     []string   `json:"roles"`
	CreatedBy string     `json:"created_by"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// Department groups users; its leader resolves `initiator.department.leader`.
type Department struct {
	TenantID  string    `json:"tenant"`
	Name      string    `json:"name"`
	Leader    string    `json:"leader"`
	Parent    string    `json:"parent"`
	CreatedAt time.Time `json:"created_at"`
}

// Principal is who is calling: a user (logged in) or an API token.
type Principal struct {
	TenantID string
	Username string // for API tokens: "token:<name>"
	Roles    []string
	Token    bool // authenticated with an API token
}

// IsAdmin reports whether the principal holds the admin role.
func (p *Principal) IsAdmin() bool { return p != nil && slices.Contains(p.Roles, RoleAdmin) }

// IdempotencyRecord is the stored first response of a write made with an Idempotency-Key.
type IdempotencyRecord struct {
	TenantID    string
	Username    string
	Key         string
	RequestHash string
	StatusCode  int // 0 while the first request is still in flight
	Body        []byte
	CreatedAt   time.Time
}

// Page asks for one page of a list: at most Limit items after Cursor (opaque to callers).
type Page struct {
	Limit  int
	Cursor string
}

// IdentityStore keeps users, API tokens and departments.
type IdentityStore interface {
	// CreateUser returns ECONFLICT when the username exists in the tenant.
	CreateUser(ctx context.Context, u *User) error
	// GetUser returns ENOTFOUND when there is no such user.
	GetUser(ctx context.Context, tenant, username string) (*User, error)
	// ListUsers pages through users ordered by username; role filters when non-empty.
	ListUsers(ctx context.Context, tenant, role string, page Page) ([]*User, string, error)
	// UsersWithRole lists the usernames holding role.
	UsersWithRole(ctx context.Context, tenant, role string) ([]string, error)
	CountUsers(ctx context.Context) (int64, error)
	CreateAPIToken(ctx context.Context, t *APIToken) error
	// GetAPITokenByHash returns ENOTFOUND for unknown or revoked tokens.
	GetAPITokenByHash(ctx context.Context, hash string) (*APIToken, error)
	// CreateDepartment returns ECONFLICT when the name exists.
	CreateDepartment(ctx context.Context, d *Department) error
	GetDepartment(ctx context.Context, tenant, name string) (*Department, error)
	ListDepartments(ctx context.Context, tenant string) ([]*Department, error)
}

// IdempotencyStore keeps first responses of idempotent writes.
type IdempotencyStore interface {
	// BeginIdempotent claims (tenant, user, key) for a request. When the key was used before (and not expired),
	// it returns the existing record and claimed=false.
	BeginIdempotent(ctx context.Context, rec *IdempotencyRecord, expiredBefore time.Time) (existing *IdempotencyRecord, claimed bool, err error)
	// FinishIdempotent stores the response of a claimed key.
	FinishIdempotent(ctx context.Context, rec *IdempotencyRecord) error
	// AbandonIdempotent releases a claimed key (the request failed with a 5xx; the client may retry).
	AbandonIdempotent(ctx context.Context, tenant, username, key string) error
	// PurgeIdempotent deletes records created before t.
	PurgeIdempotent(ctx context.Context, before time.Time) (int64, error)
}
