package main

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/server/config"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/telemetry"
	"github.com/halley-bpm/halley/service/tracing"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes the protobuf export requests the SDK posts to /v1/traces.
type otlpReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	service  string // the resource's service.name
	spans    []*tracepb.Span
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP export to %s as %q", req.URL.Path, req.Header.Get("Content-Type"))
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				t.Error(err)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		var export collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &export); err != nil {
			t.Errorf("OTLP export does not decode: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.requests++
		for _, rs := range export.ResourceSpans {
			for _, a := range rs.GetResource().GetAttributes() {
				if a.Key == "service.name" {
					r.service = a.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) named(name string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func spanAttr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value
		}
	}
	return nil
}

// stopGracefully sends SIGTERM and waits for the process to exit.
func stopGracefully(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("halley exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("halley did not stop within 30s of SIGTERM")
	}
}

// jsonLine finds the first JSON log line for which match is true.
func jsonLine(logs string, match func(map[string]any) bool) map[string]any {
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && match(m) {
			return m
		}
	}
	return nil
}

// TestTracingOfARealServer starts the binary with HALLEY_OTLP_ENDPOINT pointing at an in-process OTLP receiver,
// starts an instance with a caller's traceparent, lets an event webhook go out, and stops the server: the spans
// flushed at the stop are the request's (a child of the caller's span, named by its route template), the start step's
// (a child of the request's, with bounded attributes), the webhook's, whose traceparent the receiving end got, and
// a delay node's timer batch with its step; the JSON access log line names the request id and the trace.
func TestTracingOfARealServer(t *testing.T) {
	bin := buildHalley(t)
	otlp := newOTLPReceiver(t)
	hooks := make(chan http.Header, 8)
	webhook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hooks <- r.Header.Clone()
	}))
	defer webhook.Close()
	cmd, url, logs := start(t, bin, "HALLEY_ADMIN_PASSWORD=trace-pw", "HALLEY_LOG_FORMAT=json", "HALLEY_OTLP_ENDPOINT="+otlp.URL,
		"HALLEY_OUTBOUND_ALLOW=127.0.0.1", "OTEL_SERVICE_NAME=halley-under-test")
	tok := login(t, url, "admin", "trace-pw")
	if st, body := call(t, "POST", url+"/api/v1/subscriptions", tok, "application/json",
		strings.NewReader(`{"event":"instance.started","webhook_url":"`+webhook.URL+`/hook/token-in-path"}`)); st != 201 {
		t.Fatalf("subscribe: %d %s", st, body)
	}

	const callerTrace, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, _ := http.NewRequest("POST", url+"/api/v1/instances/linear",
		strings.NewReader(`{"title":"traced","steps":[{"name":"check","approvers":{"users":["admin"]}}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	req.Header.Set("X-Request-ID", "trace-test-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var inst struct {
		ID string `json:"id"`
	}
	_ = json.NewDecoder(res.Body).Decode(&inst)
	res.Body.Close()
	if res.StatusCode != 201 || inst.ID == "" || res.Header.Get("X-Request-ID") != "trace-test-1" {
		t.Fatalf("start: %d, id %q, X-Request-ID %q", res.StatusCode, inst.ID, res.Header.Get("X-Request-ID"))
	}
	var hook http.Header
	select {
	case hook = <-hooks:
	case <-time.After(30 * time.Second):
		t.Fatalf("the instance.started webhook never came; logs:\n%s", logs)
	}
	// A delay node: its timer fires in a batch span, and the step it runs is a child of it.
	c := &client{t: t, base: url, token: tok}
	def := map[string]any{"nodes": []any{
		map[string]any{"id": "start", "type": "start", "trigger": map[string]any{"kind": "manual"}},
		map[string]any{"id": "wait", "type": "delay", "interval": 1},
		map[string]any{"id": "end", "type": "end"},
	}, "edges": []any{map[string]any{"from": "start", "to": "wait"}, map[string]any{"from": "wait", "to": "end"}}}
	if st, out := c.call("POST", "/api/v1/templates", map[string]any{"key": "traced-delay", "definition": def}); st != 201 {
		t.Fatalf("template: %d %v", st, out)
	}
	if st, out := c.call("POST", "/api/v1/templates/traced-delay/publish", nil); st != 201 {
		t.Fatalf("publish: %d %v", st, out)
	}
	st, delayed := c.call("POST", "/api/v1/instances", map[string]any{"template": "traced-delay"})
	if st != 201 {
		t.Fatalf("start the delay: %d %v", st, delayed)
	}
	if !testkit.Eventually(30*time.Second, 50*time.Millisecond, func() bool {
		_, inst := c.call("GET", "/api/v1/instances/"+delayed["id"].(string), nil)
		return inst["status"] == "completed"
	}) {
		t.Fatalf("the delayed instance never completed; logs:\n%s", logs)
	}
	for _, probe := range []string{"/healthz", "/readyz", "/metrics"} {
		if st, _ := call(t, "GET", url+probe, "", "", nil); st != 200 {
			t.Fatalf("GET %s: %d", probe, st)
		}
	}
	stopGracefully(t, cmd) // the batch processor's spans are exported at the stop

	if otlp.service != "halley-under-test" {
		t.Errorf("resource service.name = %q, want OTEL_SERVICE_NAME's", otlp.service)
	}
	// The request's span: a child of the caller's, named by the route template.
	https := otlp.named("POST /api/v1/instances/linear")
	if len(https) != 1 {
		t.Fatalf("%d spans of the start request; logs:\n%s", len(https), logs)
	}
	httpSpan := https[0]
	if hex.EncodeToString(httpSpan.TraceId) != callerTrace || hex.EncodeToString(httpSpan.ParentSpanId) != callerSpan ||
		httpSpan.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("request span: trace %x parent %x kind %v; want the caller's trace and span", httpSpan.TraceId, httpSpan.ParentSpanId, httpSpan.Kind)
	}
	if spanAttr(httpSpan, "http.response.status_code").GetIntValue() != 201 || spanAttr(httpSpan, "http.route").GetStringValue() != "/api/v1/instances/linear" ||
		spanAttr(httpSpan, string(tracing.AttrRequestID)).GetStringValue() != "trace-test-1" {
		t.Errorf("request span attributes: %v", httpSpan.Attributes)
	}
	// The start step: a child of the request's span.
	var steps []*tracepb.Span
	for _, s := range otlp.named("step start") {
		if spanAttr(s, string(tracing.AttrInstance)).GetStringValue() == inst.ID {
			steps = append(steps, s)
		}
	}
	if len(steps) != 1 {
		t.Fatalf("%d start step spans of the instance", len(steps))
	}
	step := steps[0]
	if string(step.ParentSpanId) != string(httpSpan.SpanId) || string(step.TraceId) != string(httpSpan.TraceId) {
		t.Errorf("start step span's parent %x, want the request's span %x", step.ParentSpanId, httpSpan.SpanId)
	}
	if spanAttr(step, string(tracing.AttrOutcome)).GetStringValue() != "committed" || spanAttr(step, string(tracing.AttrInstance)).GetStringValue() != inst.ID ||
		spanAttr(step, string(tracing.AttrTemplate)).GetStringValue() == "" || spanAttr(step, string(tracing.AttrNodeType)).GetStringValue() != "start" {
		t.Errorf("start step span attributes: %v", step.Attributes)
	}
	// The webhook: a client span whose traceparent the receiving end got.
	outs := otlp.named("outbound POST")
	if len(outs) == 0 {
		t.Fatal("no span of the webhook call")
	}
	var matched bool
	for _, o := range outs {
		if hook.Get("traceparent") == "00-"+hex.EncodeToString(o.TraceId)+"-"+hex.EncodeToString(o.SpanId)+"-01" {
			matched = true
			if spanAttr(o, "server.address").GetStringValue() != "127.0.0.1" || spanAttr(o, "http.response.status_code").GetIntValue() != 200 {
				t.Errorf("webhook span attributes: %v", o.Attributes)
			}
		}
	}
	if !matched {
		t.Errorf("the webhook's traceparent %q is no exported span's", hook.Get("traceparent"))
	}
	// The timer: a batch span with the timer step under it.
	var timerStep *tracepb.Span
	for _, s := range otlp.named("step timer") {
		if spanAttr(s, string(tracing.AttrInstance)).GetStringValue() == delayed["id"] {
			timerStep = s
		}
	}
	if timerStep == nil {
		t.Fatal("no timer step span of the delayed instance")
	}
	var batched bool
	for _, b := range otlp.named("timers fire") {
		if string(b.SpanId) == string(timerStep.ParentSpanId) && spanAttr(b, string(tracing.AttrTimers)).GetIntValue() >= 1 {
			batched = true
		}
	}
	if !batched || spanAttr(timerStep, string(tracing.AttrNodeType)).GetStringValue() != "delay" ||
		spanAttr(timerStep, string(tracing.AttrTemplate)).GetStringValue() != "traced-delay" {
		t.Errorf("timer step span: parent in a timer batch %v, attributes %v", batched, timerStep.Attributes)
	}
	for _, probe := range []string{"GET /readyz", "GET /healthz", "GET /metrics"} {
		if n := len(otlp.named(probe)); n != 0 {
			t.Errorf("%d spans of %s: probes are not traced", n, probe)
		}
	}
	if len(otlp.named("POST /api/v1/auth/login")) != 1 {
		t.Error("no span of the login request")
	}
	// Bounded names: no span is named after an instance, a request id or a path with a token.
	otlp.mu.Lock()
	for _, s := range otlp.spans {
		if strings.Contains(s.Name, inst.ID) || strings.Contains(s.Name, "token-in-path") || strings.Contains(s.Name, "trace-test-1") {
			t.Errorf("span name %q holds an id", s.Name)
		}
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.GetStringValue(), "token-in-path") {
				t.Errorf("span %q attribute %s holds the webhook URL's path", s.Name, a.Key)
			}
		}
	}
	otlp.mu.Unlock()
	// The access log line of the request names its request id and its trace.
	line := jsonLine(logs.String(), func(m map[string]any) bool { return m["msg"] == "http" && m["route"] == "/api/v1/instances/linear" })
	if line == nil || line["request_id"] != "trace-test-1" || line["trace_id"] != callerTrace || line["span_id"] != hex.EncodeToString(httpSpan.SpanId) {
		t.Errorf("access log line = %v", line)
	}
}

// TestTracingOffWithoutEndpoint: without HALLEY_OTLP_ENDPOINT no exporter is made — the SDK's own
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, set here, is never used — yet log lines still carry the request id.
func TestTracingOffWithoutEndpoint(t *testing.T) {
	bin := buildHalley(t)
	otlp := newOTLPReceiver(t)
	cmd, url, logs := start(t, bin, "HALLEY_ADMIN_PASSWORD=trace-pw", "HALLEY_LOG_FORMAT=json",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="+otlp.URL+"/v1/traces", "OTEL_BSP_SCHEDULE_DELAY=10")
	tok := login(t, url, "admin", "trace-pw")
	req, _ := http.NewRequest("POST", url+"/api/v1/instances/linear",
		strings.NewReader(`{"title":"untraced","steps":[{"name":"check","approvers":{"users":["admin"]}}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	req.Header.Set("X-Request-ID", "untraced-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("start: %d", res.StatusCode)
	}
	stopGracefully(t, cmd)
	otlp.mu.Lock()
	n := otlp.requests
	otlp.mu.Unlock()
	if n != 0 {
		t.Errorf("tracing is off, yet %d OTLP exports arrived", n)
	}
	line := jsonLine(logs.String(), func(m map[string]any) bool { return m["msg"] == "http" && m["route"] == "/api/v1/instances/linear" })
	if line == nil || line["request_id"] != "untraced-1" || line["trace_id"] != nil {
		t.Errorf("access log line = %v", line)
	}
	if strings.Contains(logs.String(), "tracing: exporting") {
		t.Error("the log says tracing is on")
	}
}

// TestNothingHungOnTheSeamsWhenOff: with tracing off the engine's observer is the metrics alone and the timer
// handler is not wrapped, so a step or a timer costs what it did before tracing existed.
func TestNothingHungOnTheSeamsWhenOff(t *testing.T) {
	m := telemetry.New(telemetry.Options{})
	off, err := newTracing(t.Context(), &config.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if off.Enabled() || off.Exporter() != nil {
		t.Fatal("tracing without HALLEY_OTLP_ENDPOINT is on")
	}
	if o := stepObserver(m, off); o != any(m) {
		t.Errorf("step observer with tracing off = %T, want the metrics alone", o)
	}
	calls := 0
	h := func(ctx context.Context, batch []scheduler.Due) []error { calls++; return nil }
	traceTimers(off, h)(t.Context(), nil)
	if calls != 1 {
		t.Fatal("the timer handler was not called")
	}
	if reflect.ValueOf(traceTimers(off, h)).Pointer() != reflect.ValueOf(h).Pointer() {
		t.Error("the timer handler is wrapped with tracing off")
	}
}
