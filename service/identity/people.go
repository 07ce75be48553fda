package identity

import (
	"context"
	"strings"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/ratelimit"
)

// ProfileUpdate is the body of PUT /me: what people set about themselves. Absent (null) fields are left as they
// are.
type ProfileUpdate struct {
	DisplayName *string `json:"display_name"`
	Language    *string `json:"language"`
	Email       *string `json:"email"`
	Mobile      *string `json:"mobile"`
	IMID        *string `json:"im_id"`
}

// UserPatch is the body of PATCH /users/{username}: what an admin sets about someone. Absent (null) fields are
// left as they are.
type UserPatch struct {
	DisplayName *string   `json:"display_name"`
	Department  *string   `json:"department"`
	Manager     *string   `json:"manager"`
	Roles       *[]string `json:"roles"`
	Disabled    *bool     `json:"disabled"`
	Email       *string   `json:"email"`
	Mobile      *string   `json:"mobile"`
	IMID        *string   `json:"im_id"`
}

// maxManagerChain bounds the walk up a manager chain when looking for a cycle.
const maxManagerChain = 64

func errNotAUser() error {
	return model.CodedError(model.EFORBIDDEN, "not_a_user", "an API token has no profile or password; sign in as a user")
}

// UpdateProfile applies PUT /me for the signed-in user. EINVALID names a bad field; EFORBIDDEN not_a_user for an
// API token.
func (s *Service) UpdateProfile(ctx context.Context, p *model.Principal, req ProfileUpdate) (*model.User, error) {
	if p.Token {
		return nil, errNotAUser()
	}
	return s.update(ctx, p.TenantID, p.Username, func(u *model.User) error {
		set(&u.DisplayName, req.DisplayName)
		set(&u.Language, req.Language)
		set(&u.Email, req.Email)
		set(&u.Mobile, req.Mobile)
		set(&u.IMID, req.IMID)
		return u.ValidateProfile()
	})
}

