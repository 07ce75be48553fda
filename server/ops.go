package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sort"
	"strconv"
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

// serveUI serves the embedded web app: a file when it exists, else index.html (history-mode routing). A file
// built with precompressed twins (<file>.br, <file>.gz, made by the front end's build) is sent as the twin the
// client accepts, brotli first, with Content-Encoding and Vary: Accept-Encoding; hashed assets are cached for a
// year, index.html revalidated every time.
func (s *Server) serveUI(c *gin.Context) {
	p := strings.TrimPrefix(path.Clean("/"+c.Request.URL.Path), "/")
	if p != "" && !strings.HasSuffix(p, ".br") && !strings.HasSuffix(p, ".gz") {
		if st, err := s.statUI(p); err == nil && !st.IsDir() {
			if strings.HasPrefix(p, "assets/") {
				c.Header("Cache-Control", "public, max-age=31536000, immutable")
			}
			s.sendUIFile(c, p)
			return
		}
	}
	if _, err := s.statUI("index.html"); err != nil {
		c.Data(http.StatusOK, "text/html; charset=utf-8", []byte(`<!doctype html><meta charset="utf-8"><title>Halley</title>
<p>Halley is running, but its web UI has not been built into this binary. Run <code>make run</code> (it builds the UI), or use the API at <code>/api/v1</code>.</p>`))
		return
	}
	c.Header("Cache-Control", "no-cache")
	s.sendUIFile(c, "index.html")
}

func (s *Server) statUI(name string) (fs.FileInfo, error) {
	f, err := s.ui.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close() //nolint:errcheck // read-only
	return f.Stat()
}

// precompressed are the encodings the build writes twins for, in the order they are preferred.
var precompressed = []struct{ encoding, suffix string }{{"br", ".br"}, {"gzip", ".gz"}}

// sendUIFile sends name, or its precompressed twin in an encoding the client accepts.
func (s *Server) sendUIFile(c *gin.Context, name string) {
	h := c.Writer.Header()
	h.Set("Content-Type", uiContentType(name))
	send := name
	for _, pc := range precompressed {
		if _, err := s.statUI(name + pc.suffix); err != nil {
			continue
		}
		h.Add("Vary", "Accept-Encoding") // a twin exists: what is sent depends on the header
		if acceptsEncoding(c.GetHeader("Accept-Encoding"), pc.encoding) {
			send = name + pc.suffix
			h.Set("Content-Encoding", pc.encoding)
			break
		}
	}
	f, err := s.ui.Open(send)
	if err != nil {
		fail(c, err)
		return
	}
	defer f.Close() //nolint:errcheck // read-only
	st, err := f.Stat()
	if err != nil {
		fail(c, err)
		return
	}
	// The ETag is the bytes' hash (the embedded files have no modification time): a new build's page is never
	// taken for the old one, and each encoding has its own.
	if tag, err := s.uiETag(send, f); err == nil {
		h.Set("ETag", tag)
	}
	http.ServeContent(c.Writer, c.Request, name, st.ModTime(), f)
}

// uiETag hashes a file of the app once (the files never change while the process runs) and leaves f at its start.
func (s *Server) uiETag(name string, f http.File) (string, error) {
	if v, ok := s.uiETags.Load(name); ok {
		return v.(string), nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	tag := fmt.Sprintf(`"%x"`, h.Sum(nil)[:12])
	s.uiETags.Store(name, tag)
	return tag, nil
}

func uiContentType(name string) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// acceptsEncoding reports whether an Accept-Encoding header allows enc (by name or "*", with a q above 0).
func acceptsEncoding(header, enc string) bool {
	star := false
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		name = strings.ToLower(strings.TrimSpace(name))
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
					q = f
				}
			}
		}
		switch name {
		case enc:
			return q > 0
		case "*":
			star = q > 0
		}
	}
	return star
}
