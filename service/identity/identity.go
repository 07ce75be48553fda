// Package identity manages users, departments and API tokens, signs and checks bearer tokens, bootstraps the
// first admin, and resolves who a principal is for every request.
package identity

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/bcrypt"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/ratelimit"
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
	// Attempts counts failed logins (ratelimit.NewRedis to share them across replicas); nil = in this process.
	Attempts ratelimit.Counter
	// HashConcurrency bounds the bcrypt hashes and comparisons running at once (logins, password changes); a
	// request beyond it queues up to HashQueueWait, then gets 503 busy. Default: the number of CPUs.
	HashConcurrency int
	HashQueueWait   time.Duration // default 2s
	Clock           clock.Clock   // default clock.Real{}
	Logger          *slog.Logger  // default slog.Default()
}

// Login throttling (API.md): after LoginUserLimit failed attempts for one username, or LoginIPLimit from one
// client IP, within LoginWindow, login answers 429 with Retry-After, even for the right password.
const (
	LoginUserLimit = 5
	LoginIPLimit   = 20
	LoginWindow    = 15 * time.Minute
)

// Service is the identity service.
type Service struct {
	store model.IdentityStore
	key   []byte
	ttl   time.Duration
	cost  int
	now   func() time.Time
	log   *slog.Logger
	dummy []byte // a bcrypt hash compared against for unknown users, so that timing does not reveal them
	// jwts caches verified login tokens until their expiry: verifying the HMAC and decoding the claims is ~5 % of
	// the CPU of an approval. Only valid tokens enter; jwtCount bounds it (cleared when full).
	jwts     sync.Map
	jwtCount atomic.Int64
	// people caches the state of users that bearer tokens name (tenant\x00username -> cachedUser), so a request
	// costs no database read while it is fresh (userTTL).
	people    sync.Map
	userTTL   time.Duration
	peopleLen atomic.Int64
	attempts  ratelimit.Counter
	hashSlots chan struct{}
	hashWait  time.Duration
	// touched remembers when this process last wrote an API token's last_used_at (id -> time.Time), so that a
	// busy token costs one write a minute, not one per request.
	touched    sync.Map
	touchedLen atomic.Int64
}

// cachedUser is what Authenticate needs of a user.
type cachedUser struct {
	roles        []string
	disabled     bool
	tokenVersion int64
	accountID    string
	read         time.Time
}

const maxCachedJWTs = 100_000

type cachedToken struct {
	p       *model.Principal
	version int64 // the user's token version the token was signed at
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
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.UserCacheTTL <= 0 {
		opts.UserCacheTTL = 5 * time.Second
	}
	if opts.Attempts == nil {
		opts.Attempts = ratelimit.NewMemory(LoginWindow, 0)
	}
	if opts.HashConcurrency <= 0 {
		opts.HashConcurrency = runtime.GOMAXPROCS(0)
	}
	if opts.HashQueueWait <= 0 {
		opts.HashQueueWait = 2 * time.Second
	}
	dummy, _ := bcrypt.GenerateFromPassword([]byte("not-a-real-password"), opts.BcryptCost)
	return &Service{store: store, key: DeriveKey(opts.Secret, "bearer-token"), ttl: opts.TokenTTL, cost: opts.BcryptCost,
		now: opts.Clock.Now, log: opts.Logger, dummy: dummy, userTTL: opts.UserCacheTTL, attempts: opts.Attempts,
		hashSlots: make(chan struct{}, opts.HashConcurrency), hashWait: opts.HashQueueWait}
}

// errBusy: every bcrypt slot stayed taken for the queue wait. 503, not 429: the server is saturated, not the
// caller over a limit of its own.
func errBusy() error {
	return model.CodedError(model.EUNAVAILABLE, "busy", "too many sign-ins and password changes at once; retry in a second").
		WithDetails(map[string]any{"retry_after": 1})
}

