package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// etagWriter holds a handler's answer back so that etag can hash it before anything is sent.
type etagWriter struct {
	gin.ResponseWriter
	buf    bytes.Buffer
	status int
}

func (w *etagWriter) WriteHeader(code int)        { w.status = code }
func (w *etagWriter) WriteHeaderNow()             {}
func (w *etagWriter) Write(b []byte) (int, error) { return w.buf.Write(b) }
func (w *etagWriter) WriteString(s string) (int, error) {
	return w.buf.WriteString(s)
}
func (w *etagWriter) Status() int   { return w.status }
func (w *etagWriter) Size() int     { return w.buf.Len() }
func (w *etagWriter) Written() bool { return w.buf.Len() > 0 || w.status != 0 }

// etag makes the lists the UI polls — the inbox (GET /tasks), the CC list, the notifications, the instance lists
// — cheap to poll: a 200 carries a weak ETag of its body and `Cache-Control: private, no-cache`, and a request
// whose If-None-Match names the same ETag gets 304 with no body. A browser revalidates by itself, so the UI polls
// with plain fetches and pays a few bytes while nothing changed (docs/ui.md "Live state").
func etag(c *gin.Context) {
	w := &etagWriter{ResponseWriter: c.Writer}
	c.Writer = w
	c.Next()
	c.Writer = w.ResponseWriter
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	if status != http.StatusOK {
		c.Writer.WriteHeader(status)
		_, _ = c.Writer.Write(w.buf.Bytes())
		return
	}
	sum := sha256.Sum256(w.buf.Bytes())
	tag := `W/"` + hex.EncodeToString(sum[:12]) + `"`
	h := c.Writer.Header()
	h.Set("ETag", tag)
	h.Set("Cache-Control", "private, no-cache")
	if matches(c.GetHeader("If-None-Match"), tag) {
		h.Del("Content-Type")
		h.Del("Content-Length")
		c.Writer.WriteHeader(http.StatusNotModified)
		return
	}
	c.Writer.WriteHeader(status)
	_, _ = c.Writer.Write(w.buf.Bytes())
}

// matches reports whether an If-None-Match header names tag (weak comparison, as RFC 9110 wants for it).
func matches(header, tag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == strings.TrimPrefix(tag, "W/") {
			return true
		}
	}
	return false
}
