package identity

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/halley-bpm/halley/model"
)

// TokenRequest is the body of POST /tokens.
type TokenRequest struct {
	Name  string   `json:"name"`
	Roles []string `json:"roles"`
	// ExpiresAt, when set, is when the token stops working (401 token_expired); it must be in the future.
	ExpiresAt *time.Time `json:"expires_at"`
}

// CreateAPIToken makes a token for a business system and returns its plaintext, which is never stored. Its owner
// is the admin creating it (or, for a token creating one, that token's owner): the token works while its owner is
// an enabled admin. EINVALID invalid_name, invalid_role, invalid_expires_at.
func (s *Service) CreateAPIToken(ctx context.Context, actor *model.Principal, req TokenRequest) (string, *model.APIToken, error) {
	name := strings.TrimSpace(req.Name)
	if name == "" || len(name) > 128 {
		return "", nil, model.CodedError(model.EINVALID, "invalid_name", "name is required (at most 128 characters)")
	}
	if err := model.CheckName("name", name, 128); err != nil {
		return "", nil, err
	}
	roles := req.Roles
	if roles == nil {
		roles = []string{}
	}
	roles, err := model.NormalizeRoles(roles)
	if err != nil {
		return "", nil, err
	}
	var expires *time.Time
	if req.ExpiresAt != nil {
		e := req.ExpiresAt.UTC().Truncate(time.Microsecond) // what the database keeps
		if !e.After(s.now()) {
			return "", nil, model.CodedError(model.EINVALID, "invalid_expires_at", "expires_at must be in the future (got %s)", e.Format(time.RFC3339))
		}
		expires = &e
	}
	// The owner's account id binds the token to that account: a user created later under the same name does
	// not own it (a principal's AccountID is the owner's for a token).
	owner, ownerID := actor.Username, actor.AccountID
	if actor.Token {
		owner = actor.Owner
	} else if ownerID == "" {
		// A principal made in this process rather than read from a token: its account as stored now.
		u, err := s.store.GetUser(ctx, actor.TenantID, actor.Username)
		if err != nil {
			return "", nil, err
		}
		ownerID = u.AccountID
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, err
	}
	plain := APITokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	// Time-ordered ids: a token's id says roughly when it was made, and ids sort like creation.
	t := &model.APIToken{ID: uuid.Must(uuid.NewV7()).String(), TenantID: actor.TenantID, Name: name, Hash: HashToken(plain), Roles: roles,
		Owner: owner, OwnerID: ownerID, CreatedBy: actor.Username, ExpiresAt: expires}
	if err := s.store.CreateAPIToken(ctx, t); err != nil {
		return "", nil, err
	}
	s.log.Info("identity: API token created", "id", t.ID, "name", name, "roles", roles, "owner", owner, "by", actor.Username)
	return plain, t, nil
}

// ListAPITokens pages through the tenant's tokens (never their values).
func (s *Service) ListAPITokens(ctx context.Context, tenant string, page model.Page) ([]*model.APIToken, string, error) {
	return s.store.ListAPITokens(ctx, tenant, page)
}

// DeleteAPIToken deletes a token: the next request made with it fails, on every replica (tokens are not
// cached). ENOTFOUND for an unknown id.
func (s *Service) DeleteAPIToken(ctx context.Context, actor *model.Principal, id string) error {
	if len(id) > 64 {
		return model.Errorf(model.ENOTFOUND, "API token %q not found", id)
	}
	t, err := s.store.DeleteAPIToken(ctx, actor.TenantID, id)
	if err != nil {
		return err
	}
	s.touched.Delete(t.ID)
	s.log.Info("identity: API token deleted", "id", t.ID, "name", t.Name, "by", actor.Username)
	return nil
}