// hashing runs fn (a bcrypt hash or comparison, ~50-100 ms of one CPU each) in one of the HashConcurrency slots,
// after waiting at most HashQueueWait for one.
func (s *Service) hashing(ctx context.Context, fn func()) error {
	select {
	case s.hashSlots <- struct{}{}:
	default:
		t := time.NewTimer(s.hashWait)
		defer t.Stop()
		select {
		case s.hashSlots <- struct{}{}:
		case <-t.C:
			return errBusy()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer func() { <-s.hashSlots }()
	fn()
	return nil
}

// compare is bcrypt.CompareHashAndPassword in a hashing slot: ok reports a match.
func (s *Service) compare(ctx context.Context, hash []byte, password string) (ok bool, err error) {
	err = s.hashing(ctx, func() { ok = bcrypt.CompareHashAndPassword(hash, []byte(password)) == nil })
	return ok, err
}

// hash is bcrypt.GenerateFromPassword in a hashing slot.
func (s *Service) hash(ctx context.Context, password string) (h []byte, err error) {
	if err := s.hashing(ctx, func() { h, err = bcrypt.GenerateFromPassword([]byte(password), s.cost) }); err != nil {
		return nil, err
	}
	return h, err
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
	// Version is the user's token version at signing; a token whose version is not the user's any more is
	// refused (token_revoked). Tokens signed before versions existed carry 0, which users start at.
	Version int64 `json:"tv,omitempty"`
	// Account is the user's AccountID at signing: a token works only for that account, never for a user created
	// later under the same name. Tokens signed before accounts had ids carry none and are refused (token_revoked).
	Account string `json:"aid,omitempty"`
	jwt.RegisteredClaims
}

// Login checks a username and password and returns a signed bearer token; see LoginFrom (without a client IP,
// only the per-username limit applies).
func (s *Service) Login(ctx context.Context, username, password string) (string, *model.User, time.Time, error) {
	return s.LoginFrom(ctx, username, password, "")
}

// LoginFrom checks a username and password sent from client IP ip and returns a signed bearer token.
// EUNAUTHORIZED on bad credentials (the same message whether the user exists or not); EFORBIDDEN user_disabled
// for a disabled user with the right password (so the state of an account is told only to who knows its
// password); ERATELIMITED too_many_attempts (details.retry_after, seconds) while the username or the IP is
// throttled, whatever the password; EUNAVAILABLE busy when no bcrypt slot frees in time.
//
// The attempt is counted before the password is checked and given back when it was right, so that guesses sent
// at the same moment cannot pass the limit together. Every refused or failed attempt is logged (never the
// password).
func (s *Service) LoginFrom(ctx context.Context, username, password, ip string) (string, *model.User, time.Time, error) {
	bad := model.CodedError(model.EUNAUTHORIZED, "invalid_credentials", "invalid username or password")
	if username == "" || password == "" {
		return "", nil, time.Time{}, bad
	}
	userKey := "login:user:" + attemptKey(username)
	rules := []ratelimit.Rule{{Key: userKey, Limit: LoginUserLimit}}
	keys := []string{userKey}
	if ip != "" {
		rules = append(rules, ratelimit.Rule{Key: "login:ip:" + ip, Limit: LoginIPLimit})
		keys = append(keys, "login:ip:"+ip)
	}
	attempt, wait, err := s.attempts.Take(ctx, rules, s.now())
	if err != nil {
		return "", nil, time.Time{}, err
	}
	if wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		s.log.Warn("identity: login refused: too many failed attempts", "username", logName(username), "ip", ip, "retry_after_s", secs)
		return "", nil, time.Time{}, model.CodedError(model.ERATELIMITED, "too_many_attempts",
			"too many failed sign-ins for this account or from this address; retry in %d seconds", secs).WithDetails(map[string]any{"retry_after": secs})
	}
	failed := func(reason string) {
		s.log.Warn("identity: failed login", "username", logName(username), "ip", ip, "reason", reason)
	}
	u, err := s.store.GetUser(ctx, model.DefaultTenant, username)
	if err != nil {
		if !model.IsKind(err, model.ENOTFOUND) {
			return "", nil, time.Time{}, err
		}
		if _, err := s.compare(ctx, s.dummy, password); err != nil {
			return "", nil, time.Time{}, err
		}
		failed("unknown_user")
		return "", nil, time.Time{}, bad
	}
	ok, err := s.compare(ctx, []byte(u.PasswordHash), password)
	if err != nil {
		return "", nil, time.Time{}, err
	}
	if !ok {
		failed("wrong_password")
		return "", nil, time.Time{}, bad
	}
	// The right password: this attempt does not count, and the username's failures are forgotten (the IP's
	// stay: one known password must not clear a spray from the same address).
	if err := s.attempts.Give(ctx, attempt, keys...); err != nil {
		s.log.Error("identity: unable to give a login attempt back", "err", err)
	}
	if err := s.attempts.Reset(ctx, userKey); err != nil {
		s.log.Error("identity: unable to reset failed logins", "err", err)
	}
	if u.Disabled {
		failed("disabled")
		return "", nil, time.Time{}, errUserDisabled(model.EFORBIDDEN)
	}
	tok, exp, err := s.Issue(u)
	return tok, u, exp, err
}

// attemptKey is how a username keys its failed logins: itself when it is a valid username, else a hash (a
// request may send any bytes, of any length).
func attemptKey(username string) string {
	if model.ValidUsername(username) == nil {
		return username
	}
	h := sha256.Sum256([]byte(username))
	return "h:" + hex.EncodeToString(h[:12])
}

// logName is a username as logs show it: quoted by slog, cut to 64 bytes.
func logName(username string) string {
	if len(username) > 64 {
		return username[:64] + "…"
	}
	return username
}

func errUserDisabled(kind string) error {
	return model.CodedError(kind, "user_disabled", "this account is disabled; an administrator can enable it again")
}

// Issue signs a bearer token for the user.
func (s *Service) Issue(u *model.User) (string, time.Time, error) {
	now := s.now()
	exp := now.Add(s.ttl)
	if u.AccountID == "" {
		return "", time.Time{}, fmt.Errorf("identity: user %s has no account id", u.Username)
	}
	c := claims{Tenant: u.TenantID, Roles: u.Roles, Version: u.TokenVersion, Account: u.AccountID, RegisteredClaims: jwt.RegisteredClaims{
		Subject: u.Username, Issuer: "halley", IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(exp),
	}}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.key)
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, exp, nil
}

