package model

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// DefaultTenant is the one tenant Halley serves until multi-tenancy is switched on; every row carries it.
const DefaultTenant = "default"

// RoleAdmin manages templates, plugins, users and subscriptions.
const RoleAdmin = "admin"

// User is a person who starts processes and decides tasks.
type User struct {
	TenantID     string   `json:"tenant"`
	Username     string   `json:"username"`
	PasswordHash string   `json:"-"`
	DisplayName  string   `json:"display_name"`
	Roles        []string `json:"roles"`
	Department   string   `json:"department"`
	Manager      string   `json:"manager"`
	// Disabled users cannot log in, their tokens stop working, and they get no new tasks.
	Disabled bool `json:"disabled"`
	// PasswordChangeRequired is set while the bootstrap admin still has the default password.
	PasswordChangeRequired bool   `json:"password_change_required,omitempty"`
	Language               string `json:"language"`
	Email                  string `json:"email"`
	Mobile                 string `json:"mobile"`
	IMID                   string `json:"im_id"`
	// TokenVersion is the version every login token of the user carries: bumping it (password change, admin
	// reset, disable, a role taken away: RevokesTokens) makes every token signed before stop working.
	TokenVersion int64 `json:"-"`
	// AccountID names this account for good: a random id given at creation and never reused, so that a user
	// deleted and created again under the same name is another account — tokens signed for the first one (and
	// API tokens it owned) never work for the second.
	AccountID string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Initiators and actors that are not people. None of them can be a username (':' is not allowed in one), so no
// user created by an admin can read or act on what they own. API-token principals are "token:<name>".
const (
	// InitiatorCron starts crontab instances.
	InitiatorCron = "system:cron"
	// InitiatorAnonymous starts instances from form submissions without a login.
	InitiatorAnonymous = "system:anonymous"
	// ActorSystem is the history actor of what the engine does by itself (timers, plugin results).
	ActorSystem = "system"
)

// ReservedUsernames may not be created as users: they are, or were, names of synthetic actors.
var ReservedUsernames = []string{"system", "cron", "anonymous"}

// IsPersonInitiator reports whether an initiator is a user (who can be given a task, e.g. a resubmit after a
// return to start), as opposed to a synthetic one (crontab, anonymous form, API token).
func IsPersonInitiator(initiator string) bool { return usernameRe.MatchString(initiator) }

// HasRole reports whether the user holds role.
func (u *User) HasRole(role string) bool { return slices.Contains(u.Roles, role) }

var (
	usernameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)
	roleRe     = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
)

