package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
)

// TestFailMapsUnreachableServicesTo503 checks the one error table for what a database or Redis outage produces.
func TestFailMapsUnreachableServicesTo503(t *testing.T) {
	gin.SetMode(gin.TestMode)
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		name       string
		err        error
		status     int
		code       string
		retryAfter string
	}{
		{"dial refused", dial, http.StatusServiceUnavailable, "unavailable", "1"},
		{"wrapped dial", fmt.Errorf("store: unable to list tasks: %w", dial), http.StatusServiceUnavailable, "unavailable", "1"},
		{"connection lost mid-query", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, http.StatusInternalServerError, "internal", ""},
		{"other", errors.New("invalid connection"), http.StatusInternalServerError, "internal", ""},
		{"domain", model.Errorf(model.ENOTFOUND, "no such task"), http.StatusNotFound, "not_found", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest(http.MethodGet, "/api/v1/tasks", nil)
			fail(c, tc.err)
			var body ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if w.Code != tc.status || body.Error.Code != tc.code || w.Header().Get("Retry-After") != tc.retryAfter {
				t.Fatalf("got %d %q Retry-After %q, want %d %q %q", w.Code, body.Error.Code, w.Header().Get("Retry-After"), tc.status, tc.code, tc.retryAfter)
			}
		})
	}
}

// TestFailCancelledByTheClient: a request its client abandoned is no internal error: 499, no error log line.
func TestFailCancelledByTheClient(t *testing.T) {
	gin.SetMode(gin.TestMode)
	var logged bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	defer slog.SetDefault(prev)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodPost, "/api/v1/users/alice/password", nil).WithContext(ctx)
	fail(c, fmt.Errorf("store: unable to update user alice: %w", context.Canceled))
	if w.Code != statusClientClosedRequest || strings.Contains(logged.String(), "level=ERROR") {
		t.Fatalf("cancelled request: %d, log %q", w.Code, logged.String())
	}

	// The same error while the client still waits (a timeout of Halley's own) stays an internal error.
	w = httptest.NewRecorder()
	c, _ = gin.CreateTestContext(w)
	c.Request = httptest.NewRequest(http.MethodPost, "/api/v1/users/alice/password", nil)
	fail(c, fmt.Errorf("store: %w", context.Canceled))
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("a cancellation of Halley's own: %d", w.Code)
	}
}
