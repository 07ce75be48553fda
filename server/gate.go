package server

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
)

// Gate is the HTTP handler of a process that is still starting: it listens at once, so that an orchestrator
// sees the process alive while it waits for its database and migrates, and it says so. /healthz answers 200,
// /readyz 503 with the step under way, every other request 503 `starting` (with Retry-After). Open hands all
// requests to the real handler from then on.
type Gate struct {
	h    atomic.Pointer[http.Handler]
	step atomic.Pointer[string]
}

// NewGate returns a closed gate whose /readyz reports step.
func NewGate(step string) *Gate {
	g := &Gate{}
	g.Step(step)
	return g
}

// Step records what the process is doing (shown by /readyz until Open).
func (g *Gate) Step(s string) { g.step.Store(&s) }

// Open serves every request with h from now on.
func (g *Gate) Open(h http.Handler) { g.h.Store(&h) }

func (g *Gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := g.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	switch r.URL.Path {
	case "/healthz":
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
	case "/readyz":
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "starting", "checks": map[string]string{"startup": *g.step.Load()}})
	default:
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(ErrorBody{Error: ErrorDetail{Code: "starting",
			Message: "Halley is starting (" + *g.step.Load() + "); retry in a moment", Details: map[string]any{}}})
	}
}
