// Package server is Halley's HTTP layer (gin): the router, thin handlers that bind a request, call a service and
// map its error through one table, and the middleware for auth, body limits, idempotency, request ids, access
// logs and metrics. The composition root is server/cmd/halley.
package server

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/attachments"
	"github.com/halley-bpm/halley/service/audit"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/notify"
	"github.com/halley-bpm/halley/service/ratelimit"
	"github.com/halley-bpm/halley/service/rules"
	"github.com/halley-bpm/halley/service/subscription"
	"github.com/halley-bpm/halley/service/telemetry"
	"github.com/halley-bpm/halley/service/template"
	"github.com/halley-bpm/halley/service/tracing"
	"github.com/halley-bpm/halley/service/trigger"
)

// Pinger is something /readyz checks.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Deps are what the server needs; the composition root builds them. Identity, Templates, Engine, Triggers,
// Plugins, Idempotency and Audit are required; the rest is optional.
type Deps struct {
	Identity  *identity.Service
	Templates *template.Service
	Engine    *engine.Engine
	Triggers  *trigger.Service
	Plugins   model.PluginStore
	// PluginMaxSize limits plugin uploads (default 10 MiB).
	PluginMaxSize int64
	// PluginSandbox answers GET /plugins/sandbox: what confines plugin runs on this replica (nil: nothing).
	PluginSandbox SandboxReporter
	// Subscriptions serves /subscriptions when set.
	Subscriptions *subscription.Service
	// Attachments serves /attachments and /forms/{key}/attachments, and checks the attachments that starts and
	// decisions refer to, when set.
	Attachments *attachments.Service
	// Notify serves /notifications, /channels, /notification-settings and /notification-deliveries when set.
	Notify *notify.Service
	// Rules serves /delegations (the service the engine asks who decides a node).
	Rules *rules.Service
	// Audit records admin changes, jumps, terminates and trigger overrides, and serves GET /audit.
	Audit *audit.Recorder
	// TriggerLimit limits the API trigger calls (/trigger/...) per client IP (HALLEY_TRIGGER_RATE_LIMIT); nil = no
	// limit.
	TriggerLimit ratelimit.Limiter
	// TrustedProxies are the proxies whose X-Forwarded-For is believed (client IPs for allow-lists and logs).
	TrustedProxies []string
	Idempotency    model.IdempotencyStore
	// IdempotencyLease is how long a key may be in flight before a retry may find out what became of its request
	// (default 1 min; see idempotent).
	IdempotencyLease time.Duration
	// Ready lists the dependencies /readyz pings, by name ("database", "redis", "scheduler").
	Ready   map[string]Pinger
	DBStats func() sql.DBStats
	// Metrics is where the HTTP, pool and readiness metrics are registered and what /metrics serves; a new one
	// when nil.
	Metrics *telemetry.Metrics
	// Tracing, when on, makes a span of every request (a child of the caller's traceparent); nil or off: none.
	Tracing   *tracing.Tracing
	Logger    *slog.Logger
	BodyLimit int64
	// UI serves the web app at / when set (frontend.Dist()).
	UI http.FileSystem
	// FormFrameAncestors are the origins that may frame the start-form pages (HALLEY_FORM_FRAME_ANCESTORS);
	// empty = none.
	FormFrameAncestors []string
}

// Server holds the handlers' dependencies.
type Server struct {
	identity     *identity.Service
	templates    *template.Service
	engine       *engine.Engine
	triggers     *trigger.Service
	plugins      model.PluginStore
	sandbox      SandboxReporter
	pluginMax    int64
	subs         *subscription.Service
	notify       *notify.Service
	attachments  *attachments.Service
	anonUploads  *ratelimit.Buckets
	audit        *audit.Recorder
	rules        *rules.Service
	triggerLimit ratelimit.Limiter
	proxies      []string
	idem         model.IdempotencyStore
	idemLease    time.Duration
	ready        map[string]Pinger
	log          *slog.Logger
	bodyLimit    int64
	metrics      *telemetry.Metrics
	tracing      *tracing.Tracing
	ui           http.FileSystem
	uiETags      sync.Map // path of a file of the app → its ETag
	frameFrom    []string
	router       *gin.Engine
}

