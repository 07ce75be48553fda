package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/halley-bpm/halley/plugin"
)

// echoPlugin is the trivial plugin: read the input, echo one number back into the context.
const echoPlugin = `import json, sys
d = json.load(sys.stdin)
print(json.dumps({"context": {"echo": d.get("context", {}).get("n")}}))
`

// PluginsFigures is the JSON line of the plugins suite.
type PluginsFigures struct {
	Suite       string   `json:"suite"`
	Runs        int      `json:"runs"`
	Concurrency int      `json:"concurrency"`
	Python      string   `json:"python"`
	Halley      Side     `json:"halley"`
	Bare        Side     `json:"bare"`        // the two bare rounds together
	BareRounds  []Side   `json:"bare_rounds"` // before and after the Halley round
	Ratio       *float64 `json:"ratio"`       // halley runs/s ÷ bare runs/s
	// MySQL's global status counters over the Halley round, per run (server-wide: an upper bound).
	MySQLPerRun map[string]float64 `json:"mysql_status_per_run,omitempty"`
	Targets     []Target           `json:"targets"`
	Machine     *Machine           `json:"machine"`
}

// Side is one way of running the plugin R times.
type Side struct {
	CPU     *CPUUse `json:"cpu,omitempty"` // per op = per run; children (python3) included
	Runs    int64   `json:"runs"`
	Seconds float64 `json:"seconds"`
	PerS    float64 `json:"runs_per_s"`
	Latency Latency `json:"latency"`
}

