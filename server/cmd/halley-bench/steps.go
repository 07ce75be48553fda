package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/halley-bpm/halley/service/store"
)

// stepsPerFlow is seeds/004's scenario: one start and four approvals per instance.
const approvalsPerFlow = 4

// commonFlags are the flags every suite shares.
type commonFlags struct {
	url           string
	adminUser     string
	adminPassword string
	// http is how the step load talks HTTP (wire.go): "lean" or "std".
	http string
}

func (c *commonFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "url", "http://127.0.0.1:8080", "Halley's base URL (loopback only)")
	fs.StringVar(&c.adminUser, "admin-user", "admin", "admin user name")
	fs.StringVar(&c.adminPassword, "admin-password", "admin", "admin password (HALLEY_ADMIN_PASSWORD of the server)")
	fs.StringVar(&c.http, "http", string(wireLean), "how the step load's clients talk HTTP: lean (a connection each, driven by the client's goroutine) or std (net/http's client)")
}

// runID makes the names of one run (users, templates, tables) unique, so runs never collide.
func runID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("0102150405") + hex.EncodeToString(b)[:4]
}

// StepsFigures is the JSON line of the steps suite.
type StepsFigures struct {
	Suite     string             `json:"suite"`
	Clients   int                `json:"clients"`
	DurationS float64            `json:"duration_s"`
	WarmupS   float64            `json:"warmup_s"`
	Steps     int64              `json:"steps"`
	StepsPerS float64            `json:"steps_per_s"`
	FlowsDone int64              `json:"flows_completed"`
	ReqPerS   float64            `json:"requests_per_s"` // steps and the task look-ups between them
	Errors    int64              `json:"errors"`
	StepsLat  Latency            `json:"step_latency"` // start and approve together
	Ops       map[string]Latency `json:"ops"`
	Baseline  *BaselineFigures   `json:"baseline,omitempty"`
	Ratio     *float64           `json:"ratio"`
	LatRatio  *float64           `json:"latency_ratio"`
	// RatioDBBound is the highest ratio MariaDB's CPU per step allows on this machine (dbBound).
	RatioDBBound *float64 `json:"ratio_db_bound,omitempty"`
	// MySQL's global status counters over the measured phase, in total and per step (server-wide: other
	// databases' traffic is included, so the per-step figures are upper bounds).
	MySQLDelta   map[string]int64   `json:"mysql_status_delta,omitempty"`
	CPU          *CPUUse            `json:"cpu,omitempty"` // over the measured phase; cpu_ms_per_op is per step
	MySQLPerStep map[string]float64 `json:"mysql_status_per_step,omitempty"`
	Targets      []Target           `json:"targets,omitempty"`
	Machine      *Machine           `json:"machine,omitempty"`
}

// BaselineFigures is the raw-commit loop of the same run.
type BaselineFigures struct {
	CPU        *CPUUse `json:"cpu,omitempty"` // cpu_ms_per_op is per commit
	Clients    int     `json:"clients"`
	DurationS  float64 `json:"duration_s"`
	Commits    int64   `json:"commits"`
	CommitsPS  float64 `json:"commits_per_s"`
	Latency    Latency `json:"latency"`
	Table      string  `json:"table"`
	Statements string  `json:"statements"`
}