// UsernameKey is what makes two usernames the same person to a reader: the NFKC case fold of the name
// (NFKC, full case folding, NFKC again, as Unicode's NFKC_Casefold does), so that "Admin", "ADMIN" and the
// full-width "ａｄｍｉｎ" are all "admin". Usernames are unique by this key within a tenant; login stays exact.
func UsernameKey(name string) string {
	// A Caser keeps state: one per call (they are cheap), never shared between goroutines.
	return norm.NFKC.String(cases.Fold().String(norm.NFKC.String(name)))
}

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
	if err := CheckName("display_name", u.DisplayName, 128); err != nil {
		return err
	}
	if len(u.Department) > 128 {
		return CodedError(EINVALID, "invalid_department", "department is longer than 128 characters")
	}
	if err := CheckName("department", u.Department, 128); err != nil {
		return err
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

// Languages the UI and notifications speak; "" means the browser's.
var Languages = []string{"zh-CN", "en"}

var (
	mobileRe = regexp.MustCompile(`^\+?[0-9][0-9 ()-]{2,30}$`)
	// emailRe is deliberately loose (something@something.tld, no spaces or control characters): mail systems
	// decide the rest, and a notification that cannot be delivered shows in the delivery log.
	emailRe = regexp.MustCompile(`^[^\s@<>()\[\],;:"\\]+@[^\s@<>()\[\],;:"\\]+\.[^\s@<>()\[\],;:"\\]+$`)
)

// ValidateProfile checks what a user sets about themselves (PUT /me) and an admin may set about them: display
// name (1-128 bytes once trimmed), language, email, mobile and IM id. Errors are EINVALID with a code naming the
// field.
func (u *User) ValidateProfile() error {
	u.DisplayName = strings.TrimSpace(u.DisplayName)
	if u.DisplayName == "" || len(u.DisplayName) > 128 {
		return CodedError(EINVALID, "invalid_display_name", "display_name must be 1 to 128 characters")
	}
	if err := CheckName("display_name", u.DisplayName, 128); err != nil {
		return err
	}
	if u.Language != "" && !slices.Contains(Languages, u.Language) {
		return CodedError(EINVALID, "invalid_language", "language must be one of %s, or empty for the browser's (got %q)", strings.Join(Languages, ", "), u.Language)
	}
	u.Email = strings.TrimSpace(u.Email)
	if u.Email != "" && (len(u.Email) > 254 || !emailRe.MatchString(u.Email)) {
		return CodedError(EINVALID, "invalid_email", "email %q is not an address like name@example.com", u.Email)
	}
	u.Mobile = strings.TrimSpace(u.Mobile)
	if u.Mobile != "" && !mobileRe.MatchString(u.Mobile) {
		return CodedError(EINVALID, "invalid_mobile", "mobile %q must be a phone number: digits, spaces, '-', '(', ')', an optional leading '+', at most 32 characters", u.Mobile)
	}
	u.IMID = strings.TrimSpace(u.IMID)
	if len(u.IMID) > 128 || strings.ContainsFunc(u.IMID, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return CodedError(EINVALID, "invalid_im_id", "im_id must be at most 128 characters, without control characters")
	}
	return nil
}

// IsEnabledAdmin reports whether the user can act as an admin: holds the role and is not disabled.
func (u *User) IsEnabledAdmin() bool { return !u.Disabled && u.HasRole(RoleAdmin) }

// APIToken is a long-lived credential for a business system. Only its hash is stored. Names need not be unique:
// two tokens named "erp" are two tokens, told apart by ID.
type APIToken struct {
	ID       string   `json:"id"`
	TenantID string   `json:"tenant"`
	Name     string   `json:"name"`
	Hash     string   `json:"-"`
	Roles    []string `json:"roles"`
	// Owner is the admin whose authority the token carries: it works only while Owner exists and is an enabled
	// admin. A token created by another token has that token's owner. "" for tokens created by a token before
	// owners existed (they keep working).
	Owner string `json:"owner"`
	// OwnerID is the owner's AccountID when the token was made: the token works only for that account, not for a
	// user created later under the same name. "" with an Owner set: the owner was gone before ids existed.
	OwnerID    string     `json:"-"`
	CreatedBy  string     `json:"created_by"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// Expired reports whether the token's expiry has passed at now.
func (t *APIToken) Expired(now time.Time) bool {
	return t.ExpiresAt != nil && !now.Before(*t.ExpiresAt)
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
	// Username names the caller wherever a name is shown or recorded (history, initiator, audit actor): the user,
	// or "token:<name>" for an API token. Two tokens may share a name; TokenID tells them apart.
	Username string
	Roles    []string
	Token    bool   // authenticated with an API token
	TokenID  string // the API token's id (Token only)
	Owner    string // the API token's owner (Token only; see APIToken.Owner)
	// AccountID is the user's AccountID, or for an API token its owner's (APIToken.OwnerID).
	AccountID string
}

// Subject identifies the caller uniquely, for what must not be shared between two tokens of the same name
// (idempotency keys): the username, or "token:<id>".
func (p *Principal) Subject() string {
	if p.Token && p.TokenID != "" {
		return "token:" + p.TokenID
	}
	return p.Username
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

// IdempotencyFence ties the work of a request made with an Idempotency-Key to the key, in the transaction that
// does the work: the engine writes one idempotency_commits row with the instance it changed, and a second
// commit for the same key fails the transaction. So a key's work commits at most once, even when a retry takes
// over a claim whose first request seemed dead but was not, and a retry can learn that the work was done.
type IdempotencyFence struct {
	TenantID string
	Username string
	Key      string

	used     atomic.Bool // a transaction carrying the fence committed: later ones of the request carry none
	conflict atomic.Bool // a transaction failed because the key's work was already committed
}

// Use marks the fence spent: a transaction carrying it committed.
func (f *IdempotencyFence) Use() {
	if f != nil {
		f.used.Store(true)
	}
}

// Spent reports whether a transaction of the request committed with the fence.
func (f *IdempotencyFence) Spent() bool { return f != nil && f.used.Load() }

// Conflict records that the key's work had been committed by an earlier request.
func (f *IdempotencyFence) Conflict() { f.conflict.Store(true) }

// Conflicted reports whether a transaction of the request failed on the fence.
func (f *IdempotencyFence) Conflicted() bool { return f != nil && f.conflict.Load() }

type fenceKey struct{}

// WithIdempotencyFence returns a context whose instance writes carry f.
func WithIdempotencyFence(ctx context.Context, f *IdempotencyFence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// IdempotencyFenceFrom returns the fence of the request, or nil.
func IdempotencyFenceFrom(ctx context.Context) *IdempotencyFence {
	f, _ := ctx.Value(fenceKey{}).(*IdempotencyFence)
	return f
}

// ErrIdempotencyCommitted is the error of a write whose Idempotency-Key's work was committed already.
var ErrIdempotencyCommitted = CodedError(ECONFLICT, "idempotency_committed",
	"the work of this Idempotency-Key was committed by an earlier request; send it again to get its result")

// Page asks for one page of a list: at most Limit items after Cursor (opaque to callers).
type Page struct {
	Limit  int
	Cursor string
}

// IdentityStore keeps users, API tokens and departments.
type IdentityStore interface {
	// CreateUser gives the user a new AccountID and returns ECONFLICT user_exists when the username, or one with
	// the same UsernameKey (details.conflicts_with), exists in the tenant.
	CreateUser(ctx context.Context, u *User) error
	// GetUser returns ENOTFOUND when there is no such user.
	GetUser(ctx context.Context, tenant, username string) (*User, error)
	// ListUsers pages through users ordered by username; role filters when non-empty.
	ListUsers(ctx context.Context, tenant, role string, page Page) ([]*User, string, error)
	// UsersWithRole lists the usernames holding role.
	UsersWithRole(ctx context.Context, tenant, role string) ([]string, error)
	CountUsers(ctx context.Context) (int64, error)
	// UpdateUser changes a user in one transaction with its row locked: fn edits the user as stored (its tenant
	// and username cannot change). A change that would leave the tenant without an enabled admin is refused with
	// ECONFLICT last_admin, checked under lock so that two admins demoting each other at once cannot both
	// succeed. ENOTFOUND for an unknown user; fn's error is returned as it is.
	UpdateUser(ctx context.Context, tenant, username string, fn func(u *User) error) (*User, error)
	// DeleteUser deletes a user, their role index rows and the API tokens they own, in one transaction under the
	// same admin lock as UpdateUser: deleting the last enabled admin is ECONFLICT last_admin. ENOTFOUND for an
	// unknown user. Instances, tasks and history keep the name.
	DeleteUser(ctx context.Context, tenant, username string) (*User, error)
	CreateAPIToken(ctx context.Context, t *APIToken) error
	// GetAPITokenByHash returns ENOTFOUND for unknown or revoked tokens (expired ones are returned).
	GetAPITokenByHash(ctx context.Context, hash string) (*APIToken, error)
	// ListAPITokens pages through a tenant's tokens by name, then id.
	ListAPITokens(ctx context.Context, tenant string, page Page) ([]*APIToken, string, error)
	// DeleteAPIToken deletes a token and returns it; ENOTFOUND for an unknown id.
	DeleteAPIToken(ctx context.Context, tenant, id string) (*APIToken, error)
	// TouchAPIToken sets last_used_at to at when it is unset or before olderThan (so concurrent requests of one
	// token write it once).
	TouchAPIToken(ctx context.Context, id string, at, olderThan time.Time) error
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
	// IdempotentCommit returns the instance the key's work changed, when a transaction fenced with the key
	// committed (ok=false otherwise).
	IdempotentCommit(ctx context.Context, tenant, username, key string) (instanceID string, ok bool, err error)
	// TakeOverIdempotent claims anew a key still in flight since before staleBefore (its request died with its
	// process): true when this caller now holds it.
	TakeOverIdempotent(ctx context.Context, tenant, username, key string, staleBefore time.Time) (bool, error)
	// PurgeIdempotent deletes records (and commit records) created before t.
	PurgeIdempotent(ctx context.Context, before time.Time) (int64, error)
}