// UpdateUser applies PATCH /users/{username} (admins). Each field is checked: the profile fields as in
// UpdateProfile, roles as in CreateUser; a department or manager that changes must exist (EUNPROCESSABLE
// unknown_department, unknown_manager) and a manager may not lead back to the user (EUNPROCESSABLE manager_cycle).
// Disabling or demoting the last enabled admin is ECONFLICT last_admin. ENOTFOUND for an unknown user.
func (s *Service) UpdateUser(ctx context.Context, actor *model.Principal, username string, req UserPatch) (*model.User, error) {
	cur, err := s.store.GetUser(ctx, actor.TenantID, username)
	if err != nil {
		return nil, err
	}
	if req.Department != nil && *req.Department != "" && *req.Department != cur.Department {
		if _, err := s.store.GetDepartment(ctx, actor.TenantID, *req.Department); err != nil {
			if model.IsKind(err, model.ENOTFOUND) {
				return nil, model.CodedError(model.EUNPROCESSABLE, "unknown_department", "department %q does not exist; create it first", *req.Department)
			}
			return nil, err
		}
	}
	if req.Manager != nil && *req.Manager != "" && *req.Manager != cur.Manager {
		if err := s.checkManager(ctx, actor.TenantID, username, *req.Manager); err != nil {
			return nil, err
		}
	}
	var roles []string
	if req.Roles != nil {
		if roles, err = model.NormalizeRoles(*req.Roles); err != nil {
			return nil, err
		}
	}
	u, err := s.update(ctx, actor.TenantID, username, func(u *model.User) error {
		set(&u.DisplayName, req.DisplayName)
		set(&u.Department, req.Department)
		set(&u.Manager, req.Manager)
		set(&u.Email, req.Email)
		set(&u.Mobile, req.Mobile)
		set(&u.IMID, req.IMID)
		if req.Roles != nil {
			u.Roles = roles
		}
		if req.Disabled != nil {
			u.Disabled = *req.Disabled
		}
		u.Department = strings.TrimSpace(u.Department)
		if err := u.Validate(); err != nil {
			return err
		}
		return u.ValidateProfile()
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("identity: user changed", "user", username, "by", actor.Username, "disabled", u.Disabled, "roles", u.Roles)
	return u, nil
}

// checkManager: the manager exists and is not the user or someone the user manages, directly or not. It reads the
// chain outside the update's transaction, so two admins making two people each other's manager at the same moment
// can still create a loop; approver resolution bounds its walks for that reason.
func (s *Service) checkManager(ctx context.Context, tenant, username, manager string) error {
	if err := model.ValidUsername(manager); err != nil {
		return model.CodedError(model.EINVALID, "invalid_manager", "manager: %s", err.(*model.Error).Message)
	}
	next := manager
	for range maxManagerChain {
		if next == username {
			return model.CodedError(model.EUNPROCESSABLE, "manager_cycle", "%s cannot be managed by %s: %s is %s's manager, directly or through others", username, manager, username, manager)
		}
		m, err := s.store.GetUser(ctx, tenant, next)
		if err != nil {
			if !model.IsKind(err, model.ENOTFOUND) {
				return err
			}
			if next == manager {
				return model.CodedError(model.EUNPROCESSABLE, "unknown_manager", "manager %q is not a user", manager)
			}
			return nil // the chain ends at someone who no longer exists
		}
		if m.Manager == "" {
			return nil
		}
		next = m.Manager
	}
	return nil
}

// ChangePassword is POST /me/password: the old password proves it is the user; the new one must pass the policy
// and differ from the old. It clears password_change_required. EFORBIDDEN wrong_password, EUNPROCESSABLE
// weak_password or same_password; ERATELIMITED too_many_attempts (details.retry_after, seconds) after
// LoginUserLimit wrong old passwords for the user within LoginWindow, whatever the password — so a stolen session
// cannot guess its way to the account for good. The attempts count in the same counter as logins (shared through
// Redis when it is configured), under a key of their own: guesses here do not lock the user out of signing in.
// Every wrong or refused attempt is logged.
func (s *Service) ChangePassword(ctx context.Context, p *model.Principal, oldPassword, newPassword string) error {
	if p.Token {
		return errNotAUser()
	}
	key := "password:user:" + attemptKey(p.Username)
	attempt, wait, err := s.attempts.Take(ctx, []ratelimit.Rule{{Key: key, Limit: LoginUserLimit}}, s.now())
	if err != nil {
		return err
	}
	if wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		s.log.Warn("identity: password change refused: too many wrong current passwords", "username", p.Username, "retry_after_s", secs)
		return model.CodedError(model.ERATELIMITED, "too_many_attempts",
			"too many wrong current passwords for this account; retry in %d seconds", secs).WithDetails(map[string]any{"retry_after": secs})
	}
	u, err := s.store.GetUser(ctx, p.TenantID, p.Username)
	if err != nil {
		return err
	}
	ok, err := s.compare(ctx, []byte(u.PasswordHash), oldPassword)
	if err != nil {
		return err
	}
	if !ok {
		s.log.Warn("identity: failed password change", "username", p.Username, "reason", "wrong_password")
		return model.CodedError(model.EFORBIDDEN, "wrong_password", "the current password is wrong")
	}
	// The right password: this attempt does not count and earlier wrong ones are forgotten, as for login.
	if err := s.attempts.Give(ctx, attempt, key); err != nil {
		s.log.Error("identity: unable to give a password-change attempt back", "err", err)
	}
	if err := s.attempts.Reset(ctx, key); err != nil {
		s.log.Error("identity: unable to reset failed password changes", "err", err)
	}
	if err := CheckPassword(newPassword); err != nil {
		return err
	}
	if newPassword == oldPassword {
		return model.CodedError(model.EUNPROCESSABLE, "same_password", "the new password must differ from the current one")
	}
	return s.setPassword(ctx, p.TenantID, p.Username, u.PasswordHash, newPassword, false)
}

// ResetPassword is POST /users/{username}/password (admins). Someone else's password set by an admin is known to
// the admin, so its owner must change it at the next sign-in (password_change_required); an admin resetting
// their own is not asked again.
func (s *Service) ResetPassword(ctx context.Context, actor *model.Principal, username, newPassword string) error {
	if err := CheckPassword(newPassword); err != nil {
		return err
	}
	if err := s.setPassword(ctx, actor.TenantID, username, "", newPassword, actor.Token || actor.Username != username); err != nil {
		return err
	}
	s.log.Info("identity: password reset by an admin", "user", username, "by", actor.Username)
	return nil
}

// setPassword stores a new password hash. With verified set (the hash the old password was checked against), a
// password changed in the meantime is ECONFLICT instead of being overwritten.
func (s *Service) setPassword(ctx context.Context, tenant, username, verified, password string, mustChange bool) error {
	hash, err := s.hash(ctx, password)
	if err != nil {
		return err
	}
	_, err = s.update(ctx, tenant, username, func(u *model.User) error {
		if verified != "" && u.PasswordHash != verified {
			return model.CodedError(model.ECONFLICT, "password_changed", "the password was changed meanwhile; sign in again")
		}
		u.PasswordHash = string(hash)
		u.PasswordChangeRequired = mustChange
		return nil
	})
	return err
}

// DeleteUser is DELETE /users/{username} (admins): the user, their roles and the API tokens they own are deleted;
// instances, tasks and history keep the name. Their tokens stop working at once on this replica and within
// UserCacheTTL on the others. ECONFLICT last_admin for the last enabled admin; EUNPROCESSABLE cannot_delete_self
// (another admin must do it); ENOTFOUND for an unknown user.
func (s *Service) DeleteUser(ctx context.Context, actor *model.Principal, username string) error {
	if !actor.Token && actor.Username == username {
		return model.CodedError(model.EUNPROCESSABLE, "cannot_delete_self", "you cannot delete your own account; another admin can")
	}
	u, err := s.store.DeleteUser(ctx, actor.TenantID, username)
	s.forget(actor.TenantID, username)
	if err != nil {
		return err
	}
	s.log.Info("identity: user deleted", "user", u.Username, "by", actor.Username)
	return nil
}

// update runs a store update and forgets what Authenticate cached of the user, so that this replica applies the
// change (disabled, roles) to the user's next request.
func (s *Service) update(ctx context.Context, tenant, username string, fn func(u *model.User) error) (*model.User, error) {
	u, err := s.store.UpdateUser(ctx, tenant, username, fn)
	s.forget(tenant, username)
	return u, err
}

// set copies *v into *dst when v is not nil (a field present in a request).
func set(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}
