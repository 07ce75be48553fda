package server

import (
	"database/sql"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(reg *prometheus.Registry, dbStats func() sql.DBStats) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "halley_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "halley_http_request_duration_seconds", Help: "HTTP request latency by route and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method", "status"}),
	}
	reg.MustRegister(m.requests, m.latency, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if dbStats != nil {
		gauge := func(name, help string, f func(sql.DBStats) float64) prometheus.Collector {
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(dbStats()) })
		}
		counter := func(name, help string, f func(sql.DBStats) float64) prometheus.Collector {
			return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return f(dbStats()) })
		}
		reg.MustRegister(
			gauge("halley_db_open_connections", "Open database connections.", func(s sql.DBStats) float64 { return float64(s.OpenConnections) }),
			gauge("halley_db_in_use_connections", "Database connections in use.", func(s sql.DBStats) float64 { return float64(s.InUse) }),
			gauge("halley_db_idle_connections", "Idle database connections.", func(s sql.DBStats) float64 { return float64(s.Idle) }),
			gauge("halley_db_max_open_connections", "Pool size.", func(s sql.DBStats) float64 { return float64(s.MaxOpenConnections) }),
			counter("halley_db_wait_count_total", "Times a request waited for a database connection.", func(s sql.DBStats) float64 { return float64(s.WaitCount) }),
			counter("halley_db_wait_seconds_total", "Time spent waiting for a database connection.", func(s sql.DBStats) float64 { return s.WaitDuration.Seconds() }),
		)
	}
	return m
}

// middleware counts and times every request by its route template (never the raw path: ids would explode
// the label set).
func (m *metrics) middleware(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	st := strconv.Itoa(c.Writer.Status())
	method := methodLabel(c.Request.Method)
	m.requests.WithLabelValues(route, method, st).Inc()
	m.latency.WithLabelValues(route, method, st).Observe(time.Since(start).Seconds())
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
	promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{}).ServeHTTP(c.Writer, c.Request)
}

// Registry lets other components register their metrics beside the HTTP ones.
func (s *Server) Registry() *prometheus.Registry { return s.registry }
