package server

import (
	"strconv"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/halley-bpm/halley/service/tracing"
)

// traceRequests makes one server span per request, named by its method and route template ("POST
// /api/v1/instances"; never the raw path, whose ids would make every name unique), a child of the caller's W3C
// traceparent when it sent one. The handlers' work (engine steps, ...) hangs under it through the request's
// context. It is in the chain only when tracing is on; health probes and metric scrapes are not traced.
func traceRequests(t *tracing.Tracing) gin.HandlerFunc {
	tracer, prop := t.Tracer(), t.Propagator()
	return func(c *gin.Context) {
		if p := c.Request.URL.Path; p == "/healthz" || p == "/readyz" || p == "/metrics" {
			c.Next() // probes and scrapes, every few seconds from every prober: a trace of each says nothing
			return
		}
		ctx := prop.Extract(c.Request.Context(), propagation.HeaderCarrier(c.Request.Header))
		route := c.FullPath()
		name := route
		if route == "" {
			name = "unmatched" // a 404: its path is any string a client sent
		}
		method := tracing.MethodName(c.Request.Method)
		ctx, span := tracer.Start(ctx, method+" "+name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", method),
			attribute.String("http.route", route),
			attribute.String("url.path", c.Request.URL.Path), // never the query: it may hold a callback token
			attribute.String("client.address", c.ClientIP()),
			tracing.AttrRequestID.String(c.GetString(ctxRequestID))))
		defer span.End()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
		status := c.Writer.Status()
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, strconv.Itoa(status))
		}
	}
}
