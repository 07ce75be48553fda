package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
)

// IdempotencyWindow is how long a key's first response is replayed.
const IdempotencyWindow = 24 * time.Hour

// captureWriter keeps a copy of what a handler writes so that it can be stored for replays.
type captureWriter struct {
	gin.ResponseWriter
	buf bytes.Buffer
}

func (w *captureWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *captureWriter) WriteString(s string) (int, error) {
	w.buf.WriteString(s)
	return w.ResponseWriter.WriteString(s)
}

// idempotent implements the Idempotency-Key header of API.md for POSTs: the first response (status < 500) for a
// (user, key) is stored and replayed for 24 h when the same key comes with the same method, path and body; the
// same key with a different request is 422, and while the first request is still running it is 409.
func (s *Server) idempotent(c *gin.Context) {
	key := c.GetHeader("Idempotency-Key")
	if key == "" || c.Request.Method != http.MethodPost {
		c.Next()
		return
	}
	if len(key) > 255 {
		fail(c, model.CodedError(model.EINVALID, "invalid_idempotency_key", "Idempotency-Key must be at most 255 characters"))
		return
	}
	var body []byte
	if c.Request.Body != nil {
		b, err := io.ReadAll(c.Request.Body)
		if err != nil {
			fail(c, decodeError(err))
			return
		}
		body = b
		c.Request.Body = io.NopCloser(bytes.NewReader(b))
	}
	h := sha256.New()
	io.WriteString(h, c.Request.Method+" "+c.Request.URL.RequestURI()+"\n")
	h.Write(body)
	user, tenant := "anonymous:"+c.ClientIP(), model.DefaultTenant
	if p := principal(c); p != nil {
		user, tenant = p.Username, p.TenantID
	}
	rec := &model.IdempotencyRecord{TenantID: tenant, Username: user, Key: key, RequestHash: hex.EncodeToString(h.Sum(nil))}
	ctx := c.Request.Context()
	old, claimed, err := s.idem.BeginIdempotent(ctx, rec, time.Now().Add(-IdempotencyWindow))
	if err != nil {
		fail(c, err)
		return
	}
	if !claimed {
		switch {
		case old.RequestHash != rec.RequestHash:
			fail(c, model.CodedError(model.EUNPROCESSABLE, "idempotency_key_reused", "this Idempotency-Key was used for a different request in the last 24 h"))
		case old.StatusCode == 0:
			fail(c, model.CodedError(model.ECONFLICT, "idempotency_in_progress", "a request with this Idempotency-Key is still being processed; retry later"))
		default:
			c.Header("Idempotent-Replayed", "true")
			c.Data(old.StatusCode, "application/json; charset=utf-8", old.Body)
			c.Abort()
		}
		return
	}
	cw := &captureWriter{ResponseWriter: c.Writer}
	c.Writer = cw
	c.Next()
	// Store with a fresh context: the client may have gone, the record must still be finished.
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if st := cw.Status(); st >= 500 {
		if err := s.idem.AbandonIdempotent(bg, tenant, user, key); err != nil {
			slog.Error("idempotency: unable to release key", "err", err)
		}
		return
	}
	rec.StatusCode, rec.Body = cw.Status(), cw.buf.Bytes()
	if err := s.idem.FinishIdempotent(bg, rec); err != nil {
		slog.Error("idempotency: unable to store response", "err", err)
	}
}
