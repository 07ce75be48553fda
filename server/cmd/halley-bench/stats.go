package main

import (
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"time"
)

// maxSamples bounds the latencies one recorder keeps; past it, reservoir sampling keeps a uniform sample so a
// long background load cannot grow memory without bound. Counts, errors, mean and max stay exact.
const maxSamples = 1 << 20

// recorder collects the outcomes of one operation in one goroutine (no lock: each worker has its own and they
// are merged at the end).
type recorder struct {
	count    int64 // successful operations
	errors   int64
	errKinds map[string]int64 // "409", "500", "transport", ...
	sum      time.Duration
	max      time.Duration
	samples  []time.Duration
	seen     int64 // successes offered to the reservoir
	rng      *rand.Rand
}

func newRecorder() *recorder {
	return &recorder{errKinds: map[string]int64{}, rng: rand.New(rand.NewPCG(1, 2))} //nolint:gosec // G404: seeded sampling, reproducible from run to run; nothing secret
}

// ok records one successful operation that took d.
func (r *recorder) ok(d time.Duration) {
	r.count++
	r.sum += d
	if d > r.max {
		r.max = d
	}
	r.seen++
	if len(r.samples) < maxSamples {
		r.samples = append(r.samples, d)
		return
	}
	if j := r.rng.Int64N(r.seen); j < maxSamples {
		r.samples[j] = d
	}
}

// fail records one failed operation of the given kind.
func (r *recorder) fail(kind string) {
	r.errors++
	r.errKinds[kind]++
}

// merge adds o into r. Samples are concatenated and thinned to maxSamples by keeping every k-th one, which
// keeps the distribution when the parts are themselves uniform samples.
func (r *recorder) merge(o *recorder) {
	if o == nil {
		return
	}
	r.count += o.count
	r.errors += o.errors
	for k, v := range o.errKinds {
		r.errKinds[k] += v
	}
	r.sum += o.sum
	if o.max > r.max {
		r.max = o.max
	}
	r.seen += o.seen
	r.samples = append(r.samples, o.samples...)
	if n := len(r.samples); n > maxSamples {
		step := float64(n) / maxSamples
		thin := make([]time.Duration, 0, maxSamples)
		for f := 0.0; int(f) < n && len(thin) < maxSamples; f += step {
			thin = append(thin, r.samples[int(f)])
		}
		r.samples = thin
	}
}

// Latency is the JSON summary of one operation's latencies, in milliseconds.
type Latency struct {
	Count  int64            `json:"count"`
	Errors int64            `json:"errors"`
	Kinds  map[string]int64 `json:"error_kinds,omitempty"`
	Mean   float64          `json:"mean_ms"`
	P50    float64          `json:"p50_ms"`
	P95    float64          `json:"p95_ms"`
	P99    float64          `json:"p99_ms"`
	Max    float64          `json:"max_ms"`
}

// summary computes the latency summary of the recorder.
func (r *recorder) summary() Latency {
	s := Latency{Count: r.count, Errors: r.errors, Max: ms(r.max)}
	if len(r.errKinds) > 0 {
		s.Kinds = r.errKinds
	}
	if r.count > 0 {
		s.Mean = ms(r.sum / time.Duration(r.count))
	}
	sorted := sortedCopy(r.samples)
	s.P50 = ms(percentile(sorted, 50))
	s.P95 = ms(percentile(sorted, 95))
	s.P99 = ms(percentile(sorted, 99))
	return s
}

func sortedCopy(ds []time.Duration) []time.Duration {
	c := append([]time.Duration(nil), ds...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c
}

// percentile returns the p-th percentile (0 < p ≤ 100) of sorted by the nearest-rank method: the smallest
// value such that at least p% of the values are ≤ it. Zero for an empty slice.
func percentile[T ~int64 | ~float64](sorted []T, p float64) T {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	if rank < 1 {
		rank = 1
	}
	if rank > n {
		rank = n
	}
	return sorted[rank-1]
}

// ms converts a duration to milliseconds rounded to the microsecond.
func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

// round3 rounds to three decimals (JSON figures stay readable; the precision is far below the noise).
func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// ratio returns a/b rounded to three decimals, or nil when b is not positive (no baseline to compare with).
func ratio(a, b float64) *float64 {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return nil
	}
	v := round3(a / b)
	return &v
}

// perSecond returns n per second over d, rounded to one decimal; zero for a zero duration.
func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return math.Round(float64(n)/d.Seconds()*10) / 10
}

// Target is one target of the issue and whether this run met it. Met is nil when the figure is missing.
type Target struct {
	Name  string   `json:"name"`
	Want  string   `json:"want"` // e.g. ">= 0.5"
	Value *float64 `json:"value"`
	Met   *bool    `json:"met"`
}

// atLeast and atMost build targets; a nil value (figure not measured) leaves Met nil.
func atLeast(name string, value *float64, want float64) Target {
	return target(name, ">= "+fmtNum(want), value, func(v float64) bool { return v >= want })
}

func atMost(name string, value *float64, want float64) Target {
	return target(name, "<= "+fmtNum(want), value, func(v float64) bool { return v <= want })
}

func target(name, want string, value *float64, ok func(float64) bool) Target {
	t := Target{Name: name, Want: want, Value: value}
	if value != nil {
		m := ok(*value)
		t.Met = &m
	}
	return t
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func ptr[T any](v T) *T { return &v }
