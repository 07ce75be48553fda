package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
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
//
// A request whose process dies before its response is stored leaves its key in flight. Once the key has been in
// flight for longer than the lease (no request runs that long), a retry finds out what became of it, for the
// routes that change an instance (fencedRoutes): their work is written with the key in the same transaction
// (model.IdempotencyFence), so either it committed — the retry gets the result, rebuilt from the instance — or it
// did not, and the retry takes the key over and runs. The fence keeps the work from committing twice even if the
// first request was only slow. Other routes answer 409 idempotency_outcome_unknown after the lease.
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
	h.Write([]byte(c.Request.Method + " " + c.Request.URL.RequestURI() + "\n")) // a hash's Write never fails
	h.Write(body)
	user, tenant := "anonymous:"+c.ClientIP(), model.DefaultTenant
	if p := principal(c); p != nil {
		user, tenant = p.Subject(), p.TenantID // two API tokens of one name keep their keys apart
	}
	rec := &model.IdempotencyRecord{TenantID: tenant, Username: user, Key: key, RequestHash: hex.EncodeToString(h.Sum(nil))}
	ctx := c.Request.Context()
	old, claimed, err := s.idem.BeginIdempotent(ctx, rec, time.Now().Add(-IdempotencyWindow))
	if err != nil {
		fail(c, err)
		return
	}
	rebuild, fenced := fencedRoutes[c.FullPath()]
	if !claimed {
		switch {
		case old.RequestHash != rec.RequestHash:
			fail(c, model.CodedError(model.EUNPROCESSABLE, "idempotency_key_reused", "this Idempotency-Key was used for a different request in the last 24 h"))
			return
		case old.StatusCode != 0:
			c.Header("Idempotent-Replayed", "true")
			c.Data(old.StatusCode, "application/json; charset=utf-8", old.Body)
			c.Abort()
			return
		case time.Since(old.CreatedAt) < s.idemLease:
			fail(c, model.CodedError(model.ECONFLICT, "idempotency_in_progress", "a request with this Idempotency-Key is still being processed; retry later"))
			return
		case !fenced:
			fail(c, model.CodedError(model.ECONFLICT, "idempotency_outcome_unknown",
				"the first request with this Idempotency-Key ended without an answer (its server stopped) and whether it took effect is unknown; check before sending it with a new key"))
			return
		}
		// In flight past the lease: its request died. Did its work commit?
		inst, done, err := s.idem.IdempotentCommit(ctx, tenant, user, key)
		if err != nil {
			fail(c, err)
			return
		}
		if done {
			status, b, err := s.recoverAnswer(c, rebuild, inst)
			if err != nil {
				fail(c, err)
				return
			}
			rec.StatusCode, rec.Body = status, b
			if err := s.idem.FinishIdempotent(ctx, rec); err != nil {
				s.log.ErrorContext(ctx, "idempotency: unable to store response", "err", err)
			}
			c.Header("Idempotent-Replayed", "true")
			c.Data(status, "application/json; charset=utf-8", b)
			c.Abort()
			return
		}
		took, err := s.idem.TakeOverIdempotent(ctx, tenant, user, key, time.Now().Add(-s.idemLease))
		if err != nil {
			fail(c, err)
			return
		}
		if !took { // another retry took it first
			fail(c, model.CodedError(model.ECONFLICT, "idempotency_in_progress", "a request with this Idempotency-Key is still being processed; retry later"))
			return
		}
		s.log.InfoContext(ctx, "idempotency: took over a key whose request ended without an answer and committed nothing", "key", key, "user", user,
			"path", c.FullPath())
	}
	var fence *model.IdempotencyFence
	if fenced {
		fence = &model.IdempotencyFence{TenantID: tenant, Username: user, Key: key}
		c.Request = c.Request.WithContext(model.WithIdempotencyFence(ctx, fence))
	}
	cw := &captureWriter{ResponseWriter: c.Writer}
	c.Writer = cw
	c.Next()
	// Store with a fresh context: the client may have gone, the record must still be finished.
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	switch st := cw.Status(); {
	case fence.Conflicted():
		// The key's work had been committed by a request thought dead (this client was told to send it again):
		// store that work's result as the key's answer.
		c.Request = c.Request.WithContext(bg)
		inst, ok, err := s.idem.IdempotentCommit(bg, tenant, user, key)
		if err != nil || !ok {
			break // the key stays in flight: a retry after the lease looks again
		}
		if status, b, err := s.recoverAnswer(c, rebuild, inst); err == nil {
			rec.StatusCode, rec.Body = status, b
			if err := s.idem.FinishIdempotent(bg, rec); err != nil {
				s.log.ErrorContext(ctx, "idempotency: unable to store response", "err", err)
			}
		}
	case st >= 500 || st == statusClientClosedRequest:
		// Whether the work was done is not known from here (a fenced step's retry finds out): the key is released.
		if err := s.idem.AbandonIdempotent(bg, tenant, user, key); err != nil {
			s.log.ErrorContext(ctx, "idempotency: unable to release key", "err", err)
		}
	default:
		rec.StatusCode, rec.Body = st, cw.buf.Bytes()
		if err := s.idem.FinishIdempotent(bg, rec); err != nil {
			s.log.ErrorContext(ctx, "idempotency: unable to store response", "err", err)
		}
	}
}

