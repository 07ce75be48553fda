// Package tracing is Halley's OpenTelemetry tracing: one tracer provider, built by the composition root, that
// exports spans over OTLP/HTTP when HALLEY_OTLP_ENDPOINT is set and is a no-op otherwise. Like service/telemetry it
// hangs on the services' seams — the engine's StepObserver, the executor's OnComplete, a scheduler.Handler wrapper,
// a wrapper of the outbound transport — and a gin middleware in server/ makes the HTTP spans; no package keeps a
// tracer global.
//
// Span names are bounded (a route template, a step's action, fixed words); ids are attributes only. When tracing is
// off the composition root hangs nothing on the seams, so a step costs nothing more than without this package.
//
// The package also carries the request id in a context (WithRequestID) and wraps a slog handler (LogHandler) so
// that every line logged with a context carries request_id, trace_id and span_id.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every span Halley makes.
const ScopeName = "github.com/halley-bpm/halley"

// Options configure New.
type Options struct {
	// Endpoint is HALLEY_OTLP_ENDPOINT: the collector's OTLP/HTTP base URL (http://collector:4318); spans are
	// posted to <Endpoint>/v1/traces unless the URL has a path of its own. Empty: tracing is off.
	Endpoint string
	// Version is the service.version of the resource.
	Version string
	// Exporter, when set, replaces the OTLP exporter and spans are handed to it synchronously (tests); Endpoint is
	// then ignored.
	Exporter sdktrace.SpanExporter
}

// Tracing is the process's tracer provider and propagator.
type Tracing struct {
	provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider // nil when off
	exporter sdktrace.SpanExporter    // nil when off
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
}

// Off returns tracing that records nothing: a no-op provider, no exporter.
func Off() *Tracing {
	p := noop.NewTracerProvider()
	return &Tracing{provider: p, tracer: p.Tracer(ScopeName), prop: propagation.TraceContext{}}
}

// New returns the tracing of opts: off (Off) without an endpoint, else an SDK provider batching spans to an OTLP/HTTP
// exporter. The standard OTEL_* variables apply where the SDK reads them: OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES (the service name defaults to "halley"), OTEL_TRACES_SAMPLER(_ARG), the span limits,
// the batch processor's OTEL_BSP_*, and the exporter's OTEL_EXPORTER_OTLP_(TRACES_)HEADERS, _TIMEOUT,
// _COMPRESSION and _CERTIFICATE; OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, when set, wins over the endpoint.
func New(ctx context.Context, opts Options) (*Tracing, error) {
	if opts.Exporter == nil && opts.Endpoint == "" {
		return Off(), nil
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("halley"), semconv.ServiceVersion(opts.Version)),
		resource.WithFromEnv(), // after the defaults: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(),
		resource.WithHost(),
		resource.WithProcessPID(),
	)
	if err != nil && res == nil { // a partial resource comes with an error worth no failed start
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	t := &Tracing{prop: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})}
	var processor sdktrace.SpanProcessor
	if opts.Exporter != nil {
		t.exporter = opts.Exporter
		processor = sdktrace.NewSimpleSpanProcessor(opts.Exporter)
	} else {
		exp, err := otlpExporter(ctx, opts.Endpoint)
		if err != nil {
			return nil, err
		}
		t.exporter = exp
		processor = sdktrace.NewBatchSpanProcessor(exp)
	}
	// The sampler is the SDK's default (parent-based, always on) unless OTEL_TRACES_SAMPLER says otherwise: the
	// provider reads it itself.
	t.sdk = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(processor))
	t.provider = t.sdk
	t.tracer = t.sdk.Tracer(ScopeName)
	return t, nil
}

// otlpExporter posts spans as OTLP/HTTP protobuf to endpoint (a base URL, like OTEL_EXPORTER_OTLP_ENDPOINT).
func otlpExporter(ctx context.Context, endpoint string) (sdktrace.SpanExporter, error) {
	var opts []otlptracehttp.Option
	if os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		u, err := EndpointURL(endpoint)
		if err != nil {
			return nil, err
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	return exp, nil
}

// EndpointURL is where spans are posted for HALLEY_OTLP_ENDPOINT: <endpoint>/v1/traces for a base URL, the URL
// itself when it has a path.
func EndpointURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("tracing: the OTLP endpoint must be an http:// or https:// URL, e.g. http://collector:4318")
	}
	if strings.Trim(u.Path, "/") == "" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// Enabled reports whether spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t.sdk != nil }

// Exporter is the span exporter; nil when tracing is off.
func (t *Tracing) Exporter() sdktrace.SpanExporter { return t.exporter }

// Provider is the tracer provider (a no-op one when off).
func (t *Tracing) Provider() trace.TracerProvider { return t.provider }

// Tracer is Halley's tracer.
func (t *Tracing) Tracer() trace.Tracer { return t.tracer }

// Propagator reads and writes the W3C traceparent (and baggage) headers.
func (t *Tracing) Propagator() propagation.TextMapPropagator { return t.prop }

// Shutdown exports the spans still buffered and stops the exporter; a no-op when off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// Attribute keys of Halley's own span attributes.
const (
	AttrAction     = attribute.Key("halley.step.action")
	AttrOutcome    = attribute.Key("halley.step.outcome")
	AttrTemplate   = attribute.Key("halley.template")
	AttrNodeType   = attribute.Key("halley.node.type")
	AttrNodeTypes  = attribute.Key("halley.node.types")
	AttrInstance   = attribute.Key("halley.instance_id")
	AttrTenant     = attribute.Key("halley.tenant")
	AttrRequestID  = attribute.Key("halley.request_id")
	AttrTimers     = attribute.Key("halley.timers.count")
	AttrTimersFail = attribute.Key("halley.timers.failed")
	AttrPlugin     = attribute.Key("halley.plugin.name")
	AttrPluginVer  = attribute.Key("halley.plugin.version")
	AttrRuntime    = attribute.Key("halley.plugin.runtime")
	AttrPhase      = attribute.Key("halley.plugin.phase")
	AttrRunStatus  = attribute.Key("halley.plugin.status")
	AttrRunID      = attribute.Key("halley.plugin.run_id")
	AttrAttempt    = attribute.Key("halley.plugin.attempt")
	AttrNodeID     = attribute.Key("halley.node_id")
	AttrExitCode   = attribute.Key("process.exit.code")
)

type requestIDKey struct{}

// WithRequestID returns ctx carrying the request id (the server's X-Request-ID).
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id ctx carries, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// LogHandler wraps h so that every record logged with a context gets request_id (when the context has one) and
// trace_id and span_id (when a span is recording in it). Wrapping twice is wrapping once.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(logHandler); ok {
		return h
	}
	return logHandler{h}
}

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if id := RequestID(ctx); id != "" {
			r.AddAttrs(slog.String("request_id", id))
		}
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(as)}
}
func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.Handler.WithGroup(name)} }
