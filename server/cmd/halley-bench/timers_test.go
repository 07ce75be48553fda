package main

import (
	"testing"
	"time"
)

func TestPermuteIsABijection(t *testing.T) {
	for _, n := range []int{1, 2, 7919, 7920, 10000, 15838} {
		seen := make([]bool, n)
		for i := 0; i < n; i++ {
			p := permute(i, n)
			if p < 0 || p >= n || seen[p] {
				t.Fatalf("n=%d: permute(%d) = %d is out of range or repeated", n, i, p)
			}
			seen[p] = true
		}
	}
}

func TestDueOffsetSpreadsOverTheWindow(t *testing.T) {
	const n = 1000
	w := 100 * time.Second
	var lo, hi time.Duration = w, 0
	buckets := make([]int, 10)
	for i := 0; i < n; i++ {
		d := dueOffset(i, n, w)
		lo, hi = min(lo, d), max(hi, d)
		buckets[int(d*10/(w+1))]++
	}
	if lo != 0 || hi != w {
		t.Errorf("offsets span %v..%v, want 0..%v", lo, hi, w)
	}
	for i, b := range buckets {
		if b != 100 {
			t.Errorf("tenth %d of the window holds %d timers, want 100 (an even spread)", i, b)
		}
	}
	if a, b := dueOffset(0, n, w), dueOffset(1, n, w); b-a == w/(n-1) {
		t.Error("consecutive starts got consecutive due times; the order should be scattered")
	}
	if dueOffset(0, 1, w) != 0 {
		t.Error("a single timer should be due at the start of the window")
	}
}

func TestPlanLead(t *testing.T) {
	tests := []struct {
		n    int
		rate float64
		want time.Duration
	}{
		{1000, 100, 25 * time.Second},    // 10 s at the rate, ×1.5, +10 s
		{100000, 500, 310 * time.Second}, // 200 s ×1.5 + 10 s
		{1000, 0, 40 * time.Second},      // unknown rate: assume 50/s
	}
	for _, tt := range tests {
		if got := planLead(tt.n, tt.rate); got != tt.want {
			t.Errorf("planLead(%d, %v) = %v, want %v", tt.n, tt.rate, got, tt.want)
		}
	}
}

func TestLatenessOf(t *testing.T) {
	us := make([]int64, 0, 101)
	for i := 1; i <= 100; i++ {
		us = append(us, int64(i)*1000) // 1..100 ms
	}
	us = append(us, -500) // one fired half a millisecond early
	l := latenessOf(us)
	if l.early != 1 || l.p50 != 50 || l.p99 != 99 || l.max != 100 {
		t.Errorf("lateness = %+v, want early 1, p50 50, p99 99, max 100", l)
	}
	if want := round3((5050000.0 - 500) / 101 / 1000); l.mean != want {
		t.Errorf("mean = %v, want %v", l.mean, want)
	}
	if l.p90 != 90 || l.p999 != 100 {
		t.Errorf("p90 %v, p99.9 %v; want 90 and 100", l.p90, l.p999)
	}
	// -0.5 ms and 1..10 ms are ≤ 10 ms; 11..50 ≤ 50 ms; 51..100 ≤ 100 ms.
	want := []int64{11, 40, 50, 0, 0, 0, 0}
	for i, b := range l.hist {
		if b.Count != want[i] {
			t.Errorf("histogram bucket %s = %d, want %d", b.Le, b.Count, want[i])
		}
	}
	if z := latenessOf(nil); z.early != 0 || z.p99 != 0 || z.max != 0 || z.hist != nil {
		t.Errorf("no timers: %+v, want zeroes", z)
	}
	if us[0] != 1000 {
		t.Error("latenessOf sorted its caller's slice")
	}
}