// An answerRebuilder rebuilds the answer to a request of its route whose work committed on instanceID but whose
// response was lost with its process: the status and value the handler answers, from the instance as it is now.
type answerRebuilder func(s *Server, c *gin.Context, instanceID string) (int, any, error)

// fencedRoutes are the routes whose work is one instance change, fenced with the request's Idempotency-Key, with
// how each rebuilds a lost answer (nil: it cannot, and answers 409 idempotency_response_lost naming the instance).
var fencedRoutes = map[string]answerRebuilder{
	"/api/v1/instances":               recoverInstance(http.StatusCreated),
	"/api/v1/instances/linear":        recoverInstance(http.StatusCreated),
	"/api/v1/forms/:key/submit":       recoverInstance(http.StatusCreated),
	"/api/v1/instances/:id/terminate": recoverInstance(http.StatusOK),
	"/api/v1/instances/:id/withdraw":  recoverInstance(http.StatusOK),
	"/api/v1/instances/:id/jump":      recoverInstance(http.StatusOK),
	"/api/v1/tasks/:id/return":        recoverInstance(http.StatusOK),
	"/api/v1/bookmarks/:id/resume":    recoverInstance(http.StatusOK),
	"/api/v1/tasks/:id/approve":       recoverDecided,
	"/api/v1/tasks/:id/reject":        recoverDecided,
	"/api/v1/tasks/:id/transfer":      nil,
	"/api/v1/tasks/:id/add-sign":      nil,
	"/api/v1/tasks/:id/reclaim":       nil,
}

// recoverInstance answers the instance (as GET /instances/{id} shows it to the caller; anonymous form
// submitters, who cannot read it, get the view their submit would have answered).
func recoverInstance(status int) answerRebuilder {
	return func(s *Server, c *gin.Context, id string) (int, any, error) {
		ctx := c.Request.Context()
		if p := principal(c); p != nil {
			v, err := s.engine.Get(ctx, p, id)
			return status, v, err
		}
		v, err := s.engine.StartedView(ctx, model.DefaultTenant, id)
		return status, v, err
	}
}

// recoverDecided answers the decided task and the caller's tasks of its instance pending now.
func recoverDecided(s *Server, c *gin.Context, id string) (int, any, error) {
	v, err := s.engine.DecidedView(c.Request.Context(), principal(c), c.Param("id"), id)
	return http.StatusOK, v, err
}

// recoverAnswer rebuilds the answer of a request whose work committed on instanceID.
func (s *Server) recoverAnswer(c *gin.Context, r answerRebuilder, instanceID string) (int, []byte, error) {
	if r == nil {
		e := model.CodedError(model.ECONFLICT, "idempotency_response_lost",
			"the work of this Idempotency-Key was done, but its answer was lost when its server stopped; read instance %s", instanceID)
		b, err := json.Marshal(ErrorBody{Error: ErrorDetail{Code: e.Code, Message: e.Message, Details: map[string]any{"instance_id": instanceID}}})
		return http.StatusConflict, b, err
	}
	status, v, err := r(s, c, instanceID)
	if err != nil {
		return 0, nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return 0, nil, fmt.Errorf("server: unable to encode a rebuilt answer: %w", err)
	}
	return status, b, nil
}