func runSteps(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("halley-bench steps", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	clients := fs.Int("clients", 100, "concurrent clients, each with its own approver user")
	duration := fs.Duration("duration", 30*time.Second, "measured time")
	warmup := fs.Duration("warmup", 3*time.Second, "time run before measuring (not counted)")
	baseline := fs.Bool("baseline", false, "also run the raw single-row INSERT transaction loop on --mysql, same concurrency")
	baselineDur := fs.Duration("baseline-duration", 0, "measured time of the baseline (default: --duration)")
	mysqlURL := fs.String("mysql", "", "Halley's database, mysql://user:pass@127.0.0.1:3306/db (for --baseline and the status counters)")
	halleyPID := fs.Int("halley-pid", 0, "Halley's process id, for its CPU time (0: not measured)")
	var pf profileFlags
	pf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *clients < 1 || *clients > 1000 {
		return fmt.Errorf("--clients must be 1..1000")
	}
	if _, err := parseWireMode(cf.http); err != nil {
		return err
	}
	if *duration <= 0 || *duration > 2*time.Hour || *warmup < 0 || *warmup > 10*time.Minute {
		return fmt.Errorf("--duration must be in (0, 2h] and --warmup in [0, 10m]")
	}
	if *baselineDur == 0 {
		*baselineDur = *duration
	}
	if *baseline && *mysqlURL == "" {
		return fmt.Errorf("--baseline needs --mysql (the database Halley uses)")
	}
	m := newMachine()
	c, err := newClient(cf.url, *clients)
	if err != nil {
		return err
	}
	defer c.close()
	id := runID()

	// A small pool for the counters; the baseline opens (and closes) its own, so that its connections do not
	// sit idle while Halley runs: MySQL's max_connections (151 by default) is shared with Halley's pool.
	var db *sql.DB
	if *mysqlURL != "" {
		if db, err = openMySQL(*mysqlURL, 2); err != nil {
			return err
		}
		defer db.Close()
	}
	m.versions(ctx, db, nil)

	figs := StepsFigures{Suite: "steps", Clients: *clients, DurationS: duration.Seconds(), WarmupS: warmup.Seconds()}
	if *baseline {
		fmt.Fprintf(stderr, "steps: baseline: %d clients of one-row INSERT transactions for %s (+%s warm-up)\n", *clients, *baselineDur, *warmup)
		meter := startCPU(newCPUWatch(*halleyPID), *warmup)
		bdb, err := openMySQL(*mysqlURL, *clients)
		if err != nil {
			return err
		}
		b, err := runBaseline(ctx, bdb, id, *clients, *warmup, *baselineDur)
		bdb.Close()
		if err != nil {
			return err
		}
		b.CPU = ptr(meter.stop(b.Commits))
		figs.Baseline = b
	}

	load, err := setupStepLoad(ctx, c, cf, id, *clients, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "steps: %d clients for %s (+%s warm-up) against %s\n", *clients, *duration, *warmup, cf.url)
	// At the end of the warm-up: the status counters, and the profile (within the measured phase).
	var before map[string]int64
	var prof *profiler
	meter := startCPU(newCPUWatch(*halleyPID), *warmup)
	measuring := make(chan struct{})
	go func() {
		defer close(measuring)
		sleepCtx(ctx, *warmup)
		if db != nil {
			before, _ = globalStatus(ctx, db)
		}
		pf.seconds = min(pf.seconds, int(duration.Seconds()))
		prof = pf.start(ctx, stderr)
	}()
	res := load.run(ctx, *warmup, *duration, nil)
	<-measuring
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var after map[string]int64
	if db != nil && before != nil {
		after, _ = globalStatus(ctx, db)
	}
	fillSteps(&figs, res, *duration)
	figs.CPU = ptr(meter.stop(figs.Steps))
	if figs.Baseline != nil {
		figs.RatioDBBound = dbBound(figs.CPU, m.NProc, figs.Baseline.CommitsPS)
	}
	prof.wait(stderr)
	m.finish()
	figs.Machine = &m
	if after != nil {
		figs.MySQLDelta, figs.MySQLPerStep = statusDelta(before, after, figs.Steps)
	}

	summary := []string{
		fmt.Sprintf("steps: %d clients, %s measured: %d steps = %.1f steps/s (%d flows of 1 start + %d approvals completed; %.1f requests/s with the task look-ups); errors %d",
			figs.Clients, *duration, figs.Steps, figs.StepsPerS, figs.FlowsDone, approvalsPerFlow, figs.ReqPerS, figs.Errors),
		latencyLine("step", figs.StepsLat),
	}
	if figs.CPU != nil {
		summary = append(summary, "  cpu: "+figs.CPU.String())
	}
	for _, op := range []string{"start", "approve", "next_task"} {
		summary = append(summary, latencyLine(op, figs.Ops[op]))
	}
	if b := figs.Baseline; b != nil {
		summary = append(summary, fmt.Sprintf("baseline: %d clients, %s: %d commits = %.1f commits/s", b.Clients, time.Duration(b.DurationS*float64(time.Second)), b.Commits, b.CommitsPS),
			latencyLine("commit", b.Latency))
		if b.CPU != nil {
			summary = append(summary, "  cpu: "+b.CPU.String())
		}
		summary = append(summary, fmt.Sprintf("ratio = steps_per_s / baseline_commits_per_s = %s; latency_ratio = step p99 / baseline p99 = %s", fmtPtr(figs.Ratio), fmtPtr(figs.LatRatio)))
		if figs.RatioDBBound != nil {
			summary = append(summary, fmt.Sprintf("  limit: at %.3f ms of MariaDB CPU a step, MariaDB alone on all %d cores would reach ratio %s at most (ratio_db_bound)",
				figs.CPU.MsPerOp["mysqld"], m.NProc, fmtPtr(figs.RatioDBBound)))
		}
	}
	if p := figs.MySQLPerStep; p != nil {
		summary = append(summary, fmt.Sprintf("mysql per step (server-wide counters, upper bound): %.1f statements (Questions), %.2f commits, %.2f rollbacks, %.1f inserts, %.1f updates, %.1f deletes, %.1f selects; deadlocks %d, row lock waits %d over the phase",
			p["Questions"], p["Com_commit"], p["Com_rollback"], p["Com_insert"], p["Com_update"], p["Com_delete"], p["Com_select"], figs.MySQLDelta["Innodb_deadlocks"], figs.MySQLDelta["Innodb_row_lock_waits"]))
	}
	if d := figs.MySQLDelta; d["Com_commit"] > 0 && d["Com_stmt_execute"] > 0 {
		// MariaDB: a group is one compound statement with its COMMIT; Halley runs nothing else as a prepared statement.
		summary = append(summary, fmt.Sprintf("  prepared groups: %d run on a prepared statement, %d of them prepared for the run, against %d commits: %.0f %% of the groups on a kept statement",
			d["Com_stmt_execute"], d["Com_stmt_prepare"], d["Com_commit"], 100*float64(d["Com_stmt_execute"]-d["Com_stmt_prepare"])/float64(d["Com_commit"])))
	}
	summary = append(summary, targetLines(figs.Targets)...)
	summary = append(summary, "machine: "+fmt.Sprintf("%d CPUs, %d MB, MySQL %s; ", m.NProc, m.MemTotalMB, m.MariaDB)+m.loadString()+" (shared machine: figures are noisy)")
	return emit(stdout, summary, figs)
}

// fillSteps computes the steps figures from a load result.
func fillSteps(f *StepsFigures, res loadResult, d time.Duration) {
	step := newRecorder()
	step.merge(res.ops["start"])
	step.merge(res.ops["approve"])
	f.Steps = step.count
	f.StepsPerS = perSecond(step.count, d)
	f.FlowsDone = res.flows
	var reqs int64
	f.Ops = map[string]Latency{}
	for name, r := range res.ops {
		f.Ops[name] = r.summary()
		reqs += r.count + r.errors
		f.Errors += r.errors
	}
	f.ReqPerS = perSecond(reqs, d)
	f.StepsLat = step.summary()
	if b := f.Baseline; b != nil {
		f.Ratio = ratio(f.StepsPerS, b.CommitsPS)
		f.LatRatio = ratio(f.StepsLat.P99, b.Latency.P99)
	}
	f.Targets = stepsTargets(f)
}

// stepsTargets are the targets for the steps suite: a ratio of 0.7 at 100 clients or more (issue 31),
// 0.5 below (16 clients: the moderate concurrency most deployments see).
func stepsTargets(f *StepsFigures) []Target {
	want := 0.5
	if f.Clients >= 100 {
		want = 0.7
	}
	ts := []Target{
		atLeast("ratio", f.Ratio, want),
		atMost("latency_ratio", f.LatRatio, 2),
		atMost("errors", ptr(float64(f.Errors)), 0),
	}
	if b := f.Baseline; b != nil {
		// A commit the server refused (too many connections, say) is not in the yardstick: the ratio over it
		// would read better than it is.
		ts = append(ts, atMost("baseline_errors", ptr(float64(b.Latency.Errors)), 0))
	}
	return ts
}

func fmtPtr(f *float64) string {
	if f == nil {
		return "n/a"
	}
	return fmtNum(*f)
}

// openMySQL opens the database with the same driver settings Halley uses (store.ParseURL), so the baseline
// pays what Halley pays per statement.
func openMySQL(raw string, conns int) (*sql.DB, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--mysql: %v", err)
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
		return nil, fmt.Errorf("--mysql: the benchmark only talks to loopback addresses (got %q)", h)
	}
	dialect, dsn, err := store.ParseURL(raw, "")
	if err != nil {
		return nil, fmt.Errorf("--mysql: %v", err)
	}
	if dialect != store.MySQL {
		return nil, fmt.Errorf("--mysql: %q is not a mysql:// URL", raw)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	pctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("--mysql: %v", err)
	}
	pinMySQLPID(pctx, db)
	return db, nil
}