func runPlugins(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("halley-bench plugins", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	runs := fs.Int("runs", 200, "plugin runs on each side")
	mysqlURL := fs.String("mysql", "", "Halley's database, mysql://root@127.0.0.1:3306/db (optional: statements per run)")
	halleyPID := fs.Int("halley-pid", 0, "Halley's process id, for its CPU time (0: not measured)")
	conc := fs.Int("concurrency", 4, "runs at once on each side (Halley runs at most HALLEY_PLUGIN_WORKERS at once)")
	python := fs.String("python", plugin.DefaultPython, "interpreter of the bare loop, looked up on the plugins' PATH as Halley does")
	maxTime := fs.Duration("max-time", 10*time.Minute, "stop a side after this long")
	var pf profileFlags
	pf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *runs < 1 || *runs > 1_000_000 || *conc < 1 || *conc > 256 {
		return fmt.Errorf("--runs must be 1..1,000,000 and --concurrency 1..256")
	}
	m := newMachine()
	c, err := newClient(cf.url, *conc)
	if err != nil {
		return err
	}
	defer c.close()
	var db *sql.DB
	if *mysqlURL != "" {
		if db, err = openMySQL(*mysqlURL, 2); err != nil {
			return err
		}
		defer db.Close()
	}
	py, err := findPython(*python)
	if err != nil {
		return err
	}
	id := runID()
	admin, err := c.login(ctx, cf.adminUser, cf.adminPassword)
	if err != nil {
		return err
	}
	name, fn := "bench-echo-"+id, "echo"+id
	if err := c.uploadPlugin(ctx, admin, name, "python", "30s", []byte(echoPlugin)); err != nil {
		return err
	}
	key := "bench-plugins-" + id
	def := map[string]any{
		"nodes": []map[string]any{
			{"id": "start", "type": "start", "trigger": map[string]any{"kind": "sync-api", "module": "bench", "function": fn, "method": "post",
				"login_verification": "none", "allow_remote_ips": "127.0.0.1/32,::1/128"}},
			{"id": "run", "type": "auto", "name": "Echo", "plugins": map[string]any{"pre": []string{name}}},
			{"id": "end", "type": "end"},
		},
		"edges": []map[string]any{{"from": "start", "to": "run"}, {"from": "run", "to": "end"}},
	}
	if err := c.publishTemplate(ctx, admin, key, def); err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "halley-bench-plugin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "echo.py")
	if err := os.WriteFile(script, []byte(echoPlugin), 0o644); err != nil { //nolint:gosec // G306: the sandboxed plugin uid must read the script
		return err
	}
	warm := min(*conc*2, *runs)
	watch := newCPUWatch(*halleyPID)
	measured := func(op func(i int) error) (Side, error) {
		meter := startCPU(watch, 0)
		s, err := drive(ctx, *runs, *conc, *maxTime, op)
		s.CPU = ptr(meter.stop(s.Runs))
		return s, err
	}
	bare := func() (Side, error) {
		return measured(func(i int) error { return spawnOnce(ctx, py, script, dir, i) })
	}
	viaHalley := func() (Side, error) {
		return measured(func(i int) error { return triggerOnce(ctx, c, fn, i) })
	}
	// Warm both paths (page cache, connections, Python's own files), then bare, Halley, bare: the machine's
	// load drifts, and the two bare rounds bracket the Halley one.
	if _, err := drive(ctx, warm, *conc, *maxTime, func(i int) error { return spawnOnce(ctx, py, script, dir, i) }); err != nil {
		return fmt.Errorf("bare warm-up: %w", err)
	}
	if _, err := drive(ctx, warm, *conc, *maxTime, func(i int) error { return triggerOnce(ctx, c, fn, i) }); err != nil {
		return fmt.Errorf("halley warm-up: %w", err)
	}
	fmt.Fprintf(stderr, "plugins: %d runs at concurrency %d: bare %s, Halley, bare again\n", *runs, *conc, py)
	b1, err := bare()
	if err != nil {
		return err
	}
	prof := pf.start(ctx, stderr)
	var before map[string]int64
	if db != nil {
		before, _ = globalStatus(ctx, db)
	}
	h, err := viaHalley()
	prof.wait(stderr)
	if err != nil {
		return err
	}
	var perRun map[string]float64
	if before != nil {
		if after, err := globalStatus(ctx, db); err == nil {
			_, perRun = statusDelta(before, after, h.Runs)
		}
	}
	b2, err := bare()
	if err != nil {
		return err
	}
	m.finish()
	f := PluginsFigures{Suite: "plugins", Runs: *runs, Concurrency: *conc, Python: py, Halley: h, BareRounds: []Side{b1, b2}, Machine: &m}
	f.Bare = combine(b1, b2)
	f.MySQLPerRun = perRun
	f.Ratio = ratio(h.PerS, f.Bare.PerS)
	f.Targets = []Target{atLeast("ratio", f.Ratio, 2.0), atMost("errors", ptr(float64(h.Latency.Errors+f.Bare.Latency.Errors)), 0)}
	summary := []string{
		fmt.Sprintf("plugins: %d runs at concurrency %d of a trivial Python plugin (%s)", f.Runs, f.Concurrency, py),
		fmt.Sprintf("  halley  %6.1f runs/s  (%d runs in %.2f s: POST /trigger/sync → auto node → plugin → end, answered when the instance ended)", h.PerS, h.Runs, h.Seconds),
		latencyLine("halley", h.Latency),
		"  cpu (halley round): " + h.CPU.String(),
		fmt.Sprintf("  bare    %6.1f runs/s  (rounds: %.1f and %.1f runs/s: exec python3 file, JSON on stdin, read stdout)", f.Bare.PerS, b1.PerS, b2.PerS),
		latencyLine("bare", f.Bare.Latency),
		"  cpu (first bare round): " + b1.CPU.String(),
		fmt.Sprintf("  ratio = halley / bare = %s", fmtPtr(f.Ratio)),
	}
	if p := f.MySQLPerRun; p != nil {
		summary = append(summary, fmt.Sprintf("  mysql per Halley run (server-wide counters, upper bound): %.1f statements, %.2f commits, %.1f inserts, %.1f updates, %.1f selects",
			p["Questions"], p["Com_commit"], p["Com_insert"], p["Com_update"], p["Com_select"]))
	}
	summary = append(summary, targetLines(f.Targets)...)
	summary = append(summary, "machine: "+fmt.Sprintf("%d CPUs, %d MB; ", m.NProc, m.MemTotalMB)+m.loadString()+" (shared machine: figures are noisy)")
	return emit(stdout, summary, f)
}

// findPython resolves the interpreter on the plugins' PATH, as plugin.ProcessRunner does, so both sides run
// the same binary.
func findPython(name string) (string, error) {
	if filepath.IsAbs(name) {
		return name, nil
	}
	for _, d := range filepath.SplitList(plugin.DefaultPath) {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on %s", name, plugin.DefaultPath)
}

// drive runs op n times at concurrency conc (bounded by maxTime) and measures it.
func drive(ctx context.Context, n, conc int, maxTime time.Duration, op func(i int) error) (Side, error) {
	ctx, cancel := context.WithTimeout(ctx, maxTime)
	defer cancel()
	var next atomic.Int64
	recs := make([]*recorder, conc)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conc {
		recs[w] = newRecorder()
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := op(i); err != nil {
					recs[w].fail(errKind(err))
					continue
				}
				recs[w].ok(time.Since(t0))
			}
		}(w)
	}
	wg.Wait()
	d := time.Since(start)
	all := newRecorder()
	for _, r := range recs {
		all.merge(r)
	}
	if ctx.Err() != nil && all.count < int64(n) {
		return Side{}, fmt.Errorf("stopped after %s with %d of %d runs done", maxTime, all.count, n)
	}
	return Side{Runs: all.count, Seconds: round3(d.Seconds()), PerS: perSecond(all.count, d), Latency: all.summary()}, nil
}

