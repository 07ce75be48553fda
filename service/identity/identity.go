// Package identity manages users, departments and API tokens, signs and checks bearer tokens, bootstraps the
// first admin, and resolves who a principal is for every request.
package identity

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"

	"github.com/halley-bpm/halley/model"
)

// APITokenPrefix starts every API token, so that a token is recognisable in a leaked log or a secret scanner.
const APITokenPrefix = "hly_"

// Options configure the service.
type Options struct {
	// Secret signs bearer tokens (a key derived from it; the raw secret is never used directly).
	Secret   []byte
	TokenTTL time.Duration // default 12h
	// BcryptCost defaults to bcrypt.DefaultCost.
	BcryptCost int
	// UserCacheTTL is how long Authenticate trusts what it read of a user (disabled or not, roles) before it reads
	// the user again; so a disabled user's tokens stop working, and role changes apply, within this time on every
	// replica (at once on the replica that made the change). Default 5s.
	UserCacheTTL time.Duration
	Now          func() time.Time
	Logger       *slog.Logger
}

// Service is the identity service.
type Service struct {
	store  model.IdentityStore
	key    []byte
	ttl    time.Duration
	cost   int
	now    func() time.Time
	log    *slog.Logger
	dummy  []byte // a bcrypt hash compared against for unknown users, so that timing does not reveal them
	tokens sync.Map
	// jwts caches verified login tokens until their expiry: verifying the HMAC and decoding the claims is ~5 % of
	// the CPU of an approval. Only valid tokens enter; jwtCount bounds it (cleared when full).
	jwts     sync.Map
	jwtCount atomic.Int64
	// people caches the state of users that bearer tokens name (tenant\x00username -> cachedUser), so a request
	// costs no database read while it is fresh (userTTL).
	people    sync.Map
	userTTL   time.Duration
	peopleLen atomic.Int64
}

// cachedUser is what Authenticate needs of a user.
type cachedUser struct {
	roles    []string
	disabled bool
	read     time.Time
}

const maxCachedJWTs = 100_000

type cachedToken struct {
	p       *model.Principal
	expires time.Time
}

// New returns the service.
func New(store model.IdentityStore, opts Options) *Service {
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = 12 * time.Hour
	}
	if opts.BcryptCost == 0 {
		opts.BcryptCost = bcrypt.DefaultCost
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.UserCacheTTL <= 0 {
		opts.UserCacheTTL = 5 * time.Second
	}
	dummy, _ := bcrypt.GenerateFromPassword([]byte("not-a-real-password"), opts.BcryptCost)
	return &Service{store: store, key: DeriveKey(opts.Secret, "bearer-token"), ttl: opts.TokenTTL, cost: opts.BcryptCost,
		now: opts.Now, log: opts.Logger, dummy: dummy, userTTL: opts.UserCacheTTL}
}

// DeriveKey derives a purpose-specific key from the server secret (HMAC-SHA256(secret, purpose)).
func DeriveKey(secret []byte, purpose string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("halley:" + purpose))
	return m.Sum(nil)
}

type claims struct {
	Tenant string   `json:"tid"`
	Roles  []string `json:"roles"`
	jwt.RegisteredClaims
}

// Login checks a username and password and returns a signed bearer token. EUNAUTHORIZED on bad credentials
// (the same message whether the user exists or not); EFORBIDDEN user_disabled for a disabled user with the right
// password (so the state of an account is told only to who knows its password).
func (s *Service) Login(ctx context.Context, username, password string) (string, *model.User, time.Time, error) {
	bad := model.CodedError(model.EUNAUTHORIZED, "invalid_credentials", "invalid username or password")
	if username == "" || password == "" {
		return "", nil, time.Time{}, bad
	}
	u, err := s.store.GetUser(ctx, model.DefaultTenant, username)
	if err != nil {
		if model.IsKind(err, model.ENOTFOUND) {
			bcrypt.CompareHashAndPassword(s.dummy, []byte(password))
			return "", nil, time.Time{}, bad
		}
		return "", nil, time.Time{}, err
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) != nil {
		return "", nil, time.Time{}, bad
	}
	if u.Disabled {
		return "", nil, time.Time{}, errUserDisabled(model.EFORBIDDEN)
	}
	tok, exp, err := s.Issue(u)
	return tok, u, exp, err
}

