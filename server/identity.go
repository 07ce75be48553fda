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
	c.JSON(http.StatusOK, loginResponse{Token: tok, ExpiresAt: exp.UTC(), User: u})
}

type meResponse struct {
	Username    string   `json:"username"`
	DisplayName string   `json:"display_name"`
	Roles       []string `json:"roles"`
	Department  string   `json:"department"`
	Manager     string   `json:"manager"`
	Tenant      string   `json:"tenant"`
	Token       bool     `json:"token"`
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
	c.JSON(http.StatusOK, meResponse{Username: u.Username, DisplayName: u.DisplayName, Roles: u.Roles, Department: u.Department, Manager: u.Manager, Tenant: u.TenantID})
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
	c.JSON(http.StatusOK, List[*model.User]{Items: users, NextCursor: next})
}

func (s *Server) getUser(c *gin.Context) {
	u, err := s.identity.GetUser(c.Request.Context(), principal(c).TenantID, c.Param("username"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, u)
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
