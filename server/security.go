package server

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// Response headers that keep a browser from running what Halley serves as anything but what it is. The web app
// runs no inline script: with the policy below, a value from a request's context that found its way into the page
// as markup or a link cannot run (docs/security.md). Styles may be inline: Element Plus, Vant and Mermaid set
// them, and a style cannot run script.
const (
	// uiPolicy is the web app's Content-Security-Policy (frame-ancestors is added per page).
	uiPolicy = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; " +
		"connect-src 'self'; frame-src 'self'; worker-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'self'"
	// apiPolicy is for everything that is not a page: JSON, text, files. Nothing in them may load or run.
	apiPolicy = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; sandbox"
	// framePolicy is the form frame's (formFrame): its scripts (the template's) run in a sandbox without the
	// app's origin (no token, no storage), with no network access, framed by Halley's own pages only.
	framePolicy = "sandbox allow-scripts; default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; " +
		"font-src data:; form-action 'none'; base-uri 'none'; frame-ancestors 'self'"
)

// formFramePath serves the form frame. It is under /api so that the Vite dev server proxies it like the API.
const formFramePath = "/api/v1/ui/form-frame"

// securityHeaders sets, on every answer: nosniff, a strict referrer policy, a Content-Security-Policy and frame
// options. Pages of the web app may be framed by nobody, except the start-form pages (/start/...) by the origins
// of HALLEY_FORM_FRAME_ANCESTORS; the form frame by Halley's pages only.
func securityHeaders(formFrameAncestors []string) gin.HandlerFunc {
	formAncestors := "'none'"
	if len(formFrameAncestors) > 0 {
		formAncestors = strings.Join(formFrameAncestors, " ")
	}
	return func(c *gin.Context) {
		h := c.Writer.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		p := c.Request.URL.Path
		switch {
		case p == formFramePath:
			h.Set("Content-Security-Policy", framePolicy)
			h.Set("X-Frame-Options", "SAMEORIGIN")
		case p == apiDocsPath:
			// The API reference is a page of the web app (its bundled renderer), under /api for proxies' sake.
			h.Set("Content-Security-Policy", uiPolicy+"; frame-ancestors 'none'")
			h.Set("X-Frame-Options", "DENY")
		case isAPIPath(p):
			h.Set("Content-Security-Policy", apiPolicy)
			h.Set("X-Frame-Options", "DENY")
		case strings.HasPrefix(p, "/start/") && len(formFrameAncestors) > 0:
			// X-Frame-Options cannot name other sites; frame-ancestors does (and wins where both are sent).
			h.Set("Content-Security-Policy", uiPolicy+"; frame-ancestors "+formAncestors)
		default:
			h.Set("Content-Security-Policy", uiPolicy+"; frame-ancestors 'none'")
			h.Set("X-Frame-Options", "DENY")
		}
		c.Next()
	}
}

// formFrame is the document an HTML form template runs in (seeds/003 "HTML模版"). The page that shows the form
// loads it in an <iframe sandbox="allow-scripts">, waits for its "ready" message, and posts it the template and
// the context once; the frame then writes them as its document. The template's scripts run under framePolicy:
// inline scripts allowed, but in a unique origin with no network access. (They cannot run in an srcdoc frame any
// more: such a frame inherits the app's policy, which forbids inline scripts.)
func (s *Server) formFrame(c *gin.Context) {
	c.Header("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "text/html; charset=utf-8", []byte(formFrameHTML))
}

const formFrameHTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>Form</title></head><body>
<script>
(function () {
  var done = false;
  window.addEventListener('message', function (ev) {
    if (done || ev.source !== window.parent || !ev.data || typeof ev.data.halleyFormDocument !== 'string') return;
    done = true;
    document.open();
    document.write(ev.data.halleyFormDocument);
    document.close();
  });
  window.parent.postMessage({ halleyFrameReady: true }, '*');
})();
</script>
</body></html>
`
