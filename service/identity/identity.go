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
	Now        func() time.Time
	Logger     *slog.Logger
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
	dummy, _ := bcrypt.GenerateFromPassword([]byte("not-a-real-password"), opts.BcryptCost)
	return &Service{store: store, key: DeriveKey(opts.Secret, "bearer-token"), ttl: opts.TokenTTL, cost: opts.BcryptCost,
		now: opts.Now, log: opts.Logger, dummy: dummy}
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
// (the same message whether the user exists or not).
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
	tok, exp, err := s.Issue(u)
	return tok, u, exp, err
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
			return &p, nil
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
	return p, nil
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
}

// CreateUser validates and stores a new user. EINVALID for bad fields, ECONFLICT when the username is taken.
func (s *Service) CreateUser(ctx context.Context, tenant string, req CreateUserRequest) (*model.User, error) {
	if err := CheckPassword(req.Password); err != nil {
		return nil, err
	}
	u := &model.User{TenantID: tenant, Username: req.Username, DisplayName: strings.TrimSpace(req.DisplayName),
		Roles: req.Roles, Department: req.Department, Manager: req.Manager}
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

// CheckPassword enforces the password policy: 8 to 72 bytes (bcrypt's limit).
func CheckPassword(pw string) error {
	if len(pw) < 8 {
		return model.CodedError(model.EINVALID, "weak_password", "password must be at least 8 characters")
	}
	if len(pw) > 72 {
		return model.CodedError(model.EINVALID, "invalid_password", "password must be at most 72 bytes")
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
// warns loudly when it was used.
func (s *Service) Bootstrap(ctx context.Context, password string) (bool, error) {
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
	u := &model.User{TenantID: model.DefaultTenant, Username: "admin", PasswordHash: string(hash), DisplayName: "Administrator", Roles: []string{model.RoleAdmin}}
	if err := s.store.CreateUser(ctx, u); err != nil {
		if model.IsKind(err, model.ECONFLICT) {
			return false, nil // another replica bootstrapped at the same moment
		}
		return false, err
	}
	return true, nil
}
