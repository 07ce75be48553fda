package main

// The tests sit in package main: a command cannot be imported, so its pure parts are tested from inside.

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	hundred := make([]int64, 100)
	for i := range hundred {
		hundred[i] = int64(i + 1) // 1..100
	}
	tests := []struct {
		name   string
		sorted []int64
		p      float64
		want   int64
	}{
		{"empty", nil, 50, 0},
		{"single", []int64{7}, 99, 7},
		{"p50 of 1..100", hundred, 50, 50},
		{"p95 of 1..100", hundred, 95, 95},
		{"p99 of 1..100", hundred, 99, 99},
		{"p100 is the max", hundred, 100, 100},
		{"tiny p is the min", hundred, 0.0001, 1},
		{"p50 of four rounds up the rank", []int64{10, 20, 30, 40}, 50, 20},
		{"p99 of four is the max", []int64{10, 20, 30, 40}, 99, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestRecorderSummary(t *testing.T) {
	r := newRecorder()
	for i := 1; i <= 100; i++ {
		r.ok(time.Duration(i) * time.Millisecond)
	}
	r.fail("409")
	r.fail("409")
	r.fail("transport")
	s := r.summary()
	want := Latency{Count: 100, Errors: 3, Kinds: map[string]int64{"409": 2, "transport": 1}, Mean: 50.5, P50: 50, P95: 95, P99: 99, Max: 100}
	if s.Count != want.Count || s.Errors != want.Errors || s.Mean != want.Mean || s.P50 != want.P50 || s.P95 != want.P95 || s.P99 != want.P99 || s.Max != want.Max {
		t.Errorf("summary = %+v, want %+v", s, want)
	}
	if s.Kinds["409"] != 2 || s.Kinds["transport"] != 1 {
		t.Errorf("error kinds = %v", s.Kinds)
	}
}

func TestRecorderMergeKeepsExactCountsAndTail(t *testing.T) {
	a, b := newRecorder(), newRecorder()
	for i := 0; i < 99; i++ {
		a.ok(time.Millisecond)
	}
	b.ok(time.Second) // the one slow operation lives in the other worker's recorder
	b.fail("500")
	all := newRecorder()
	all.merge(a)
	all.merge(b)
	all.merge(nil)
	s := all.summary()
	if s.Count != 100 || s.Errors != 1 || s.Max != 1000 || s.P50 != 1 || s.P99 != 1 {
		t.Errorf("merged summary = %+v, want count 100, errors 1, max 1000, p50 1, p99 1", s)
	}
	if got := percentile(sortedCopy(all.samples), 100); got != time.Second {
		t.Errorf("merged samples lost the slow one: p100 = %v", got)
	}
}

func TestRecorderBoundsItsSamples(t *testing.T) {
	r := newRecorder()
	n := maxSamples + 5000
	for i := 0; i < n; i++ {
		r.ok(time.Duration(i%1000) * time.Microsecond)
	}
	if len(r.samples) != maxSamples {
		t.Fatalf("kept %d samples, want the cap %d", len(r.samples), maxSamples)
	}
	if r.count != int64(n) {
		t.Errorf("count = %d, want %d (exact beyond the cap)", r.count, n)
	}
	// A uniform sample of a uniform 0..999 µs distribution: the median stays near 500 µs.
	if p50 := percentile(sortedCopy(r.samples), 50); p50 < 450*time.Microsecond || p50 > 550*time.Microsecond {
		t.Errorf("p50 of the reservoir = %v, want about 500µs", p50)
	}
	big := newRecorder()
	big.merge(r)
	big.merge(r)
	if len(big.samples) > maxSamples {
		t.Errorf("merge kept %d samples, more than the cap %d", len(big.samples), maxSamples)
	}
}

func TestRatio(t *testing.T) {
	tests := []struct {
		name string
		a, b float64
		want *float64
	}{
		{"half", 2100, 4200, ptr(0.5)},
		{"rounded to three decimals", 1, 3, ptr(0.333)},
		{"above one", 300, 150, ptr(2.0)},
		{"no baseline", 100, 0, nil},
		{"negative baseline", 100, -1, nil},
		{"NaN", math.NaN(), 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ratio(tt.a, tt.b)
			switch {
			case got == nil && tt.want == nil:
			case got == nil || tt.want == nil || *got != *tt.want:
				t.Errorf("ratio(%v, %v) = %v, want %v", tt.a, tt.b, fmtPtr(got), fmtPtr(tt.want))
			}
		})
	}
}

func TestPerSecond(t *testing.T) {
	if got := perSecond(6523, 20*time.Second); got != 326.2 {
		t.Errorf("perSecond(6523, 20s) = %v, want 326.2", got)
	}
	if got := perSecond(10, 0); got != 0 {
		t.Errorf("perSecond over zero time = %v, want 0", got)
	}
}

func TestFillStepsRatios(t *testing.T) {
	res := loadResult{ops: map[string]*recorder{"start": newRecorder(), "approve": newRecorder(), "next_task": newRecorder()}, flows: 10}
	for i := 0; i < 10; i++ {
		res.ops["start"].ok(10 * time.Millisecond)
		for j := 0; j < approvalsPerFlow; j++ {
			res.ops["approve"].ok(20 * time.Millisecond)
		}
		res.ops["next_task"].ok(time.Millisecond)
	}
	res.ops["approve"].fail("409")
	f := StepsFigures{Baseline: &BaselineFigures{CommitsPS: 100, Latency: Latency{P99: 5}}}
	fillSteps(&f, res, 10*time.Second)
	// 50 steps in 10 s = 5 steps/s; ratio 5/100; step p99 20 ms over baseline p99 5 ms = 4.
	if f.Steps != 50 || f.StepsPerS != 5 || f.Errors != 1 || f.FlowsDone != 10 {
		t.Errorf("steps %d, steps/s %v, errors %d, flows %d; want 50, 5, 1, 10", f.Steps, f.StepsPerS, f.Errors, f.FlowsDone)
	}
	if f.ReqPerS != 6.1 { // 50 steps + 10 look-ups + 1 failed request
		t.Errorf("requests/s = %v, want 6.1", f.ReqPerS)
	}
	if f.Ratio == nil || *f.Ratio != 0.05 || f.LatRatio == nil || *f.LatRatio != 4 {
		t.Errorf("ratio %s, latency ratio %s; want 0.05 and 4", fmtPtr(f.Ratio), fmtPtr(f.LatRatio))
	}
	met := map[string]bool{}
	for _, tg := range f.Targets {
		if tg.Met == nil {
			t.Fatalf("target %s has no verdict", tg.Name)
		}
		met[tg.Name] = *tg.Met
	}
	if met["ratio"] || met["latency_ratio"] || met["errors"] {
		t.Errorf("targets %v: every one should be missed", met)
	}

	noBase := StepsFigures{}
	fillSteps(&noBase, res, 10*time.Second)
	if noBase.Ratio != nil || noBase.Targets[0].Met != nil {
		t.Errorf("without a baseline the ratio must be null and its target unjudged, got %s", fmtPtr(noBase.Ratio))
	}
}

func TestTargets(t *testing.T) {
	tests := []struct {
		t    Target
		met  *bool
		want string
	}{
		{atLeast("ratio", ptr(0.5), 0.5), ptr(true), ">= 0.5"},
		{atLeast("ratio", ptr(0.49), 0.5), ptr(false), ">= 0.5"},
		{atMost("lateness_p99_ms", ptr(50.0), 50), ptr(true), "<= 50"},
		{atMost("lateness_p99_ms", ptr(50.001), 50), ptr(false), "<= 50"},
		{atMost("lost", nil, 0), nil, "<= 0"},
	}
	for _, tt := range tests {
		if tt.t.Want != tt.want {
			t.Errorf("%s: want string %q, got %q", tt.t.Name, tt.want, tt.t.Want)
		}
		switch {
		case tt.met == nil && tt.t.Met != nil, tt.met != nil && (tt.t.Met == nil || *tt.t.Met != *tt.met):
			t.Errorf("%s %s %s: met = %v, want %v", tt.t.Name, tt.t.Want, fmtPtr(tt.t.Value), tt.t.Met, tt.met)
		}
	}
}

func TestEmitEndsWithOneJSONLine(t *testing.T) {
	var buf bytes.Buffer
	figs := StepsFigures{Suite: "steps", Clients: 100, StepsPerS: 326.2, Ratio: ptr(0.136),
		Targets: []Target{atLeast("ratio", ptr(0.136), 0.5)}}
	if err := emit(&buf, []string{"steps: a summary", "  with <two> lines"}, figs); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("output does not end in a newline: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || lines[0] != "steps: a summary" {
		t.Fatalf("lines = %q, want the two summary lines and one JSON line", lines)
	}
	last := lines[len(lines)-1]
	if !strings.Contains(last, `">= 0.5"`) {
		t.Errorf("comparison signs should not be HTML-escaped in %s", last)
	}
	var back map[string]any
	if err := json.Unmarshal([]byte(last), &back); err != nil {
		t.Fatalf("last line is not one JSON object: %v\n%s", err, last)
	}
	if back["suite"] != "steps" || back["steps_per_s"] != 326.2 || back["ratio"] != 0.136 || back["latency_ratio"] != nil {
		t.Errorf("decoded figures = %v", back)
	}
	tg := back["targets"].([]any)[0].(map[string]any)
	if tg["name"] != "ratio" || tg["met"] != false || tg["value"] != 0.136 {
		t.Errorf("decoded target = %v", tg)
	}
}

func TestCombineBareRounds(t *testing.T) {
	a := Side{Runs: 100, Seconds: 2, PerS: 50, Latency: Latency{Count: 100, Mean: 80, P50: 75, P99: 100, Max: 120}}
	b := Side{Runs: 100, Seconds: 3, PerS: 33.3, Latency: Latency{Count: 100, Mean: 120, P50: 110, P99: 150, Max: 160, Errors: 1}}
	c := combine(a, b)
	if c.Runs != 200 || c.Seconds != 5 || c.PerS != 40 {
		t.Errorf("combined %d runs in %v s = %v/s, want 200 in 5 s = 40/s", c.Runs, c.Seconds, c.PerS)
	}
	if c.Latency.Mean != 100 || c.Latency.P99 != 150 || c.Latency.Max != 160 || c.Latency.Errors != 1 {
		t.Errorf("combined latency = %+v", c.Latency)
	}
}
