package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/identity"
)

type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type loginResponse struct {
	Token     string      `json:"token"`
	ExpiresAt time.Time   `json:"expires_at"`
	User      *model.User `json:"user"`
	// PasswordChangeRequired: the user must choose a new password (the bootstrap admin's default one, or one an
	// admin reset); the UI asks for it before anything else.
	PasswordChangeRequired bool `json:"password_change_required"`
}

func (s *Server) login(c *gin.Context) {
	var req loginRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	tok, u, exp, err := s.identity.LoginFrom(c.Request.Context(), req.Username, req.Password, c.ClientIP())
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, loginResponse{Token: tok, ExpiresAt: exp.UTC(), User: u, PasswordChangeRequired: u.PasswordChangeRequired})
}

type meResponse struct {
	Username               string   `json:"username"`
	DisplayName            string   `json:"display_name"`
	Roles                  []string `json:"roles"`
	Department             string   `json:"department"`
	Manager                string   `json:"manager"`
	Tenant                 string   `json:"tenant"`
	Token                  bool     `json:"token"`
	Language               string   `json:"language"`
	Email                  string   `json:"email"`
	Mobile                 string   `json:"mobile"`
	IMID                   string   `json:"im_id"`
	PasswordChangeRequired bool     `json:"password_change_required"`
}

func meOf(u *model.User) meResponse {
	return meResponse{Username: u.Username, DisplayName: u.DisplayName, Roles: u.Roles, Department: u.Department, Manager: u.Manager,
		Tenant: u.TenantID, Language: u.Language, Email: u.Email, Mobile: u.Mobile, IMID: u.IMID, PasswordChangeRequired: u.PasswordChangeRequired}
}

func (s *Server) me(c *gin.Context) {
	p := principal(c)
	if p.Token {
		c.JSON(http.StatusOK, meResponse{Username: p.Username, DisplayName: p.Username, Roles: p.Roles, Tenant: p.TenantID, Token: true})
		return
	}
	u, err := s.identity.GetUser(c.Request.Context(), p.TenantID, p.Username)
	if err != nil {
		if model.IsKind(err, model.ENOTFOUND) {
			err = model.CodedError(model.EUNAUTHORIZED, "invalid_token", "the user of this token no longer exists")
		}
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, meOf(u))
}

// updateMe is PUT /me: the signed-in user's own profile (any subset of its fields).
func (s *Server) updateMe(c *gin.Context) {
	var req identity.ProfileUpdate
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	u, err := s.identity.UpdateProfile(c.Request.Context(), principal(c), req)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, meOf(u))
}

type passwordRequest struct {
	OldPassword string `json:"old_password"`
	NewPassword string `json:"new_password"`
}

