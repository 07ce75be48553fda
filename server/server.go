// Package server is Halley's HTTP layer (gin): the router, thin handlers that bind a request, call a service and
// map its error through one table, and the middleware for auth, body limits, idempotency, request ids, access
// logs and metrics. The composition root is server/cmd/halley.
package server

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/identity"
)

// Pinger is something /readyz checks.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Deps are what the server needs; the composition root builds them.
type Deps struct {
	Identity    *identity.Service
	Idempotency model.IdempotencyStore
	// Ready lists the dependencies /readyz pings, by name ("database", "redis", "scheduler").
	Ready     map[string]Pinger
	DBStats   func() sql.DBStats
	Logger    *slog.Logger
	BodyLimit int64
	// UI serves the web app at / when set (frontend.Dist()).
	UI http.FileSystem
}

// Server holds the handlers' dependencies.
type Server struct {
	identity  *identity.Service
	idem      model.IdempotencyStore
	ready     map[string]Pinger
	log       *slog.Logger
	bodyLimit int64
	metrics   *metrics
	registry  *prometheus.Registry
	ui        http.FileSystem
	engine    *gin.Engine
}

// New builds the server and its routes.
func New(d Deps) *Server {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.BodyLimit == 0 {
		d.BodyLimit = 1 << 20
	}
	reg := prometheus.NewRegistry()
	s := &Server{identity: d.Identity, idem: d.Idempotency, ready: d.Ready, log: d.Logger, bodyLimit: d.BodyLimit,
		registry: reg, metrics: newMetrics(reg, d.DBStats), ui: d.UI}
	s.engine = s.routes()
	return s
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.engine }

func (s *Server) routes() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.ContextWithFallback = true
	r.Use(requestID(), s.metrics.middleware, accessLog(s.log), recoverer())
	r.NoRoute(s.noRoute)
	r.NoMethod(func(c *gin.Context) {
		fail(c, model.CodedError("method_not_allowed", "method_not_allowed", "%s is not allowed on %s", c.Request.Method, c.Request.URL.Path))
	})

	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	r.GET("/metrics", s.metricsHandler)

	api := r.Group("/api/v1", bodyLimit(func(*gin.Context) int64 { return s.bodyLimit }))
	api.POST("/auth/login", s.login)

	authed := api.Group("", s.authenticate, s.idempotent)
	authed.GET("/me", s.me)
	authed.GET("/users", s.listUsers)
	authed.GET("/users/:username", s.getUser)
	authed.GET("/departments", s.listDepartments)

	admin := authed.Group("", adminOnly)
	admin.POST("/users", s.createUser)
	admin.POST("/tokens", s.createToken)
	admin.POST("/departments", s.createDepartment)
	return r
}

func (s *Server) noRoute(c *gin.Context) {
	p := c.Request.URL.Path
	if s.ui != nil && (c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead) && !isAPIPath(p) {
		s.serveUI(c)
		return
	}
	fail(c, model.CodedError(model.ENOTFOUND, "route_not_found", "no route %s %s", c.Request.Method, p))
}
