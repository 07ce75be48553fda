package server

import (
	"net/url"
	"strings"

	"github.com/halley-bpm/halley/service/engine"
)

// The routes whose URLs the engine hands out. The router registers these patterns (Server.Handler) and URLs fills
// them, so a route and the URLs that point at it cannot drift apart.
const (
	apiBase           = "/api/v1"
	callbackRoute     = "/callback/:execution_id/:appinst_id"
	pluginResultRoute = "/plugin-runs/:id/result"
)

// URLs builds the engine's URLs (engine.URLs) under Halley's public base URL (HALLEY_PUBLIC_URL) from the router's
// routes. The composition root gives it to the engine.
type URLs struct {
	base string
}

var _ engine.URLs = URLs{}

// NewURLs returns the URL builder for a public base URL, e.g. https://halley.example.com ("" gives paths).
func NewURLs(publicURL string) URLs {
	return URLs{base: strings.TrimRight(publicURL, "/")}
}

// Callback is POST /api/v1/callback/{instance id}/{node instance id}?token=…, which resumes a callback node.
func (u URLs) Callback(instanceID, nodeInstanceID, token string) string {
	return u.base + apiBase + fill(callbackRoute, instanceID, nodeInstanceID) + "?token=" + url.QueryEscape(token)
}

// PluginResult is POST /api/v1/plugin-runs/{run id}/result?token=…, which finishes an async plugin run.
func (u URLs) PluginResult(runID, token string) string {
	return u.base + apiBase + fill(pluginResultRoute, runID) + "?token=" + url.QueryEscape(token)
}

// fill puts values into the :parameters of a route, in order.
func fill(route string, values ...string) string {
	parts := strings.Split(route, "/")
	for i, p := range parts {
		if strings.HasPrefix(p, ":") && len(values) > 0 {
			parts[i], values = url.PathEscape(values[0]), values[1:]
		}
	}
	return strings.Join(parts, "/")
}
