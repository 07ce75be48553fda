package server

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// readyz pings every dependency; 503 with the failing ones named when one does not answer.
func (s *Server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	names := make([]string, 0, len(s.ready))
	for n := range s.ready {
		names = append(names, n)
	}
	sort.Strings(names)
	checks := map[string]string{}
	ok := true
	for _, n := range names {
		if err := s.ready[n].Ping(ctx); err != nil {
			checks[n] = "error: " + err.Error()
			ok = false
		} else {
			checks[n] = "ok"
		}
	}
	if !ok {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "not ready", "checks": checks})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready", "checks": checks})
}

func isAPIPath(p string) bool {
	return strings.HasPrefix(p, "/api/") || p == "/api" || p == "/healthz" || p == "/readyz" || p == "/metrics"
}

// serveUI serves the embedded web app: a file when it exists, else index.html (history-mode routing).
func (s *Server) serveUI(c *gin.Context) {
	p := strings.TrimPrefix(c.Request.URL.Path, "/")
	if p != "" {
		if f, err := s.ui.Open(p); err == nil {
			st, err := f.Stat()
			_ = f.Close() // read-only: nothing to lose
			if err == nil && !st.IsDir() {
				if strings.HasPrefix(p, "assets/") {
					c.Header("Cache-Control", "public, max-age=31536000, immutable")
				}
				c.FileFromFS(p, s.ui)
				return
			}
		}
	}
	f, err := s.ui.Open("index.html")
	if err != nil {
		c.Data(http.StatusOK, "text/html; charset=utf-8", []byte(`<!doctype html><meta charset="utf-8"><title>Halley</title>
<p>Halley is running, but its web UI has not been built into this binary. Run <code>make run</code> (it builds the UI), or use the API at <code>/api/v1</code>.</p>`))
		return
	}
	defer f.Close() //nolint:errcheck // opened read-only: Close has nothing to flush
	st, _ := f.Stat()
	c.Header("Cache-Control", "no-cache")
	http.ServeContent(c.Writer, c.Request, "index.html", st.ModTime(), f)
}
