package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// Soak knobs (environment): HALLEY_SOAK=1 enables the test, HALLEY_SOAK_DURATION (10m), HALLEY_SOAK_DB
// (sqlite or mysql; mysql uses HALLEY_TEST_MYSQL), HALLEY_SOAK_CLIENTS (16), HALLEY_SOAK_SAMPLE (5s).
const (
	// The last third of the samples after warm-up may be this much above the first third (see flatness)...
	soakGoroutineRatio = 1.10
	soakRSSRatio       = 1.20
	// ...plus this much slack, so that a small process is not failed for a handful of goroutines or pages.
	soakGoroutineSlack = 5
	soakRSSSlack       = 8 << 20
)

// TestSoak starts the real binary, drives a steady mixed load (starts, reads, approvals, delay timers) for
// HALLEY_SOAK_DURATION and fails unless the goroutine count and the RSS stay flat. See docs/faults.md#soak.
func TestSoak(t *testing.T) {
	if os.Getenv("HALLEY_SOAK") != "1" {
		t.Skip("HALLEY_SOAK=1 runs the soak test (make soak)")
	}
	duration := soakEnvDuration(t, "HALLEY_SOAK_DURATION", 10*time.Minute)
	interval := soakEnvDuration(t, "HALLEY_SOAK_SAMPLE", 5*time.Second)
	clients := 16
	if v := os.Getenv("HALLEY_SOAK_CLIENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("HALLEY_SOAK_CLIENTS=%q: want a positive number", v)
		}
		clients = n
	}
	extra := []string{"HALLEY_ADMIN_PASSWORD=soak-test-pw", "HALLEY_LOG_LEVEL=warn"}
	switch db := os.Getenv("HALLEY_SOAK_DB"); db {
	case "", store.SQLite:
	case store.MySQL:
		extra = append(extra, "HALLEY_DATABASE_URL="+storetest.URL(t, store.MySQL))
	default:
		t.Fatalf("HALLEY_SOAK_DB=%q: want sqlite or mysql", db)
	}

	_, base, logs := start(t, buildHalley(t), extra...)
	// One kept-alive connection per client: the default two idle connections per host would make the load
	// open and close connections all the time, and each connection is a server goroutine.
	admin := &soakClient{base: base, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}}
	var login struct{ Token string }
	if err := admin.call("POST", "/api/v1/auth/login", map[string]string{"username": "admin", "password": "soak-test-pw"}, 200, &login); err != nil {
		t.Fatal(err)
	}
	admin.token = login.Token
	def := map[string]any{
		"nodes": []any{
			map[string]any{"id": "start", "type": "start", "trigger": map[string]any{"kind": "manual"}},
			map[string]any{"id": "wait", "type": "delay", "interval": 1},
			map[string]any{"id": "lead", "type": "approval", "approvers": map[string]any{"users": []string{"admin"}}, "sign": "or"},
			map[string]any{"id": "end", "type": "end"},
		},
		"edges": []any{
			map[string]any{"from": "start", "to": "wait"},
			map[string]any{"from": "wait", "to": "lead"},
			map[string]any{"from": "lead", "to": "end"},
		},
	}
	for _, step := range []struct {
		path string
		body any
		want int
	}{
		{"/api/v1/templates", map[string]any{"key": "soak", "name": "Soak", "definition": def}, 201},
		{"/api/v1/templates/soak/publish", nil, 201},
	} {
		if err := admin.call("POST", step.path, step.body, step.want, nil); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var ops, failures atomic.Int64
	var firstErr sync.Once
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n, err := admin.cycle(ctx)
				ops.Add(int64(n))
				if err != nil && ctx.Err() == nil {
					failures.Add(1)
					firstErr.Do(func() { t.Logf("first failure: %v", err) })
				}
			}
		}()
	}

	var samples []soakSample
	began := time.Now()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			s, err := sampleMetrics(base)
			if err != nil {
				// Halley stopped answering (or died): nothing more to measure.
				cancel()
				wg.Wait()
				t.Fatalf("sample: %v\nlogs:\n%s", err, logs)
			}
			s.at = time.Since(began)
			s.ops = ops.Load()
			samples = append(samples, s)
			t.Logf("t=%4.0fs goroutines=%d rss=%.1fMiB ops=%d failures=%d", s.at.Seconds(), s.goroutines, float64(s.rss)/(1<<20), s.ops, failures.Load())
		}
	}
	wg.Wait()

	total, failed := ops.Load(), failures.Load()
	t.Logf("%d requests in %s (%.1f/s), %d failed cycles", total, duration, float64(total)/duration.Seconds(), failed)
	if failed*100 > total {
		t.Errorf("%d of %d cycles failed (more than 1%%)", failed, total)
	}
	verdict, err := flatness(samples)
	t.Log(verdict)
	if err != nil {
		t.Error(err)
	}
}

// soakClient is an HTTP client safe to share between goroutines (it never calls t.Fatal).
type soakClient struct {
	base   string
	token  string
	client *http.Client
}

func (c *soakClient) call(method, path string, body any, want int, out any) error {
	return c.callCtx(context.Background(), method, path, body, want, out)
}

