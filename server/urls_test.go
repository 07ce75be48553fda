package server_test

import (
	"strings"
	"testing"

	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// The URLs the engine hands out are built from the router's own routes: under the public base URL, with the
// token as a query parameter, and each one reaches its handler (not route_not_found).
func TestURLsReachTheirRoutes(t *testing.T) {
	u := server.NewURLs("https://halley.example.com/")
	if got, want := u.Callback("i-1", "i-1.n2", "a+b/c"), "https://halley.example.com/api/v1/callback/i-1/i-1.n2?token=a%2Bb%2Fc"; got != want {
		t.Errorf("callback URL %q, want %q", got, want)
	}
	if got, want := u.PluginResult("i-1.r3", "tok"), "https://halley.example.com/api/v1/plugin-runs/i-1.r3/result?token=tok"; got != want {
		t.Errorf("plugin result URL %q, want %q", got, want)
	}

	e := newEnv(t, storetest.Open(t, store.SQLite), nil)
	paths := server.NewURLs("")
	// Unknown waits and runs, forged tokens: what the handlers answer, not the router's 404.
	assertError(t, e.do("POST", paths.Callback("i-1", "i-1.n2", "forged"), "", M{}, nil), 401, "invalid_callback_token")
	assertError(t, e.do("POST", paths.PluginResult("i-1.r3", "forged"), "", M{"status": "succeeded"}, nil), 401, "invalid_result_token")
	if cb := paths.Callback("i-1", "i-1.n2", "t"); !strings.HasPrefix(cb, "/api/v1/callback/") {
		t.Errorf("a URL without a public base is a path: %q", cb)
	}
}