// runBaseline runs the raw loop: each client commits one-row INSERT transactions into a table of its own
// (dropped afterwards) for warmup+d; the figures cover d.
func runBaseline(ctx context.Context, db *sql.DB, id string, clients int, warmup, d time.Duration) (*BaselineFigures, error) {
	table := "bench_baseline_" + id
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+table+` (
  id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  client INT NOT NULL,
  seq BIGINT NOT NULL,
  payload VARCHAR(255) NOT NULL,
  created_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`); err != nil {
		return nil, fmt.Errorf("baseline: create table: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = db.ExecContext(dctx, "DROP TABLE IF EXISTS "+table)
	}()
	ins := "INSERT INTO " + table + " (client, seq, payload, created_at) VALUES (?, ?, ?, ?)"
	start := time.Now()
	from, until := start.Add(warmup), start.Add(warmup+d)
	recs := make([]*recorder, clients)
	var wg sync.WaitGroup
	for i := range clients {
		recs[i] = newRecorder()
		wg.Add(1)
		go func(i int, rec *recorder) {
			defer wg.Done()
			payload := fmt.Sprintf("client %d of run %s: a row the size of a small history entry", i, id)
			for seq := int64(0); ctx.Err() == nil; seq++ {
				t0 := time.Now()
				if !t0.Before(until) {
					return
				}
				err := commitOne(ctx, db, ins, i, seq, payload)
				t1 := time.Now()
				if err != nil {
					sleepCtx(ctx, 50*time.Millisecond) // a failing server must not be spun on
				}
				switch {
				case t0.Before(from) || t1.After(until): // warm-up, or finished after the end
				case err != nil:
					rec.fail(errKind(err))
				default:
					rec.ok(t1.Sub(t0))
				}
			}
		}(i, recs[i])
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	all := newRecorder()
	for _, r := range recs {
		all.merge(r)
	}
	return &BaselineFigures{Clients: clients, DurationS: d.Seconds(), Commits: all.count, CommitsPS: perSecond(all.count, d),
		Latency: all.summary(), Table: table, Statements: "BEGIN; INSERT one row; COMMIT"}, nil
}

func commitOne(ctx context.Context, db *sql.DB, ins string, client int, seq int64, payload string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, ins, client, seq, payload, time.Now().UTC()); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// stepLoad is seeds/004's scenario: each client is a user who starts an instance of a template with four
// sequential approval nodes assigned to them (through the context) and approves each step.
type stepLoad struct {
	c      *client
	key    string
	users  []string
	tokens []string
	// mode is how the workers talk HTTP (wire.go); lean unless set.
	mode wireMode
}

// stepCalls are the three requests of the load, for one worker.
type stepCalls struct {
	l    *stepLoad
	user string
	tok  string
	w    *wire // nil: through the shared net/http client
}

// calls are worker i's requests. setupStepLoad checks the mode against the URL before a load starts, so
// newWire does not fail here; if it did, the worker would go through the net/http client.
func (l *stepLoad) calls(i int) *stepCalls {
	sc := &stepCalls{l: l, user: l.users[i], tok: l.tokens[i]}
	if l.mode != wireStd {
		sc.w, _ = newWire(l.c.base)
	}
	return sc
}

func (sc *stepCalls) close() {
	if sc.w != nil {
		sc.w.close()
	}
}

// start starts an instance and returns its id and the user's pending task in it ("" if the answer has none).
func (sc *stepCalls) start(ctx context.Context) (inst, task string, err error) {
	if sc.w == nil {
		var v instanceView
		err := sc.l.c.do(ctx, http.MethodPost, "/api/v1/instances", sc.tok, map[string]any{"template": sc.l.key, "context": map[string]any{"approver": sc.user}}, &v)
		if err == nil && v.ID == "" {
			err = fmt.Errorf("start: %w: no instance id", errBadAnswer)
		}
		return v.ID, pendingTask(v.Tasks, sc.user), err
	}
	body, err := json.Marshal(map[string]any{"template": sc.l.key, "context": map[string]any{"approver": sc.user}})
	if err != nil {
		return "", "", err
	}
	b, err := sc.w.do(ctx, http.MethodPost, "/api/v1/instances", sc.tok, body)
	if err != nil {
		return "", "", err
	}
	if inst = gjson.GetBytes(b, "id").Str; inst == "" {
		return "", "", fmt.Errorf("start: %w: no instance id", errBadAnswer)
	}
	return inst, pendingIn(b, "tasks", sc.user), nil
}

// next looks up the user's pending task of the instance ("" if none).
func (sc *stepCalls) next(ctx context.Context, inst string) (string, error) {
	path := "/api/v1/tasks?status=pending&instance_id=" + url.QueryEscape(inst)
	if sc.w == nil {
		var list struct {
			Items []taskView `json:"items"`
		}
		err := sc.l.c.do(ctx, http.MethodGet, path, sc.tok, nil, &list)
		return pendingTask(list.Items, sc.user), err
	}
	b, err := sc.w.do(ctx, http.MethodGet, path, sc.tok, nil)
	if err != nil {
		return "", err
	}
	return pendingIn(b, "items", sc.user), nil
}

// approveBody is every approval's body.
var approveBody = []byte(`{"comment":"ok"}`)

// approve approves the task and returns the user's next pending task ("" if the answer has none).
func (sc *stepCalls) approve(ctx context.Context, task string) (string, error) {
	path := "/api/v1/tasks/" + url.PathEscape(task) + "/approve"
	if sc.w == nil {
		var decided struct {
			NextTasks []taskView `json:"next_tasks"`
		}
		err := sc.l.c.do(ctx, http.MethodPost, path, sc.tok, map[string]any{"comment": "ok"}, &decided)
		return pendingTask(decided.NextTasks, sc.user), err
	}
	b, err := sc.w.do(ctx, http.MethodPost, path, sc.tok, approveBody)
	if err != nil {
		return "", err
	}
	return pendingIn(b, "next_tasks", sc.user), nil
}

// loadResult is what a load run measured: one recorder per operation, and the flows completed.
type loadResult struct {
	ops      map[string]*recorder
	flows    int64
	measured time.Duration // from the end of the warm-up to the end of the load
}

// stepsDefinition is the 4-approval template; the approver comes from the context so that every client
// has its own inbox.
func stepsDefinition() map[string]any {
	nodes := []map[string]any{{"id": "start", "type": "start", "name": "Apply", "trigger": map[string]any{"kind": "manual"}}}
	edges := []map[string]any{}
	prev := "start"
	for i := 1; i <= approvalsPerFlow; i++ {
		id := fmt.Sprintf("step%d", i)
		nodes = append(nodes, map[string]any{"id": id, "type": "approval", "name": fmt.Sprintf("Step %d", i),
			"approvers": map[string]any{"context": "approver"}, "sign": "or"})
		edges = append(edges, map[string]any{"from": prev, "to": id})
		prev = id
	}
	nodes = append(nodes, map[string]any{"id": "end", "type": "end"})
	edges = append(edges, map[string]any{"from": prev, "to": "end"})
	return map[string]any{"nodes": nodes, "edges": edges}
}

// setupStepLoad creates the template and one user per client and logs them in.
func setupStepLoad(ctx context.Context, c *client, cf commonFlags, id string, clients int, stderr io.Writer) (*stepLoad, error) {
	mode, err := parseWireMode(cf.http)
	if err != nil {
		return nil, err
	}
	if mode == wireLean {
		if _, err := newWire(c.base); err != nil {
			return nil, err
		}
	}
	admin, err := c.login(ctx, cf.adminUser, cf.adminPassword)
	if err != nil {
		return nil, err
	}
	l := &stepLoad{c: c, key: "bench-steps-" + id, users: make([]string, clients), tokens: make([]string, clients), mode: mode}
	if err := c.publishTemplate(ctx, admin, l.key, stepsDefinition()); err != nil {
		return nil, err
	}
	t0 := time.Now()
	password := "bench-" + id + "-pw"
	errs := make(chan error, clients)
	sem := make(chan struct{}, 4) // password hashing is slow on purpose: a few at a time
	var wg sync.WaitGroup
	for i := range clients {
		l.users[i] = fmt.Sprintf("bench-%s-u%03d", id, i)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			body := map[string]any{"username": l.users[i], "password": password, "display_name": fmt.Sprintf("Bench approver %d", i)}
			if err := c.do(ctx, http.MethodPost, "/api/v1/users", admin, body, nil); err != nil {
				errs <- fmt.Errorf("create user %s: %w", l.users[i], err)
				return
			}
			tok, err := c.login(ctx, l.users[i], password)
			if err != nil {
				errs <- err
				return
			}
			l.tokens[i] = tok
		}(i)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "steps: template %s and %d approver users ready in %s\n", l.key, clients, time.Since(t0).Round(time.Millisecond))
	return l, nil
}