func (c *soakClient) callCtx(ctx context.Context, method, path string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != want {
		return fmt.Errorf("%s %s: %d, want %d: %s", method, path, res.StatusCode, want, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// cycle is one unit of the mixed load: start an instance (it arms a 1-second delay timer), read it until the
// timer has fired and its approval task is open, approve the task, check that the instance completed, and list
// instances and tasks. It returns the number of requests made.
func (c *soakClient) cycle(ctx context.Context) (int, error) {
	type instance struct {
		ID     string
		Status string
		Tasks  []struct{ ID, Status string }
	}
	var inst instance
	n := 1
	if err := c.callCtx(ctx, "POST", "/api/v1/instances", map[string]any{"template": "soak", "context": map[string]any{"n": 1}}, 201, &inst); err != nil {
		return n, err
	}
	deadline := time.Now().Add(30 * time.Second)
	task := ""
	for task == "" {
		if time.Now().After(deadline) {
			return n, fmt.Errorf("instance %s: no approval task 30 s after start (the delay timer did not fire)", inst.ID)
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		n++
		if err := c.callCtx(ctx, "GET", "/api/v1/instances/"+inst.ID, nil, 200, &inst); err != nil {
			return n, err
		}
		for _, tk := range inst.Tasks {
			if tk.Status == "pending" {
				task = tk.ID
			}
		}
	}
	n++
	if err := c.callCtx(ctx, "POST", "/api/v1/tasks/"+task+"/approve", map[string]any{"comment": "soak"}, 200, nil); err != nil {
		return n, err
	}
	n++
	if err := c.callCtx(ctx, "GET", "/api/v1/instances/"+inst.ID, nil, 200, &inst); err != nil {
		return n, err
	}
	if inst.Status != "completed" {
		return n, fmt.Errorf("instance %s is %s after its only approval", inst.ID, inst.Status)
	}
	for _, p := range []string{"/api/v1/instances?limit=20", "/api/v1/tasks", "/api/v1/instances/" + inst.ID + "/history"} {
		n++
		if err := c.callCtx(ctx, "GET", p, nil, 200, nil); err != nil {
			return n, err
		}
	}
	return n, nil
}

type soakSample struct {
	at         time.Duration
	goroutines int
	rss        int64
	ops        int64
}

// sampleMetrics reads go_goroutines and process_resident_memory_bytes from /metrics.
func sampleMetrics(base string) (soakSample, error) {
	res, err := http.Get(base + "/metrics")
	if err != nil {
		return soakSample{}, err
	}
	defer res.Body.Close()
	var s soakSample
	found := 0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_goroutines":
			s.goroutines = int(f)
			found++
		case "process_resident_memory_bytes":
			s.rss = int64(f)
			found++
		}
	}
	if found != 2 {
		return s, fmt.Errorf("/metrics lacks go_goroutines or process_resident_memory_bytes (status %d)", res.StatusCode)
	}
	return s, sc.Err()
}

// flatness drops the first fifth of the samples (warm-up: pools, caches and the heap settle), splits the rest
// into thirds and fails when the last third is above the first by more than the tolerance, comparing
//   - for goroutines, the floor (minimum): a sample also counts the goroutines of requests in flight, which
//     follow the latency of a shared machine, while a leaked goroutine stays and lifts every sample;
//   - for RSS, the median, which ignores the sawtooth of GC cycles.
func flatness(samples []soakSample) (string, error) {
	rest := samples[len(samples)/5:]
	if len(rest) < 6 {
		return "", fmt.Errorf("only %d samples after warm-up; run longer or sample more often", len(rest))
	}
	third := len(rest) / 3
	first, last := rest[:third], rest[len(rest)-third:]
	goroutines := func(s soakSample) float64 { return float64(s.goroutines) }
	rss := func(s soakSample) float64 { return float64(s.rss) }
	g0, g1 := quantile(first, goroutines, 0), quantile(last, goroutines, 0)
	r0, r1 := quantile(first, rss, 0.5), quantile(last, rss, 0.5)
	verdict := fmt.Sprintf("after warm-up (%d of %d samples dropped): goroutine floor %.0f → %.0f (limit %.0f, max seen %.0f), RSS median %.1f → %.1f MiB (limit %.1f MiB)",
		len(samples)-len(rest), len(samples), g0, g1, g0*soakGoroutineRatio+soakGoroutineSlack, quantile(rest, goroutines, 1),
		r0/(1<<20), r1/(1<<20), (r0*soakRSSRatio+soakRSSSlack)/(1<<20))
	var bad []string
	if g1 > g0*soakGoroutineRatio+soakGoroutineSlack {
		bad = append(bad, "the goroutine count grew")
	}
	if r1 > r0*soakRSSRatio+soakRSSSlack {
		bad = append(bad, "the RSS grew")
	}
	if len(bad) > 0 {
		return verdict, fmt.Errorf("not flat: %s", strings.Join(bad, " and "))
	}
	return verdict, nil
}

// quantile is the q-quantile (0 = minimum, 0.5 = median, 1 = maximum) of f over xs, without interpolation.
func quantile(xs []soakSample, f func(soakSample) float64, q float64) float64 {
	v := make([]float64, len(xs))
	for i, x := range xs {
		v[i] = f(x)
	}
	slices.Sort(v)
	return v[int(q*float64(len(v)-1)+0.5)]
}

func soakEnvDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration like 10m", name, v)
	}
	return d
}
