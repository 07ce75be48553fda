package server

import (
	"net/http"
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
	tok, u, exp, err := s.identity.Login(c.Request.Context(), req.Username, req.Password)
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
	if err := s.identity.ChangePassword(c.Request.Context(), principal(c), req.OldPassword, req.NewPassword); err != nil {
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
	u, err := s.identity.UpdateUser(c.Request.Context(), principal(c), c.Param("username"), req)
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
	if err := s.identity.ResetPassword(c.Request.Context(), principal(c), c.Param("username"), req.NewPassword); err != nil {
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
	u, err := s.identity.CreateUser(c.Request.Context(), principal(c).TenantID, req)
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

type tokenRequest struct {
	Name  string   `json:"name"`
	Roles []string `json:"roles"`
}

type tokenResponse struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Roles     []string  `json:"roles"`
	Token     string    `json:"token"`
	CreatedAt time.Time `json:"created_at"`
}

func (s *Server) createToken(c *gin.Context) {
	var req tokenRequest
	if err := bindJSON(c, &req); err != nil {
		fail(c, err)
		return
	}
	plain, t, err := s.identity.CreateAPIToken(c.Request.Context(), principal(c), req.Name, req.Roles)
	if err != nil {
		fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, tokenResponse{ID: t.ID, Name: t.Name, Roles: t.Roles, Token: plain, CreatedAt: t.CreatedAt})
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
	if err := s.identity.CreateDepartment(c.Request.Context(), principal(c).TenantID, d); err != nil {
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