// changeMyPassword is POST /me/password: 204; 403 wrong_password; 422 weak_password.
func (s *Server) changeMyPassword(c *gin.Context) {
	var req passwordRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	p := principal(c)
	err := s.record(c, model.AuditUserPassword, p.Username, func(ctx context.Context, _ *model.AuditEntry) error {
		return s.identity.ChangePassword(ctx, p, req.OldPassword, req.NewPassword)
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// updateUser is PATCH /users/{username} (admins): profile, department, manager, roles, disabled.
func (s *Server) updateUser(c *gin.Context) {
	var req identity.UserPatch
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	var u *model.User
	err := s.record(c, model.AuditUserUpdate, c.Param("username"), func(ctx context.Context, _ *model.AuditEntry) (err error) {
		u, err = s.identity.UpdateUser(ctx, principal(c), c.Param("username"), req)
		return err
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, u)
}

type resetPasswordRequest struct {
	NewPassword string `json:"new_password"`
}

// resetPassword is POST /users/{username}/password (admins): 204.
func (s *Server) resetPassword(c *gin.Context) {
	var req resetPasswordRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	err := s.record(c, model.AuditUserPasswordReset, c.Param("username"), func(ctx context.Context, _ *model.AuditEntry) error {
		return s.identity.ResetPassword(ctx, principal(c), c.Param("username"), req.NewPassword)
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// deleteUser is DELETE /users/{username} (admins): 204; 409 last_admin; 422 cannot_delete_self.
func (s *Server) deleteUser(c *gin.Context) {
	err := s.record(c, model.AuditUserDelete, c.Param("username"), func(ctx context.Context, _ *model.AuditEntry) error {
		return s.identity.DeleteUser(ctx, principal(c), c.Param("username"))
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Server) createUser(c *gin.Context) {
	var req identity.CreateUserRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	var u *model.User
	err := s.record(c, model.AuditUserCreate, req.Username, func(ctx context.Context, _ *model.AuditEntry) (err error) {
		u, err = s.identity.CreateUser(ctx, principal(c).TenantID, req)
		return err
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, u)
}

func (s *Server) listUsers(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
		return
	}
	users, next, err := s.identity.ListUsers(c.Request.Context(), principal(c).TenantID, c.Query("role"), pg)
	if err != nil {
		fail(c, err)
		return
	}
	for i, u := range users {
		users[i] = visibleUser(principal(c), u)
	}
	c.JSON(http.StatusOK, List[*model.User]{Items: users, NextCursor: next})
}

// visibleUser is what p may see of u: the directory (names, roles, department, manager, contact details) is
// everyone's, since pickers and approvers need it; whether someone must still change a password is for admins
// and the user.
func visibleUser(p *model.Principal, u *model.User) *model.User {
	if p.IsAdmin() || (!p.Token && p.Username == u.Username) {
		return u
	}
	c := *u
	c.PasswordChangeRequired = false
	return &c
}

func (s *Server) getUser(c *gin.Context) {
	u, err := s.identity.GetUser(c.Request.Context(), principal(c).TenantID, c.Param("username"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, visibleUser(principal(c), u))
}

// tokenResponse is POST /tokens' answer: the token's fields and, this once, its value.
type tokenResponse struct {
	*model.APIToken
	Token string `json:"token"`
}

// createToken is POST /tokens (admins): 201 {"id","token",...}; the value is shown once and never stored.
func (s *Server) createToken(c *gin.Context) {
	var req identity.TokenRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	var (
		plain string
		t     *model.APIToken
	)
	err := s.record(c, model.AuditTokenCreate, req.Name, func(ctx context.Context, _ *model.AuditEntry) (err error) {
		plain, t, err = s.identity.CreateAPIToken(ctx, principal(c), req)
		return err
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, tokenResponse{APIToken: t, Token: plain})
}

// listTokens is GET /tokens (admins): id, name, owner, roles, created, last used, expiry; never the value.
func (s *Server) listTokens(c *gin.Context) {
	pg, err := page(c)
	if err != nil {
		fail(c, err)
		return
	}
	items, next, err := s.identity.ListAPITokens(c.Request.Context(), principal(c).TenantID, pg)
	if err != nil {
		fail(c, err)
		return
	}
	if items == nil {
		items = []*model.APIToken{}
	}
	c.JSON(http.StatusOK, List[*model.APIToken]{Items: items, NextCursor: next})
}

// deleteToken is DELETE /tokens/{id} (admins): 204; the token stops working at once.
func (s *Server) deleteToken(c *gin.Context) {
	err := s.record(c, model.AuditTokenDelete, c.Param("id"), func(ctx context.Context, _ *model.AuditEntry) error {
		return s.identity.DeleteAPIToken(ctx, principal(c), c.Param("id"))
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

type departmentRequest struct {
	Name   string `json:"name"`
	Leader string `json:"leader"`
	Parent string `json:"parent"`
}

func (s *Server) createDepartment(c *gin.Context) {
	var req departmentRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	d := &model.Department{Name: req.Name, Leader: req.Leader, Parent: req.Parent}
	err := s.record(c, model.AuditDepartmentCreate, strings.TrimSpace(req.Name), func(ctx context.Context, _ *model.AuditEntry) error {
		return s.identity.CreateDepartment(ctx, principal(c).TenantID, d)
	})
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, d)
}

func (s *Server) listDepartments(c *gin.Context) {
	ds, err := s.identity.ListDepartments(c.Request.Context(), principal(c).TenantID)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, List[*model.Department]{Items: ds})
}