func errUserDisabled(kind string) error {
	return model.CodedError(kind, "user_disabled", "this account is disabled; an administrator can enable it again")
}

// Issue signs a bearer token for the user.
func (s *Service) Issue(u *model.User) (string, time.Time, error) {
	now := s.now()
	exp := now.Add(s.ttl)
	c := claims{Tenant: u.TenantID, Roles: u.Roles, RegisteredClaims: jwt.RegisteredClaims{
		Subject: u.Username, Issuer: "halley", IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
	}}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.key)
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, exp, nil
}

// Authenticate turns a bearer token (a signed user token or an API token) into a principal.
// EUNAUTHORIZED when it is missing, malformed, expired, revoked or forged.
func (s *Service) Authenticate(ctx context.Context, bearer string) (*model.Principal, error) {
	if bearer == "" {
		return nil, model.CodedError(model.EUNAUTHORIZED, "missing_token", "missing bearer token: send Authorization: Bearer <token>")
	}
	if strings.HasPrefix(bearer, APITokenPrefix) {
		return s.authenticateAPIToken(ctx, bearer)
	}
	now := s.now()
	if v, ok := s.jwts.Load(bearer); ok {
		if ct := v.(cachedToken); now.Before(ct.expires) {
			p := *ct.p
			return s.current(ctx, &p, now)
		}
		s.jwts.Delete(bearer)
		return nil, model.CodedError(model.EUNAUTHORIZED, "token_expired", "the token has expired: log in again")
	}
	var c claims
	_, err := jwt.ParseWithClaims(bearer, &c, func(*jwt.Token) (any, error) { return s.key, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer("halley"), jwt.WithTimeFunc(s.now), jwt.WithExpirationRequired())
	if err != nil {
		if errors.Is(err, jwt.ErrTokenExpired) {
			return nil, model.CodedError(model.EUNAUTHORIZED, "token_expired", "the token has expired: log in again")
		}
		return nil, model.CodedError(model.EUNAUTHORIZED, "invalid_token", "invalid bearer token")
	}
	p := &model.Principal{TenantID: c.Tenant, Username: c.Subject, Roles: c.Roles}
	if s.jwtCount.Add(1) > maxCachedJWTs {
		s.jwts.Clear()
		s.jwtCount.Store(1)
	}
	cp := *p
	s.jwts.Store(bearer, cachedToken{p: &cp, expires: c.ExpiresAt.Time})
	return s.current(ctx, p, now)
}

// current checks a token's user as it is now (it may have been disabled or deleted since the token was signed)
// and gives the principal the user's current roles. What it reads is cached for userTTL.
func (s *Service) current(ctx context.Context, p *model.Principal, now time.Time) (*model.Principal, error) {
	key := p.TenantID + "\x00" + p.Username
	var cu cachedUser
	if v, ok := s.people.Load(key); ok && now.Sub(v.(cachedUser).read) < s.userTTL {
		cu = v.(cachedUser)
	} else {
		u, err := s.store.GetUser(ctx, p.TenantID, p.Username)
		if err != nil {
			if model.IsKind(err, model.ENOTFOUND) {
				s.forget(p.TenantID, p.Username)
				return nil, model.CodedError(model.EUNAUTHORIZED, "invalid_token", "the user of this token no longer exists")
			}
			return nil, err
		}
		cu = cachedUser{roles: u.Roles, disabled: u.Disabled, read: now}
		if _, renewed := s.people.Swap(key, cu); !renewed && s.peopleLen.Add(1) > maxCachedJWTs {
			// Bounded like the token cache: only new users count, re-reads replace their entry.
			s.people.Clear()
			s.peopleLen.Store(0)
		}
	}
	if cu.disabled {
		return nil, errUserDisabled(model.EUNAUTHORIZED)
	}
	p.Roles = cu.roles
	return p, nil
}

// forget drops what Authenticate cached of a user, after a change made through this service: on this replica
// the change applies to the next request; on others within UserCacheTTL.
func (s *Service) forget(tenant, username string) {
	s.people.Delete(tenant + "\x00" + username)
}

func (s *Service) authenticateAPIToken(ctx context.Context, bearer string) (*model.Principal, error) {
	hash := HashToken(bearer)
	now := s.now()
	if v, ok := s.tokens.Load(hash); ok {
		if ct := v.(cachedToken); now.Before(ct.expires) {
			return ct.p, nil
		}
		s.tokens.Delete(hash)
	}
	t, err := s.store.GetAPITokenByHash(ctx, hash)
	if err != nil {
		if model.IsKind(err, model.ENOTFOUND) {
			return nil, model.CodedError(model.EUNAUTHORIZED, "invalid_token", "invalid bearer token")
		}
		return nil, err
	}
	p := &model.Principal{TenantID: t.TenantID, Username: "token:" + t.Name, Roles: t.Roles, Token: true}
	// A short cache keeps one database read off every request of a busy business system.
	s.tokens.Store(hash, cachedToken{p: p, expires: now.Add(30 * time.Second)})
	return p, nil
}

// HashToken is how API tokens are stored: hex SHA-256 (tokens are 256-bit random, so no salt or slow hash is needed).
func HashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// CreateUserRequest is the body of POST /users.
type CreateUserRequest struct {
	Username    string   `json:"username"`
	Password    string   `json:"password"`
	DisplayName string   `json:"display_name"`
	Roles       []string `json:"roles"`
	Department  string   `json:"department"`
	Manager     string   `json:"manager"`
	Language    string   `json:"language"`
	Email       string   `json:"email"`
	Mobile      string   `json:"mobile"`
	IMID        string   `json:"im_id"`
}

// CreateUser validates and stores a new user. EINVALID for bad fields, ECONFLICT when the username is taken.
func (s *Service) CreateUser(ctx context.Context, tenant string, req CreateUserRequest) (*model.User, error) {
	if err := CheckPassword(req.Password); err != nil {
		return nil, err
	}
	u := &model.User{TenantID: tenant, Username: req.Username, DisplayName: strings.TrimSpace(req.DisplayName),
		Roles: req.Roles, Department: req.Department, Manager: req.Manager, Language: req.Language, Email: req.Email, Mobile: req.Mobile, IMID: req.IMID}
	if u.Roles == nil {
		u.Roles = []string{}
	}
	if err := u.Validate(); err != nil {
		return nil, err
	}
	// Names of synthetic actors (and names that differ from them only in case) would read as them in lists
	// and history: refused.
	if slices.ContainsFunc(model.ReservedUsernames, func(r string) bool { return strings.EqualFold(r, u.Username) }) {
		return nil, model.CodedError(model.EUNPROCESSABLE, "reserved_username", "username %q is reserved for what Halley does by itself", u.Username)
	}
	if u.DisplayName == "" {
		u.DisplayName = u.Username
	}
	if err := u.ValidateProfile(); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(req.Password), s.cost)
	if err != nil {
		return nil, err
	}
	u.PasswordHash = string(hash)
	if err := s.store.CreateUser(ctx, u); err != nil {
		return nil, err
	}
	return u, nil
}