// combine adds two rounds of the same side.
func combine(a, b Side) Side {
	s := Side{Runs: a.Runs + b.Runs, Seconds: round3(a.Seconds + b.Seconds)}
	s.PerS = perSecond(s.Runs, time.Duration(s.Seconds*float64(time.Second)))
	// Latencies: weighted mean, and the worse of the two tails (the rounds' samples are not kept).
	s.Latency = Latency{Count: a.Latency.Count + b.Latency.Count, Errors: a.Latency.Errors + b.Latency.Errors,
		P50: max(a.Latency.P50, b.Latency.P50), P95: max(a.Latency.P95, b.Latency.P95), P99: max(a.Latency.P99, b.Latency.P99), Max: max(a.Latency.Max, b.Latency.Max)}
	if s.Latency.Count > 0 {
		s.Latency.Mean = round3((a.Latency.Mean*float64(a.Latency.Count) + b.Latency.Mean*float64(b.Latency.Count)) / float64(s.Latency.Count))
	}
	return s
}

// spawnOnce is the bare side: python3 file, the input on stdin, one JSON object read from stdout, with an
// environment as scrubbed as the runner's.
func spawnOnce(ctx context.Context, py, script, dir string, i int) error {
	in, _ := json.Marshal(map[string]any{"run_id": fmt.Sprintf("bare-%d", i), "instance_id": "bare", "node_id": "run", "phase": "pre",
		"context": map[string]any{"n": i}, "node": map[string]any{"id": "run", "type": "auto"}, "callback_url": ""})
	cmd := exec.CommandContext(ctx, py, script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + plugin.DefaultPath, "HOME=" + dir, "TMPDIR=" + dir, "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"}
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return err
	}
	var o struct {
		Context struct {
			Echo int `json:"echo"`
		} `json:"context"`
	}
	if err := json.Unmarshal(out.Bytes(), &o); err != nil || o.Context.Echo != i {
		return fmt.Errorf("bare run %d: unexpected output %q", i, out.String())
	}
	return nil
}

// triggerOnce is the Halley side: one sync trigger call, answered when the instance has ended.
func triggerOnce(ctx context.Context, c *client, fn string, i int) error {
	var r struct {
		Status  string `json:"status"`
		Context struct {
			Echo int `json:"echo"`
		} `json:"context"`
	}
	if err := c.do(ctx, http.MethodPost, "/api/v1/trigger/sync/bench/"+fn+"?wait=30", "", map[string]any{"n": i}, &r); err != nil {
		return err
	}
	if r.Status != "completed" || r.Context.Echo != i {
		return fmt.Errorf("halley run %d: status %q, echo %d", i, r.Status, r.Context.Echo)
	}
	return nil
}
