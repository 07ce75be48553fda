package server

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/tracing"
)

const (
	ctxRequestID = "halley.request_id"
	ctxPrincipal = "halley.principal"
)

var requestIDRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID takes a well-formed X-Request-ID from the caller or makes one, and echoes it in the response.
func requestID() gin.HandlerFunc {
	return func(c *gin.Context) {
		id := c.GetHeader("X-Request-ID")
		if !requestIDRe.MatchString(id) {
			b := make([]byte, 8)
			rand.Read(b)
			id = hex.EncodeToString(b)
		}
		c.Set(ctxRequestID, id)
		c.Header("X-Request-ID", id)
		// In the request's context too: every line logged with it carries the id (tracing.LogHandler).
		c.Request = c.Request.WithContext(tracing.WithRequestID(c.Request.Context(), id))
		c.Next()
	}
}

// accessLog writes one structured line per request (health and metrics probes only at debug level).
func accessLog(lg *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		start := time.Now()
		c.Next()
		level := slog.LevelInfo
		switch p := c.Request.URL.Path; {
		case p == "/healthz" || p == "/readyz" || p == "/metrics":
			level = slog.LevelDebug
		case c.FullPath() == "" && !isAPIPath(p) && c.Writer.Status() < 400:
			level = slog.LevelDebug // the web app's files: one line per asset says nothing an operator needs
		case c.Writer.Status() >= 500:
			level = slog.LevelError
		}
		user := ""
		if p := principal(c); p != nil {
			user = p.Username
		}
		lg.LogAttrs(c.Request.Context(), level, "http", // request_id, trace_id and span_id come from the context
			slog.String("method", c.Request.Method),
			slog.String("route", c.FullPath()),
			slog.String("path", c.Request.URL.Path), // never the query: it may hold a callback token
			slog.Int("status", c.Writer.Status()),
			slog.Duration("duration", time.Since(start)),
			slog.String("ip", c.ClientIP()),
			slog.String("user", user),
			slog.Int("bytes", c.Writer.Size()))
	}
}

// recoverer turns a panic in a handler into a 500 in the error shape and a full log line.
func recoverer() gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, err any) {
		slog.ErrorContext(c.Request.Context(), "panic in handler", "panic", err, "path", c.Request.URL.Path)
		fail(c, model.Errorf(model.EINTERNAL, "internal error; see the server log (request id %s)", c.GetString(ctxRequestID)))
	})
}

// bodyLimit refuses bodies larger than limit(c) bytes: at once when Content-Length says so, else while reading.
func bodyLimit(limit func(c *gin.Context) int64) gin.HandlerFunc {
	return func(c *gin.Context) {
		n := limit(c)
		if c.Request.ContentLength > n {
			fail(c, model.CodedError(model.ETOOLARGE, "body_too_large", "the request body is larger than %d bytes", n))
			return
		}
		if c.Request.Body != nil {
			c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, n)
		}
		c.Next()
	}
}

// principal returns the authenticated caller, or nil.
func principal(c *gin.Context) *model.Principal {
	if v, ok := c.Get(ctxPrincipal); ok {
		return v.(*model.Principal)
	}
	return nil
}

func bearer(c *gin.Context) string {
	h := c.GetHeader("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// authenticate requires a valid bearer token (401 otherwise) and stores the principal.
func (s *Server) authenticate(c *gin.Context) {
	p, err := s.identity.Authenticate(c.Request.Context(), bearer(c))
	if err != nil {
		c.Header("WWW-Authenticate", `Bearer realm="halley"`)
		fail(c, err)
		return
	}
	c.Set(ctxPrincipal, p)
	c.Next()
}

// authenticateOptional stores the principal when a valid bearer token is sent; routes using it decide
// themselves what an anonymous caller may do (signed callbacks, triggers, public forms).
func (s *Server) authenticateOptional(c *gin.Context) {
	if b := bearer(c); b != "" {
		p, err := s.identity.Authenticate(c.Request.Context(), b)
		if err != nil {
			fail(c, err)
			return
		}
		c.Set(ctxPrincipal, p)
	}
	c.Next()
}

// adminOnly requires the admin role (403 otherwise).
func adminOnly(c *gin.Context) {
	if !principal(c).IsAdmin() {
		fail(c, model.CodedError(model.EFORBIDDEN, "admin_required", "this needs the admin role"))
		return
	}
	c.Next()
}

// page reads ?limit= (1..200, default 50) and ?cursor=.
func page(c *gin.Context) (model.Page, error) {
	p := model.Page{Limit: 50, Cursor: c.Query("cursor")}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			return p, model.CodedError(model.EINVALID, "invalid_limit", "limit must be a whole number from 1 to 200 (got %q)", v)
		}
		p.Limit = n
	}
	if len(p.Cursor) > 512 {
		return p, model.CodedError(model.EINVALID, "invalid_cursor", "cursor is malformed")
	}
	return p, nil
}

// List is the paginated list shape of API.md.
type List[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}