// run drives the load for warmup+d (or until stop is closed, when d is 0) and returns what it measured after
// the warm-up. An operation counts when it started after the warm-up and finished before the end; requests in
// flight at the end are left to finish and are not counted.
func (l *stepLoad) run(ctx context.Context, warmup, d time.Duration, stop <-chan struct{}) loadResult {
	start := time.Now()
	from := start.Add(warmup)
	until := start.Add(warmup + d)
	if d == 0 {
		until = start.Add(24 * time.Hour) // bounded by stop
	}
	var stopAt atomic.Int64 // unix ns when stop was closed; 0 while running
	finished := make(chan struct{})
	defer close(finished)
	if stop != nil {
		go func() {
			select {
			case <-stop:
			case <-ctx.Done():
			case <-finished:
				return
			}
			stopAt.Store(time.Now().UnixNano())
		}()
	}
	done := func(t time.Time) bool {
		if s := stopAt.Load(); s != 0 && t.UnixNano() >= s {
			return true
		}
		return !t.Before(until) || ctx.Err() != nil
	}
	type worker struct {
		ops   map[string]*recorder
		flows int64
	}
	ws := make([]*worker, len(l.users))
	calls := make([]*stepCalls, len(l.users))
	for i := range l.users {
		calls[i] = l.calls(i)
	}
	var wg sync.WaitGroup
	for i := range l.users {
		w := &worker{ops: map[string]*recorder{"start": newRecorder(), "approve": newRecorder(), "next_task": newRecorder()}}
		ws[i] = w
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sc := calls[i]
			defer sc.close()
			// rec records an operation that began at t0; false when the load is over.
			rec := func(op string, t0 time.Time, err error) bool {
				t1 := time.Now()
				if done(t1) {
					return false
				}
				if err != nil {
					sleepCtx(ctx, 20*time.Millisecond) // a failing server must not be spun on
				}
				switch {
				case t0.Before(from): // warm-up
				case err != nil:
					w.ops[op].fail(errKind(err))
				default:
					w.ops[op].ok(t1.Sub(t0))
				}
				return true
			}
			for !done(time.Now()) {
				t0 := time.Now()
				inst, task, err := sc.start(ctx)
				if !rec("start", t0, err) {
					return
				}
				if err != nil {
					continue
				}
				approved := 0
				for step := 0; step < approvalsPerFlow; step++ {
					if task == "" {
						t0 = time.Now()
						task, err = sc.next(ctx, inst)
						if !rec("next_task", t0, err) {
							return
						}
						if err != nil {
							break
						}
						if task == "" {
							w.ops["next_task"].fail("no_pending_task")
							break
						}
					}
					t0 = time.Now()
					task, err = sc.approve(ctx, task)
					if !rec("approve", t0, err) {
						return
					}
					if err != nil {
						break
					}
					approved++
				}
				if approved == approvalsPerFlow && !time.Now().Before(from) {
					w.flows++
				}
			}
		}(i)
	}
	wg.Wait()
	res := loadResult{ops: map[string]*recorder{"start": newRecorder(), "approve": newRecorder(), "next_task": newRecorder()}}
	for _, w := range ws {
		for k, r := range w.ops {
			res.ops[k].merge(r)
		}
		res.flows += w.flows
	}
	res.measured = until.Sub(from)
	if s := stopAt.Load(); s != 0 && time.Unix(0, s).Before(until) {
		res.measured = time.Unix(0, s).Sub(from)
	}
	return res
}