// Authenticate turns a bearer token (a signed user token or an API token) into a principal.
// EUNAUTHORIZED when it is missing, malformed, expired, revoked or forged, or its user (an API token's owner) was
// deleted or disabled.
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
			return s.current(ctx, &p, ct.version, now)
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
	p := &model.Principal{TenantID: c.Tenant, Username: c.Subject, Roles: c.Roles, AccountID: c.Account}
	if s.jwtCount.Add(1) > maxCachedJWTs {
		s.jwts.Clear()
		s.jwtCount.Store(1)
	}
	cp := *p
	s.jwts.Store(bearer, cachedToken{p: &cp, version: c.Version, expires: c.ExpiresAt.Time})
	return s.current(ctx, p, c.Version, now)
}

// current checks a token's user as it is now — it may have been deleted (and another account created under its
// name) or disabled since the token was signed, or its token version bumped (a new password, new roles) — and
// gives the principal the user's current roles.
func (s *Service) current(ctx context.Context, p *model.Principal, version int64, now time.Time) (*model.Principal, error) {
	if p.AccountID == "" {
		return nil, model.CodedError(model.EUNAUTHORIZED, "token_revoked", "this sign-in was made before accounts had ids; log in again")
	}
	cu, err := s.user(ctx, p.TenantID, p.Username, now)
	if err != nil {
		if model.IsKind(err, model.ENOTFOUND) {
			return nil, model.CodedError(model.EUNAUTHORIZED, "invalid_token", "the user of this token no longer exists")
		}
		return nil, err
	}
	if cu.accountID != p.AccountID {
		// The name is another account's now: the token's account was deleted.
		return nil, model.CodedError(model.EUNAUTHORIZED, "invalid_token", "the user of this token no longer exists")
	}
	if cu.disabled {
		return nil, errUserDisabled(model.EUNAUTHORIZED)
	}
	if cu.tokenVersion != version {
		return nil, model.CodedError(model.EUNAUTHORIZED, "token_revoked", "this sign-in ended: the password or the account changed since; log in again")
	}
	p.Roles = cu.roles
	return p, nil
}

// user returns what Authenticate needs of a user, from the cache while it is fresh (UserCacheTTL): so a request
// costs no database read, and a change made on another replica applies here within UserCacheTTL. ENOTFOUND for
// a user that does not exist.
func (s *Service) user(ctx context.Context, tenant, username string, now time.Time) (cachedUser, error) {
	key := tenant + "\x00" + username
	if v, ok := s.people.Load(key); ok && now.Sub(v.(cachedUser).read) < s.userTTL {
		return v.(cachedUser), nil
	}
	u, err := s.store.GetUser(ctx, tenant, username)
	if err != nil {
		if model.IsKind(err, model.ENOTFOUND) {
			s.forget(tenant, username)
		}
		return cachedUser{}, err
	}
	cu := cachedUser{roles: u.Roles, disabled: u.Disabled, tokenVersion: u.TokenVersion, accountID: u.AccountID, read: now}
	if _, renewed := s.people.Swap(key, cu); !renewed && s.peopleLen.Add(1) > maxCachedJWTs {
		// Bounded like the token cache: only new users count, re-reads replace their entry.
		s.people.Clear()
		s.peopleLen.Store(0)
	}
	return cu, nil
}