func TestHistogramBucketsEverything(t *testing.T) {
	sorted := []int64{-5, 10_000, 10_001, 500_000, 999_999, 1_000_001, 5_000_000, 5_000_001, 60_000_000}
	h := histogram(sorted)
	want := map[string]int64{"<=10ms": 2, "<=50ms": 1, "<=100ms": 0, "<=500ms": 1, "<=1s": 1, "<=5s": 2, ">5s": 2}
	var total int64
	for _, b := range h {
		total += b.Count
		if b.Count != want[b.Le] {
			t.Errorf("bucket %s = %d, want %d", b.Le, b.Count, want[b.Le])
		}
	}
	if total != int64(len(sorted)) {
		t.Errorf("histogram holds %d values, want %d", total, len(sorted))
	}
}

func TestTimersTargets(t *testing.T) {
	f := &TimersFigures{Armed: 20000, Fired: 20000, PendingPeak: 20000, LateP99: 12, LateMax: 80, RedisPerMillion: ptr(140.0)}
	got := map[string]*bool{}
	for _, tg := range timersTargets(f) {
		got[tg.Name] = tg.Met
	}
	for name, want := range map[string]bool{"pending_peak": false, "lateness_p99_ms": true, "lateness_max_ms": true, "lost": true,
		"duplicates": true, "early": true, "redis_mb_per_million_pending": true} {
		if got[name] == nil || *got[name] != want {
			t.Errorf("target %s: met %v, want %v (a run smaller than 1M must not pass the size target)", name, got[name], want)
		}
	}
	// 100,000 fired and committed in 25 s = 4,000/s: against 5,000 raw commits/s that is 0.8 (missed), against
	// 3,000/s 1.333 (met); without a baseline the ratio is unknown and the target not met.
	for _, c := range []struct {
		base      *BaselineFigures
		ratio     float64
		met, null bool
	}{{&BaselineFigures{CommitsPS: 5000}, 0.8, false, false}, {&BaselineFigures{CommitsPS: 3000}, 1.333, true, false}, {nil, 0, false, true}} {
		storm := &TimersFigures{Storm: true, Armed: 100000, Fired: 100000, StormDoneS: ptr(25.0), Baseline: c.base}
		storm.stormRate(2)
		if storm.StormFiredPerS == nil || *storm.StormFiredPerS != 4000 {
			t.Errorf("storm fired/s %s, want 4000", fmtPtr(storm.StormFiredPerS))
		}
		if c.null != (storm.StormRatio == nil) || !c.null && *storm.StormRatio != c.ratio {
			t.Errorf("storm ratio %s, want %v (null: %v)", fmtPtr(storm.StormRatio), c.ratio, c.null)
		}
		got = map[string]*bool{}
		for _, tg := range timersTargets(storm) {
			got[tg.Name] = tg.Met
		}
		if got["storm_timers"] == nil || !*got["storm_timers"] {
			t.Errorf("storm_timers target: %v, want met", got["storm_timers"])
		}
		if r := got["storm_ratio"]; c.null && r != nil || !c.null && (r == nil || *r != c.met) {
			t.Errorf("storm_ratio target with baseline %+v: %v, want met=%v", c.base, r, c.met)
		}
	}
	// Two baselines: the ratio is over the higher one, the first alone is kept beside it.
	for _, c := range []struct {
		before, after   float64
		ratio, ratioOne float64
	}{{5000, 2500, 0.8, 0.8}, {2500, 5000, 0.8, 1.6}, {4000, 4000, 1, 1}} {
		storm := &TimersFigures{Storm: true, Armed: 100000, Fired: 100000, StormDoneS: ptr(25.0),
			Baseline: &BaselineFigures{CommitsPS: c.before}, BaselineAfter: &BaselineFigures{CommitsPS: c.after}}
		storm.stormRate(2)
		if storm.StormRatio == nil || *storm.StormRatio != c.ratio || storm.StormRatioBefore == nil || *storm.StormRatioBefore != c.ratioOne {
			t.Errorf("baselines %v then %v: storm_ratio %s, before %s; want %v and %v", c.before, c.after, fmtPtr(storm.StormRatio),
				fmtPtr(storm.StormRatioBefore), c.ratio, c.ratioOne)
		}
	}
	// A baseline with refused commits: the storm's target fails when the baseline the ratio is over had them, not
	// when only the other (lower) one did; the steps suite's likewise.
	for _, c := range []struct {
		beforeErrs, afterErrs int64
		met                   bool
	}{{2135, 0, true}, {0, 7, false}, {0, 0, true}} {
		storm := &TimersFigures{Storm: true, Armed: 100000, Fired: 100000, StormDoneS: ptr(25.0),
			Baseline:      &BaselineFigures{CommitsPS: 2222, Latency: Latency{Errors: c.beforeErrs}},
			BaselineAfter: &BaselineFigures{CommitsPS: 4396, Latency: Latency{Errors: c.afterErrs}}}
		storm.stormRate(2)
		got = map[string]*bool{}
		for _, tg := range timersTargets(storm) {
			got[tg.Name] = tg.Met
		}
		if r := got["baseline_errors"]; r == nil || *r != c.met {
			t.Errorf("baseline errors %d then %d: baseline_errors target %v, want met=%v", c.beforeErrs, c.afterErrs, r, c.met)
		}
	}
	for _, errs := range []int64{0, 3} {
		got = map[string]*bool{}
		for _, tg := range stepsTargets(&StepsFigures{Baseline: &BaselineFigures{CommitsPS: 1000, Latency: Latency{Errors: errs}}}) {
			got[tg.Name] = tg.Met
		}
		if r := got["baseline_errors"]; r == nil || *r != (errs == 0) {
			t.Errorf("steps with %d baseline errors: baseline_errors target %v", errs, r)
		}
	}
	// The steps ratio wanted: 0.7 at 100 clients, 0.5 at 16.
	for _, c := range []struct {
		clients int
		ratio   float64
		met     bool
	}{{100, 0.65, false}, {100, 0.74, true}, {16, 0.55, true}, {16, 0.45, false}} {
		got = map[string]*bool{}
		for _, tg := range stepsTargets(&StepsFigures{Clients: c.clients, Ratio: ptr(c.ratio)}) {
			got[tg.Name] = tg.Met
		}
		if r := got["ratio"]; r == nil || *r != c.met {
			t.Errorf("steps at %d clients, ratio %v: target met %v, want %v", c.clients, c.ratio, r, c.met)
		}
	}
	// The database's bound: 0.4 ms of MariaDB CPU a fire on 2 cores is at most 5,000 fires/s, 1.25 of 4,000 raw
	// commits/s (the higher baseline); no bound without the CPU figures.
	bound := &TimersFigures{Storm: true, Armed: 100000, Fired: 100000, StormDoneS: ptr(25.0), Baseline: &BaselineFigures{CommitsPS: 3000},
		BaselineAfter: &BaselineFigures{CommitsPS: 4000}, FireCPU: &CPUUse{MsPerOp: map[string]float64{"mysqld": 0.4, "halley": 0.2}}}
	bound.stormRate(2)
	if bound.StormRatioDBBound == nil || *bound.StormRatioDBBound != 1.25 {
		t.Errorf("storm_ratio_db_bound %s, want 1.25", fmtPtr(bound.StormRatioDBBound))
	}
	bound.FireCPU = nil
	if bound.stormRate(2); bound.StormRatioDBBound != nil {
		t.Errorf("storm_ratio_db_bound %s without CPU figures, want none", fmtPtr(bound.StormRatioDBBound))
	}
	storm := &TimersFigures{Storm: true}
	got = map[string]*bool{}
	for _, tg := range timersTargets(storm) {
		got[tg.Name] = tg.Met
	}
	if _, ok := got["lateness_p99_ms"]; ok {
		t.Error("the storm is judged on its completion time, not on lateness")
	}
}

func TestPendingTask(t *testing.T) {
	ts := []taskView{{ID: "a", Status: "approved", Assignee: "u1"}, {ID: "b", Status: "pending", Assignee: "u2"}, {ID: "c", Status: "pending", Assignee: "u1"}}
	if got := pendingTask(ts, "u1"); got != "c" {
		t.Errorf("pendingTask = %q, want c", got)
	}
	if got := pendingTask(ts, "u3"); got != "" {
		t.Errorf("pendingTask for nobody's user = %q", got)
	}
}
