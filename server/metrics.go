package server

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// observe counts and times every request by its route template (never the raw path: ids would explode the
// label set). The metrics themselves live in service/telemetry.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	s.metrics.HTTPRequest(route, methodLabel(c.Request.Method), c.Writer.Status(), time.Since(start))
}

// methodLabel bounds the method label: HTTP allows any token as a method (and API triggers accept ANY), so a
// client sending FOO1, FOO2... would otherwise grow a time series per name. The standard methods keep their
// name; every other one is "other".
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions,
		http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

func (s *Server) metricsHandler(c *gin.Context) {
	promhttp.HandlerFor(s.metrics.Registry(), promhttp.HandlerOpts{}).ServeHTTP(c.Writer, c.Request)
}