// forget drops what Authenticate cached of a user, after a change made through this service: on this replica
// the change applies to the next request; on others within UserCacheTTL.
func (s *Service) forget(tenant, username string) {
	s.people.Delete(tenant + "\x00" + username)
}

// authenticateAPIToken reads the token by its hash on every request: nothing caches API tokens, so a deleted one
// stops working at once on every replica (one indexed read). Its owner's state comes from the user cache.
func (s *Service) authenticateAPIToken(ctx context.Context, bearer string) (*model.Principal, error) {
	now := s.now()
	t, err := s.store.GetAPITokenByHash(ctx, HashToken(bearer))
	if err != nil {
		if model.IsKind(err, model.ENOTFOUND) {
			return nil, model.CodedError(model.EUNAUTHORIZED, "invalid_token", "invalid bearer token")
		}
		return nil, err
	}
	if t.Expired(now) {
		return nil, model.CodedError(model.EUNAUTHORIZED, "token_expired", "this API token expired at %s; an admin can create a new one", t.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if t.Owner != "" {
		cu, err := s.user(ctx, t.TenantID, t.Owner, now)
		if err != nil && !model.IsKind(err, model.ENOTFOUND) {
			return nil, err
		}
		// The owner's account, not only its name: a user created under a deleted owner's name owns nothing.
		if err != nil || cu.accountID != t.OwnerID || cu.disabled || !slices.Contains(cu.roles, model.RoleAdmin) {
			return nil, model.CodedError(model.EUNAUTHORIZED, "token_owner_gone",
				"this API token's owner %s is no longer an enabled admin; an admin can create a new token", t.Owner)
		}
	}
	s.touch(ctx, t, now)
	return &model.Principal{TenantID: t.TenantID, Username: "token:" + t.Name, Roles: t.Roles, Token: true, TokenID: t.ID, Owner: t.Owner, AccountID: t.OwnerID}, nil
}

// touchEvery is how often a token's last_used_at is written at most (per token, per replica).
const touchEvery = time.Minute

// touch records a token's use, at most once a touchEvery: skipped when the row or this process says it was
// written less than that ago. A failed write is logged, not the request's failure.
func (s *Service) touch(ctx context.Context, t *model.APIToken, now time.Time) {
	if t.LastUsedAt != nil && now.Sub(*t.LastUsedAt) < touchEvery {
		return
	}
	if v, ok := s.touched.Load(t.ID); ok && now.Sub(v.(time.Time)) < touchEvery {
		return
	}
	if _, renewed := s.touched.Swap(t.ID, now); !renewed && s.touchedLen.Add(1) > maxCachedJWTs {
		s.touched.Clear()
		s.touchedLen.Store(0)
	}
	if err := s.store.TouchAPIToken(ctx, t.ID, now, now.Add(-touchEvery)); err != nil {
		s.log.Warn("identity: unable to record an API token's use", "token", t.ID, "err", err)
	}
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
	// PasswordChangeRequired: the user must choose a new password at the first sign-in (absent: true, as after
	// an admin's reset); false for a service account whose password nobody types.
	PasswordChangeRequired *bool `json:"password_change_required"`
}

// CreateUser validates and stores a new user. EINVALID for bad fields, ECONFLICT when the username is taken.
func (s *Service) CreateUser(ctx context.Context, tenant string, req CreateUserRequest) (*model.User, error) {
	if err := CheckPassword(req.Password); err != nil {
		return nil, err
	}
	u := &model.User{TenantID: tenant, Username: req.Username, DisplayName: strings.TrimSpace(req.DisplayName),
		Roles: req.Roles, Department: req.Department, Manager: req.Manager, Language: req.Language, Email: req.Email, Mobile: req.Mobile, IMID: req.IMID,
		PasswordChangeRequired: req.PasswordChangeRequired == nil || *req.PasswordChangeRequired}
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
	hash, err := s.hash(ctx, req.Password)
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

// CreateDepartment stores a department. The leader and the parent, when given, must exist.
func (s *Service) CreateDepartment(ctx context.Context, tenant string, d *model.Department) error {
	d.TenantID = tenant
	d.Name = strings.TrimSpace(d.Name)
	if d.Name == "" || len(d.Name) > 128 {
		return model.CodedError(model.EINVALID, "invalid_name", "name is required (at most 128 characters)")
	}
	if err := model.CheckName("name", d.Name, 128); err != nil {
		return err
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