// New builds the server and its routes, or says which required dependency is missing.
func New(d Deps) (*Server, error) {
	for _, m := range []struct {
		name    string
		missing bool
	}{
		{"Identity", d.Identity == nil}, {"Templates", d.Templates == nil}, {"Engine", d.Engine == nil}, {"Triggers", d.Triggers == nil},
		{"Plugins", d.Plugins == nil}, {"Idempotency", d.Idempotency == nil},
		{"Audit", d.Audit == nil}, {"Rules", d.Rules == nil},
	} {
		if m.missing {
			return nil, fmt.Errorf("server: %s is required", m.name)
		}
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	d.Logger = slog.New(tracing.LogHandler(d.Logger.Handler())) // request_id, trace_id and span_id on every line
	if d.BodyLimit == 0 {
		d.BodyLimit = 1 << 20
	}
	if d.IdempotencyLease == 0 {
		d.IdempotencyLease = time.Minute
	}
	if d.PluginMaxSize == 0 {
		d.PluginMaxSize = 10 << 20
	}
	if d.Metrics == nil {
		d.Metrics = telemetry.New(telemetry.Options{})
	}
	if d.DBStats != nil {
		d.Metrics.DBStats(d.DBStats)
	}
	checks := make(map[string]telemetry.Pinger, len(d.Ready))
	for n, p := range d.Ready {
		checks[n] = p
	}
	d.Metrics.Readiness(checks)
	s := &Server{identity: d.Identity, templates: d.Templates, engine: d.Engine, triggers: d.Triggers, plugins: d.Plugins, pluginMax: d.PluginMaxSize, sandbox: d.PluginSandbox, subs: d.Subscriptions, notify: d.Notify, proxies: d.TrustedProxies, idem: d.Idempotency, idemLease: d.IdempotencyLease, ready: d.Ready, log: d.Logger, bodyLimit: d.BodyLimit,
		metrics: d.Metrics, tracing: d.Tracing, ui: d.UI, frameFrom: d.FormFrameAncestors, audit: d.Audit, rules: d.Rules,
		triggerLimit: d.TriggerLimit, attachments: d.Attachments, anonUploads: ratelimit.NewBuckets(1)}
	s.router = s.routes()
	return s, nil
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.router }

func (s *Server) routes() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	// Only listed proxies may set the client IP (IP allow-lists of triggers depend on it).
	if err := r.SetTrustedProxies(s.proxies); err != nil {
		s.log.Error("server: bad trusted proxies; trusting none", "err", err)
		_ = r.SetTrustedProxies(nil) // an empty list has nothing to fail on
	}
	r.ContextWithFallback = true
	r.Use(requestID())
	if s.tracing != nil && s.tracing.Enabled() {
		r.Use(traceRequests(s.tracing)) // before the access log, whose line then names the request's trace
	}
	r.Use(securityHeaders(s.frameFrom), s.observe, accessLog(s.log), recoverer())
	r.NoRoute(s.noRoute)
	r.NoMethod(func(c *gin.Context) {
		fail(c, model.CodedError("method_not_allowed", "method_not_allowed", "%s is not allowed on %s", c.Request.Method, c.Request.URL.Path))
	})

	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	r.GET("/metrics", s.metricsHandler)
	r.GET(apiDocsPath, s.apiDocs)

	api := r.Group(apiBase, bodyLimit(func(c *gin.Context) int64 {
		if isPluginUpload(c) {
			return s.pluginMax + 1<<20 // the file plus the multipart envelope; the file itself is checked exactly
		}
		if s.attachments != nil && isAttachmentUpload(c) {
			return s.attachments.MaxSize() + 1<<20 // likewise
		}
		return s.bodyLimit
	}))
	api.POST("/auth/login", s.login)
	api.GET("/schemas/definition.json", s.definitionSchema)
	api.GET("/openapi.json", s.openapi)
	api.GET(strings.TrimPrefix(formFramePath, "/api/v1"), s.formFrame)

	// Callbacks authenticate by the signed token in their URL, or by a bearer token.
	api.POST(callbackRoute, s.authenticateOptional, s.callback)

	// Triggers authenticate as each trigger says; forms may be anonymous when their template allows it.
	api.Any("/trigger/sync/:module/:function", s.limitTriggers, s.triggerSync)
	api.Any("/trigger/async/:module/:function", s.limitTriggers, s.triggerAsync)
	api.GET("/forms/:key", s.authenticateOptional, s.getForm)
	api.POST("/forms/:key/submit", s.authenticateOptional, s.idempotent, s.submitForm)
	if s.attachments != nil {
		api.POST("/forms/:key/attachments", s.authenticateOptional, s.uploadFormAttachment)
	}
	api.POST(pluginResultRoute, s.authenticateOptional, s.pluginResult)

	authed := api.Group("", s.authenticate, s.idempotent)
	authed.GET("/me", s.me)
	authed.PUT("/me", s.updateMe)
	authed.POST("/me/password", s.changeMyPassword)
	authed.GET("/users", s.listUsers)
	authed.GET("/users/:username", s.getUser)
	authed.GET("/departments", s.listDepartments)
	authed.POST("/templates/validate", s.validateTemplate)
	authed.GET("/templates", s.listTemplates)
	authed.GET("/templates/:key", s.getTemplate)
	authed.GET("/templates/:key/versions/:n", s.getVersion)
	authed.GET("/templates/:key/versions/:n/diagram", s.versionDiagram)
	authed.POST("/conditions/evaluate", s.evaluateCondition)
	authed.POST("/instances", s.startInstance)
	authed.POST("/instances/linear", s.startLinear)
	authed.GET("/instances", etag, s.listInstances)
	authed.GET("/instances/:id", s.getInstance)
	authed.GET("/instances/:id/history", s.instanceHistory)
	authed.GET("/instances/:id/diagram", s.instanceDiagram)
	authed.GET("/instances/:id/bookmarks", s.instanceBookmarks)
	authed.POST("/instances/:id/terminate", s.terminate)
	authed.POST("/instances/:id/withdraw", s.withdraw)
	authed.POST("/instances/:id/urge", s.urge)
	authed.POST("/delegations", s.createDelegation)
	authed.GET("/delegations", s.listDelegations)
	authed.DELETE("/delegations/:id", s.deleteDelegation)
	authed.GET("/tasks", etag, s.listTasks)
	authed.GET("/tasks/:id", s.getTask)
	authed.POST("/tasks/:id/approve", s.approve)
	authed.POST("/tasks/:id/reject", s.reject)
	authed.POST("/tasks/:id/transfer", s.transfer)
	authed.POST("/tasks/:id/add-sign", s.addSign)
	authed.POST("/tasks/:id/return", s.returnTask)
	authed.GET("/tasks/:id/return-targets", s.returnTargets)
	authed.POST("/tasks/:id/reclaim", s.reclaim)
	authed.POST("/instances/:id/jump", s.jump)
	authed.POST("/bookmarks/:id/resume", s.resumeBookmark)
	authed.POST("/messages", s.sendMessage)
	authed.GET("/cc", etag, s.listCC)
	authed.POST("/cc/:id/read", s.readCC)
	if s.attachments != nil {
		authed.GET("/attachments", s.attachmentSettings)
		authed.POST("/attachments", s.uploadAttachment)
		authed.GET("/attachments/:id", s.getAttachment)
		authed.HEAD("/attachments/:id", s.getAttachment)
	}
	if s.notify != nil {
		authed.GET("/notifications", etag, s.listNotifications)
		authed.POST("/notifications/read-all", s.readAllNotifications)
		authed.POST("/notifications/:id/read", s.readNotification)
	}

	admin := authed.Group("", adminOnly)
	admin.POST("/users", s.createUser)
	admin.PATCH("/users/:username", s.updateUser)
	admin.DELETE("/users/:username", s.deleteUser)
	admin.POST("/users/:username/password", s.resetPassword)
	admin.POST("/tokens", s.createToken)
	admin.GET("/tokens", s.listTokens)
	admin.DELETE("/tokens/:id", s.deleteToken)
	admin.POST("/departments", s.createDepartment)
	admin.POST("/templates", s.createTemplate)
	admin.PUT("/templates/:key/draft", s.saveDraft)
	admin.POST("/templates/:key/publish", s.publish)
	admin.GET("/templates/:key/trigger-log", s.triggerLog)
	admin.POST("/plugins", s.uploadPlugin)
	admin.GET("/plugins", s.listPlugins)
	admin.GET("/plugins/sandbox", s.pluginSandbox)
	admin.GET("/plugins/:name", s.getPlugin)
	admin.GET("/plugins/:name/runs", s.pluginRuns)
	admin.GET("/plugin-runs/:id/log", s.pluginRunLog)
	admin.GET("/audit", s.listAudit)
	if s.subs != nil {
		admin.POST("/subscriptions", s.createSubscription)
		admin.GET("/subscriptions", s.listSubscriptions)
		admin.GET("/subscriptions/:id", s.getSubscription)
		admin.DELETE("/subscriptions/:id", s.deleteSubscription)
		admin.GET("/subscriptions/:id/deliveries", s.listDeliveries)
	}
	if s.notify != nil {
		admin.POST("/channels", s.createChannel)
		admin.GET("/channels", s.listChannels)
		admin.DELETE("/channels/:name", s.deleteChannel)
		admin.POST("/channels/:name/test", s.testChannel)
		admin.GET("/notification-settings", s.getNotificationSettings)
		admin.PUT("/notification-settings", s.putNotificationSettings)
		admin.GET("/notification-deliveries", s.listNotificationDeliveries)
	}
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
