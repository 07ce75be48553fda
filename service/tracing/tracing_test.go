package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/tracing"
)

func recording(t *testing.T) (*tracing.Tracing, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr, err := tracing.New(t.Context(), tracing.Options{Exporter: exp, Version: "v-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, exp
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, a := range s.Attributes {
		m[a.Key] = a.Value
	}
	return m
}

func only(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1 (all: %v)", len(found), name, exp.GetSpans().Snapshots())
	}
	return found[0]
}

// TestOffWithoutEndpoint: no endpoint, no exporter — even when the SDK's own OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
// set — and a no-op provider whose spans record nothing.
func TestOffWithoutEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:1/v1/traces")
	tr, err := tracing.New(t.Context(), tracing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled() || tr.Exporter() != nil {
		t.Fatalf("tracing without an endpoint: enabled %v, exporter %v", tr.Enabled(), tr.Exporter())
	}
	if _, ok := tr.Provider().(*sdktrace.TracerProvider); ok {
		t.Fatal("the provider is the SDK's, want the no-op one")
	}
	_, span := tr.Tracer().Start(t.Context(), "x")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Fatal("a span of tracing that is off records")
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestOnWithEndpoint(t *testing.T) {
	tr, err := tracing.New(t.Context(), tracing.Options{Endpoint: "http://127.0.0.1:4318", Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background()) //nolint:errcheck // nothing was exported
	if !tr.Enabled() || tr.Exporter() == nil {
		t.Fatal("tracing with an endpoint is off")
	}
	if _, err := tracing.New(t.Context(), tracing.Options{Endpoint: "collector:4318"}); err == nil {
		t.Fatal("an endpoint that is not a URL was taken")
	}
}

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://collector:4318":          "http://collector:4318/v1/traces",
		"http://collector:4318/":         "http://collector:4318/v1/traces",
		"https://otel.example/custom/tr": "https://otel.example/custom/tr",
	} {
		if got, err := tracing.EndpointURL(in); err != nil || got != want {
			t.Errorf("EndpointURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "collector:4318", "ftp://x", "http://"} {
		if _, err := tracing.EndpointURL(bad); err == nil {
			t.Errorf("EndpointURL(%q) took it", bad)
		}
	}
}

// TestStepSpans: a step is a span named by its action, a child of the span in its context, timed from the step's
// start to its end, with the template, the node types moved and the outcome as attributes.
func TestStepSpans(t *testing.T) {
	tr, exp := recording(t)
	ctx, parent := tr.Tracer().Start(t.Context(), "POST /api/v1/instances/:key")
	tr.StepDone(ctx, engine.StepReport{Action: "approve", TenantID: "t1", InstanceID: "i-42", Template: "leave", Took: 250 * time.Millisecond,
		Moves: []engine.Moved{{Kind: "task", Subject: "i-42.t3"}, {Kind: "node", Subject: "manager", NodeType: model.NodeApproval},
			{Kind: "node", Subject: "end", NodeType: model.NodeEnd}, {Kind: "node", Subject: "hr", NodeType: model.NodeApproval}}})
	tr.StepDone(t.Context(), engine.StepReport{Action: "reject", InstanceID: "i-43", Err: model.Errorf(model.ECONFLICT, "decided already")})
	tr.StepDone(t.Context(), engine.StepReport{Action: "timer", InstanceID: "i-44", Err: errors.New("database gone")})
	parent.End()

	s := only(t, exp, "step approve")
	if s.Parent.SpanID() != parent.SpanContext().SpanID() || s.SpanContext.TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("step span's parent = %v, want the request's span %v", s.Parent.SpanID(), parent.SpanContext().SpanID())
	}
	if d := s.EndTime.Sub(s.StartTime); d < 250*time.Millisecond || d > time.Second {
		t.Errorf("step span lasted %v, want the step's 250ms", d)
	}
	a := attrs(s)
	if a[tracing.AttrAction].AsString() != "approve" || a[tracing.AttrOutcome].AsString() != "committed" || a[tracing.AttrTemplate].AsString() != "leave" ||
		a[tracing.AttrInstance].AsString() != "i-42" || a[tracing.AttrNodeType].AsString() != model.NodeApproval ||
		strings.Join(a[tracing.AttrNodeTypes].AsStringSlice(), ",") != "approval,end" {
		t.Errorf("step span attributes = %v", s.Attributes)
	}
	if s.Status.Code != codes.Unset {
		t.Errorf("committed step has status %v", s.Status)
	}
	refused := only(t, exp, "step reject")
	if attrs(refused)[tracing.AttrOutcome].AsString() != model.ECONFLICT || refused.Status.Code != codes.Error || len(refused.Events) != 0 {
		t.Errorf("refused step span = %v %v %v", refused.Attributes, refused.Status, refused.Events)
	}
	if refused.Parent.IsValid() {
		t.Error("a step with no span in its context has a parent")
	}
	failed := only(t, exp, "step timer")
	if attrs(failed)[tracing.AttrOutcome].AsString() != model.EINTERNAL || len(failed.Events) != 1 {
		t.Errorf("failed step span = %v, events %v", failed.Attributes, failed.Events)
	}
}

// TestTimerSpans: a batch of timers is a span, the steps it runs are its children, and the timers left for a
// redelivery are counted.
func TestTimerSpans(t *testing.T) {
	tr, exp := recording(t)
	h := tr.Timers(func(ctx context.Context, batch []scheduler.Due) []error {
		for _, d := range batch {
			tr.StepDone(ctx, engine.StepReport{Action: "timer", InstanceID: d.ID})
		}
		return []error{nil, errors.New("busy"), nil}
	})
	h(t.Context(), []scheduler.Due{{ID: "a", Attempt: 1}, {ID: "b", Attempt: 1}, {ID: "c", Attempt: 2}})
	batch := only(t, exp, "timers fire")
	if a := attrs(batch); a[tracing.AttrTimers].AsInt64() != 3 || a[tracing.AttrTimersFail].AsInt64() != 1 || batch.Status.Code != codes.Error {
		t.Errorf("timer batch span = %v %v", batch.Attributes, batch.Status)
	}
	n := 0
	for _, s := range exp.GetSpans() {
		if s.Name == "step timer" {
			n++
			if s.Parent.SpanID() != batch.SpanContext.SpanID() {
				t.Errorf("timer step %v is not a child of the batch", attrs(s)[tracing.AttrInstance])
			}
		}
	}
	if n != 3 {
		t.Errorf("%d timer steps, want 3", n)
	}
}

func TestPluginRunSpans(t *testing.T) {
	tr, exp := recording(t)
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	job := plugin.Job{RunID: "r1", TenantID: "t1", Attempt: 2, Spec: plugin.Spec{Name: "credit", Version: 3, Runtime: plugin.RuntimePython},
		Input: plugin.Input{InstanceID: "i-9", NodeID: "check", Phase: "auto"}}
	tr.PluginRunDone(job, plugin.Result{ExitCode: 0, StartedAt: start, EndedAt: start.Add(2 * time.Second), Output: &plugin.Output{}}, nil)
	s := only(t, exp, "plugin run")
	a := attrs(s)
	if a[tracing.AttrPlugin].AsString() != "credit" || a[tracing.AttrPluginVer].AsInt64() != 3 || a[tracing.AttrRunStatus].AsString() != plugin.StatusSucceeded ||
		a[tracing.AttrInstance].AsString() != "i-9" || a[tracing.AttrAttempt].AsInt64() != 2 || a[tracing.AttrPhase].AsString() != "auto" {
		t.Errorf("plugin run span attributes = %v", s.Attributes)
	}
	if !s.StartTime.Equal(start) || !s.EndTime.Equal(start.Add(2*time.Second)) || s.Status.Code != codes.Unset {
		t.Errorf("plugin run span %v..%v %v", s.StartTime, s.EndTime, s.Status)
	}
	exp.Reset()
	tr.PluginRunDone(job, plugin.Result{ExitCode: -1, TimedOut: true, StartedAt: start, EndedAt: start.Add(time.Minute)}, nil)
	if s := only(t, exp, "plugin run"); attrs(s)[tracing.AttrRunStatus].AsString() != plugin.StatusTimedOut || s.Status.Code != codes.Error {
		t.Errorf("timed-out run span = %v %v", s.Attributes, s.Status)
	}
}

// TestTransportPropagates: an outbound request carries the W3C traceparent of its client span, a child of the
// span in its context; the span names the host, never the URL's path or query (where robots keep their tokens).
func TestTransportPropagates(t *testing.T) {
	tr, exp := recording(t)
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	client := &http.Client{Transport: tr.Transport(http.DefaultTransport)}
	ctx, parent := tr.Tracer().Start(t.Context(), "deliveries")
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/hook/secret-token?access_token=also-secret", strings.NewReader("{}"))
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	parent.End()
	if req.Header.Get("traceparent") != "" {
		t.Error("the transport changed the caller's request")
	}
	h := <-got
	s := only(t, exp, "outbound POST")
	want := "00-" + s.SpanContext.TraceID().String() + "-" + s.SpanContext.SpanID().String() + "-01"
	if h.Get("traceparent") != want {
		t.Errorf("traceparent = %q, want %q", h.Get("traceparent"), want)
	}
	if s.Parent.SpanID() != parent.SpanContext().SpanID() || s.SpanKind != trace.SpanKindClient {
		t.Errorf("client span's parent %v kind %v", s.Parent.SpanID(), s.SpanKind)
	}
	a := attrs(s)
	if a["http.response.status_code"].AsInt64() != 202 || a["server.address"].AsString() != "127.0.0.1" || a["http.request.method"].AsString() != "POST" {
		t.Errorf("client span attributes = %v", s.Attributes)
	}
	for _, kv := range s.Attributes {
		if strings.Contains(kv.Value.String(), "secret") {
			t.Errorf("attribute %s holds the URL's secret: %s", kv.Key, kv.Value.String())
		}
	}

	exp.Reset()
	srv.Close()
	req, _ = http.NewRequestWithContext(t.Context(), "PATCH", srv.URL, nil)
	if _, err := client.Do(req); err == nil {
		t.Fatal("a closed server answered")
	}
	if s := only(t, exp, "outbound PATCH"); s.Status.Code != codes.Error || len(s.Events) != 1 {
		t.Errorf("failed call span = %v %v", s.Status, s.Events)
	}
}

// TestLogHandler: a line logged with a request's context carries its request id, and its trace and span ids when
// a span is recording; a line without a context carries neither.
func TestLogHandler(t *testing.T) {
	tr, _ := recording(t)
	var buf bytes.Buffer
	lg := slog.New(tracing.LogHandler(tracing.LogHandler(slog.NewJSONHandler(&buf, nil)))).With("component", "test")
	ctx := tracing.WithRequestID(t.Context(), "req-1")
	ctx, span := tr.Tracer().Start(ctx, "x")
	lg.InfoContext(ctx, "with")
	span.End()
	lg.Info("without")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	var with, without map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &with)
	_ = json.Unmarshal([]byte(lines[1]), &without)
	if with["request_id"] != "req-1" || with["trace_id"] != span.SpanContext().TraceID().String() ||
		with["span_id"] != span.SpanContext().SpanID().String() || with["component"] != "test" {
		t.Errorf("line with a context = %s", lines[0])
	}
	if strings.Count(lines[0], `"request_id"`) != 1 {
		t.Errorf("request_id twice (the handler wrapped twice): %s", lines[0])
	}
	if _, ok := without["trace_id"]; ok || without["request_id"] != nil {
		t.Errorf("line without a context = %s", lines[1])
	}
}
