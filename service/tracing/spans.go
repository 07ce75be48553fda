package tracing

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/scheduler"
)

// StepDone implements engine.StepObserver: one span per step, "step <action>", a child of the span in ctx (the
// HTTP request's, the timer batch's). The engine reports a step once it ended, so the span is recorded after the
// fact with the step's start and end times.
func (t *Tracing) StepDone(ctx context.Context, r engine.StepReport) {
	end := time.Now()
	outcome := "committed"
	if r.Err != nil {
		outcome = model.ErrorKind(r.Err)
	}
	attrs := []attribute.KeyValue{AttrAction.String(r.Action), AttrOutcome.String(outcome), AttrInstance.String(r.InstanceID),
		AttrTenant.String(r.TenantID)}
	if r.Template != "" {
		attrs = append(attrs, AttrTemplate.String(r.Template))
	}
	// The node the step acted on is the first one it moved; the types of every node it moved follow (a set of at
	// most the node types of the definition schema).
	var types []string
	for _, m := range r.Moves {
		if m.NodeType != "" && !slices.Contains(types, m.NodeType) {
			types = append(types, m.NodeType)
		}
	}
	if len(types) > 0 {
		attrs = append(attrs, AttrNodeType.String(types[0]), AttrNodeTypes.StringSlice(types))
	}
	_, span := t.tracer.Start(ctx, "step "+r.Action, trace.WithTimestamp(end.Add(-r.Took)), trace.WithAttributes(attrs...))
	if r.Err != nil {
		span.SetStatus(codes.Error, outcome)
		if outcome == model.EINTERNAL {
			span.RecordError(r.Err) // the other kinds are the caller's mistakes (a conflict, a refusal), said by the outcome
		}
	}
	span.End(trace.WithTimestamp(end))
}

var _ engine.StepObserver = (*Tracing)(nil)

// Timers wraps a timer handler: one span per batch handed over, "timers fire", whose children are the steps the
// timers ran.
func (t *Tracing) Timers(h scheduler.Handler) scheduler.Handler {
	return func(ctx context.Context, batch []scheduler.Due) []error {
		ctx, span := t.tracer.Start(ctx, "timers fire", trace.WithAttributes(AttrTimers.Int(len(batch))))
		defer span.End()
		errs := h(ctx, batch)
		failed := 0
		if errs != nil && len(errs) != len(batch) {
			failed = len(batch)
		} else {
			for _, err := range errs {
				if err != nil {
					failed++
				}
			}
		}
		span.SetAttributes(AttrTimersFail.Int(failed))
		if failed > 0 {
			span.SetStatus(codes.Error, strconv.Itoa(failed)+" timers left for a redelivery")
		}
		return errs
	}
}

// PluginRunDone is an executor OnComplete: one span per plugin process run, "plugin run", from the process's start
// to its end (the run is claimed from the database, so it starts a trace of its own).
func (t *Tracing) PluginRunDone(job plugin.Job, res plugin.Result, err error) {
	status := res.Status()
	switch {
	case errors.Is(err, plugin.ErrAbandoned):
		status = "abandoned"
	case errors.Is(err, plugin.ErrStopped):
		status = plugin.StatusStopped
	}
	end := res.EndedAt
	if end.IsZero() {
		end = time.Now()
	}
	start := res.StartedAt
	if start.IsZero() || start.After(end) {
		start = end
	}
	_, span := t.tracer.Start(context.Background(), "plugin run", trace.WithTimestamp(start), trace.WithAttributes(
		AttrPlugin.String(job.Spec.Name), AttrPluginVer.Int(job.Spec.Version), AttrRuntime.String(string(job.Spec.Runtime)),
		AttrPhase.String(job.Input.Phase), AttrRunStatus.String(status), AttrRunID.String(job.RunID), AttrAttempt.Int(job.Attempt),
		AttrInstance.String(job.Input.InstanceID), AttrNodeID.String(job.Input.NodeID), AttrTenant.String(job.TenantID),
		AttrExitCode.Int(res.ExitCode)))
	if status != plugin.StatusSucceeded {
		span.SetStatus(codes.Error, status)
	}
	if res.Err != nil {
		span.RecordError(res.Err)
	}
	span.End(trace.WithTimestamp(end))
}

// Transport wraps an outbound transport: each request gets a client span, "outbound <METHOD>", and carries its
// W3C traceparent. The span names the server's host and port and the status, never the URL's path or query (an
// IM robot's or a webhook's URL often holds its secret).
func (t *Tracing) Transport(base http.RoundTripper) http.RoundTripper {
	return &transport{base: base, tracer: t.tracer, prop: t.prop}
}

type transport struct {
	base   http.RoundTripper
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

func (tr *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	host, port := req.URL.Hostname(), req.URL.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[req.URL.Scheme]
	}
	attrs := []attribute.KeyValue{attribute.String("http.request.method", req.Method), attribute.String("server.address", host),
		attribute.String("url.scheme", req.URL.Scheme)}
	if n, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, attribute.Int("server.port", n))
	}
	ctx, span := tr.tracer.Start(req.Context(), "outbound "+MethodName(req.Method), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrs...))
	req = req.Clone(ctx) // a RoundTripper must not change the caller's request
	tr.prop.Inject(ctx, propagation.HeaderCarrier(req.Header))
	res, err := tr.base.RoundTrip(req)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, errorType(err))
		span.End()
		return res, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", res.StatusCode))
	if res.StatusCode >= 400 {
		span.SetStatus(codes.Error, strconv.Itoa(res.StatusCode))
	}
	span.End() // at the response's headers: a delivery reads no more than the status and a little of the body
	return res, nil
}

func errorType(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "error"
}

// MethodName bounds a span name's method: the standard ones, else "OTHER".
func MethodName(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions,
		http.MethodConnect, http.MethodTrace:
		return m
	}
	return "OTHER"
}