// MinPasswordLength is the shortest password Halley accepts (API.md: 422 weak_password below it).
const MinPasswordLength = 8

// CheckPassword enforces the password policy: at least 8 characters, at most 72 bytes (bcrypt's limit).
// EUNPROCESSABLE weak_password when too short.
func CheckPassword(pw string) error {
	if utf8.RuneCountInString(pw) < MinPasswordLength {
		return model.CodedError(model.EUNPROCESSABLE, "weak_password", "the password must be at least %d characters", MinPasswordLength)
	}
	if len(pw) > 72 {
		return model.CodedError(model.EUNPROCESSABLE, "invalid_password", "the password must be at most 72 bytes")
	}
	return nil
}

// GetUser returns ENOTFOUND for an unknown user.
func (s *Service) GetUser(ctx context.Context, tenant, username string) (*model.User, error) {
	return s.store.GetUser(ctx, tenant, username)
}

// ListUsers pages through users.
func (s *Service) ListUsers(ctx context.Context, tenant, role string, page model.Page) ([]*model.User, string, error) {
	return s.store.ListUsers(ctx, tenant, role, page)
}

// CreateAPIToken makes a token for a business system and returns its plaintext, which is never stored.
func (s *Service) CreateAPIToken(ctx context.Context, actor *model.Principal, name string, roles []string) (string, *model.APIToken, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 128 {
		return "", nil, model.CodedError(model.EINVALID, "invalid_name", "name is required (at most 128 characters)")
	}
	if roles == nil {
		roles = []string{}
	}
	roles, err := model.NormalizeRoles(roles)
	if err != nil {
		return "", nil, err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	plain := APITokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	t := &model.APIToken{ID: uuid.NewString(), TenantID: actor.TenantID, Name: name, Hash: HashToken(plain), Roles: roles, CreatedBy: actor.Username}
	if err := s.store.CreateAPIToken(ctx, t); err != nil {
		return "", nil, err
	}
	s.log.Info("identity: API token created", "name", name, "roles", roles, "by", actor.Username)
	return plain, t, nil
}

// CreateDepartment stores a department. The leader and the parent, when given, must exist.
func (s *Service) CreateDepartment(ctx context.Context, tenant string, d *model.Department) error {
	d.TenantID = tenant
	d.Name = strings.TrimSpace(d.Name)
	if d.Name == "" || len(d.Name) > 128 {
		return model.CodedError(model.EINVALID, "invalid_name", "name is required (at most 128 characters)")
	}
	if d.Leader != "" {
		if _, err := s.store.GetUser(ctx, tenant, d.Leader); err != nil {
			if model.IsKind(err, model.ENOTFOUND) {
				return model.CodedError(model.EINVALID, "unknown_leader", "leader %q is not a user", d.Leader)
			}
			return err
		}
	}
	if d.Parent != "" {
		if _, err := s.store.GetDepartment(ctx, tenant, d.Parent); err != nil {
			if model.IsKind(err, model.ENOTFOUND) {
				return model.CodedError(model.EINVALID, "unknown_parent", "parent department %q does not exist", d.Parent)
			}
			return err
		}
	}
	return s.store.CreateDepartment(ctx, d)
}

// ListDepartments lists the tenant's departments.
func (s *Service) ListDepartments(ctx context.Context, tenant string) ([]*model.Department, error) {
	return s.store.ListDepartments(ctx, tenant)
}

// Bootstrap creates user admin with the given password when no user exists yet. It reports whether it did.
// The default password is allowed here (and only here) so that `make run` works out of the box; the caller
// warns loudly when it was used. mustChange (the default password was used), or a password the policy refuses,
// marks the admin password_change_required: login says so and the UI asks for a new one until it is changed.
func (s *Service) Bootstrap(ctx context.Context, password string, mustChange bool) (bool, error) {
	n, err := s.store.CountUsers(ctx)
	if err != nil || n > 0 {
		return false, err
	}
	if password == "" || len(password) > 72 {
		return false, errors.New("identity: the admin password must be 1 to 72 bytes")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), s.cost)
	if err != nil {
		return false, err
	}
	u := &model.User{TenantID: model.DefaultTenant, Username: BootstrapAdmin, PasswordHash: string(hash), DisplayName: "Administrator",
		Roles: []string{model.RoleAdmin}, PasswordChangeRequired: mustChange || CheckPassword(password) != nil}
	if err := s.store.CreateUser(ctx, u); err != nil {
		if model.IsKind(err, model.ECONFLICT) {
			return false, nil // another replica bootstrapped at the same moment
		}
		return false, err
	}
	return true, nil
}

// BootstrapAdmin is the user Bootstrap creates.
const BootstrapAdmin = "admin"

// BootstrapPasswordUnchanged reports whether the bootstrap admin exists and still has to change the password it
// was created with (the server warns at every start while it does).
func (s *Service) BootstrapPasswordUnchanged(ctx context.Context) bool {
	u, err := s.store.GetUser(ctx, model.DefaultTenant, BootstrapAdmin)
	return err == nil && u.PasswordChangeRequired && !u.Disabled
}
