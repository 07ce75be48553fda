package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"
)

// TimersFigures is the JSON line of the timers suite.
type TimersFigures struct {
	Suite      string  `json:"suite"`
	Storm      bool    `json:"storm"`
	N          int     `json:"n"`
	WindowS    float64 `json:"window_s"`
	LeadS      float64 `json:"lead_s"` // from the start of arming to the first due time
	ArmClients int     `json:"arm_clients"`

	Armed     int64   `json:"armed"` // instances started (each arms one timer)
	ArmErrors int64   `json:"arm_errors"`
	ArmS      float64 `json:"arm_s"`
	ArmPerS   float64 `json:"arm_per_s"`
	ArmLat    Latency `json:"arm_latency"`
	Pushed    int64   `json:"pushed"` // due times moved later because arming fell behind the plan
	CalPerS   float64 `json:"calibration_starts_per_s"`

	Rows       int64   `json:"timer_rows"` // timer rows of this run in the database
	Fired      int64   `json:"fired"`
	Pending    int64   `json:"pending"` // still pending at the end: lost (or late beyond --settle)
	Cancelled  int64   `json:"cancelled"`
	Lost       int64   `json:"lost"`         // armed - fired
	FiredEvts  int64   `json:"fired_events"` // timer.fired history entries
	Duplicates int64   `json:"duplicates"`   // instances with more than one timer.fired
	Completed  int64   `json:"instances_completed"`
	Early      int64   `json:"early"` // fired before their due time
	LateP50    float64 `json:"lateness_p50_ms"`
	LateP99    float64 `json:"lateness_p99_ms"`
	LateMax    float64 `json:"lateness_max_ms"`
	LateMean   float64 `json:"lateness_mean_ms"`
	LateP90    float64 `json:"lateness_p90_ms"`
	LateP999   float64 `json:"lateness_p999_ms"`
	// LateHist counts fired timers by lateness: "<=10ms", "<=50ms", ..., ">5s".
	LateHist  []Bucket `json:"lateness_histogram"`
	SpotCheck string   `json:"api_spot_check"` // timer.fired counted through GET /instances/{id}/history on a sample

	FireS      float64  `json:"fire_span_s"` // first due to last fired_at
	FirePerS   float64  `json:"fired_per_s"`
	StormDoneS *float64 `json:"storm_done_s,omitempty"` // due second to "every timer fired and committed" (polled)
	StormLastS *float64 `json:"storm_last_fired_s,omitempty"`
	// The storm against the machine's own limit, measured in the same run: fired and committed per second (fired
	// ÷ storm_done_s) over the raw single-row commit rate of Baseline (the steps suite's loop, run alone before
	// arming).
	// The baseline runs twice, before arming and after the storm (the load stopped), and the ratio is taken over
	// the higher of the two: one 10-second loop read 3,103 and 4,826 commits/s in two runs of one build, and a
	// low reading must not flatter the storm. StormRatioBefore is the ratio over the first alone.
	StormFiredPerS   *float64         `json:"storm_fired_per_s,omitempty"`
	Baseline         *BaselineFigures `json:"baseline,omitempty"`
	BaselineAfter    *BaselineFigures `json:"baseline_after,omitempty"`
	StormRatio       *float64         `json:"storm_ratio,omitempty"`
	StormRatioBefore *float64         `json:"storm_ratio_before,omitempty"`
	// StormRatioDBBound is the highest storm_ratio MariaDB's CPU per fire (the load's share included) allows on
	// this machine (dbBound).
	StormRatioDBBound *float64 `json:"storm_ratio_db_bound,omitempty"`
	// StormBaselineErrors counts the failed commits of the baseline storm_ratio is taken over (the higher one).
	StormBaselineErrors *float64 `json:"storm_baseline_errors,omitempty"`

	PendingPeak     int64    `json:"pending_peak"` // ZCARD of the due set, sampled every second
	RedisStartMB    float64  `json:"redis_used_mb_start"`
	RedisPeakMB     float64  `json:"redis_used_mb_peak"`
	RedisDueKeyMB   float64  `json:"redis_due_key_mb_at_peak"` // MEMORY USAGE of the due set at the peak
	RedisPerMillion *float64 `json:"redis_mb_per_million_pending"`
	RSSStartMB      float64  `json:"halley_rss_mb_start,omitempty"`
	RSSPeakMB       float64  `json:"halley_rss_mb_peak,omitempty"`
	RSSEndMB        float64  `json:"halley_rss_mb_end,omitempty"`

	ArmCPU  *CPUUse `json:"arm_cpu,omitempty"`  // while arming; per op = per timer armed (background load included)
	FireCPU *CPUUse `json:"fire_cpu,omitempty"` // first due time to all fired; per op = per timer fired (background load included)
	// MySQL's global status counters per timer armed and per timer fired (server-wide, background load
	// included: upper bounds).
	MySQLPerArm  map[string]float64 `json:"mysql_status_per_armed,omitempty"`
	MySQLPerFire map[string]float64 `json:"mysql_status_per_fired,omitempty"`
	Load         *StepsFigures      `json:"background_load,omitempty"`
	Targets      []Target           `json:"targets"`
	Machine      *Machine           `json:"machine"`
	TotalS       float64            `json:"total_s"`
	TimedOut     bool               `json:"settle_timed_out"`
	// Interrupted: the suite was stopped (its time limit, Ctrl-C) after arming, before every timer fired or the
	// settle ended; the figures are those of the timers that had fired by then, and the rest count as pending.
	Interrupted bool `json:"interrupted,omitempty"`
}

type timersConfig struct {
	cf          commonFlags
	n           int
	window      time.Duration
	storm       bool
	baseClients int
	baseDur     time.Duration
	loadClients int
	armClients  int
	mysqlURL    string
	redisURL    string
	prefix      string
	pid         int
	lead        time.Duration
	minLead     time.Duration
	maxArm      time.Duration
	settle      time.Duration
	pf          profileFlags
}

func runTimers(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("halley-bench timers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var tc timersConfig
	tc.cf.register(fs)
	fs.IntVar(&tc.n, "n", 0, "timers to arm (default: the issue's sizes, 1,000,000, or 100,000 with --storm)")
	fs.DurationVar(&tc.window, "window", 15*time.Minute, "the due times are spread over this window (ignored with --storm)")
	fs.BoolVar(&tc.storm, "storm", false, "every timer due in the same second")
	fs.IntVar(&tc.loadClients, "load-clients", 10, "clients of the background step load (0: none)")
	fs.IntVar(&tc.baseClients, "baseline-clients", 100, "with --storm: clients of the raw single-row commit loop run before arming and after the storm, the storm's yardstick (the higher rate; 0: none)")
	fs.DurationVar(&tc.baseDur, "baseline-duration", 10*time.Second, "with --storm: measured time of that loop (after 2 s of warm-up)")
	fs.IntVar(&tc.armClients, "arm-clients", 16, "concurrent instance starts while arming")
	fs.StringVar(&tc.mysqlURL, "mysql", "", "Halley's database, mysql://root@127.0.0.1:3306/db (timer rows and history are read there)")
	fs.StringVar(&tc.redisURL, "redis", "", "Halley's Redis, redis://127.0.0.1:6379/N (memory and pending count)")
	fs.StringVar(&tc.prefix, "redis-prefix", "halley:", "Halley's scheduler key prefix")
	fs.IntVar(&tc.pid, "halley-pid", 0, "Halley's process id, for its RSS (0: not measured)")
	fs.DurationVar(&tc.lead, "lead", 0, "time from the end of calibration to the first due time (0: from the measured start rate)")
	fs.DurationVar(&tc.minLead, "min-lead", 2*time.Second, "a timer is always armed at least this long before it is due (later due times are counted as pushed)")
	fs.DurationVar(&tc.maxArm, "max-arm", time.Hour, "stop arming after this long")
	fs.DurationVar(&tc.settle, "settle", 5*time.Minute, "after the last due time, wait at most this long for every timer to fire")
	tc.pf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if tc.n == 0 {
		tc.n = 1_000_000
		if tc.storm {
			tc.n = 100_000
		}
	}
	if tc.n < 1 || tc.n > 10_000_000 {
		return fmt.Errorf("--n must be 1..10,000,000")
	}
	if tc.armClients < 1 || tc.armClients > 512 || tc.loadClients < 0 || tc.loadClients > 512 || tc.baseClients < 0 || tc.baseClients > 512 {
		return fmt.Errorf("--arm-clients must be 1..512, --load-clients and --baseline-clients 0..512")
	}
	if tc.baseDur <= 0 || tc.baseDur > time.Hour {
		return fmt.Errorf("--baseline-duration must be in (0, 1h]")
	}
	if tc.mysqlURL == "" || tc.redisURL == "" {
		return fmt.Errorf("--mysql and --redis are required (figures come from the timer rows and the scheduler's set)")
	}
	if !tc.storm && tc.window <= 0 {
		return fmt.Errorf("--window must be positive")
	}
	return timersSuite(ctx, tc, stdout, stderr)
}

// timersDefinition: start → delay until the context's "due" → end.
func timersDefinition() map[string]any {
	return map[string]any{
		"nodes": []map[string]any{
			{"id": "start", "type": "start", "trigger": map[string]any{"kind": "manual"}},
			{"id": "wait", "type": "delay", "name": "Wait", "until": "due"},
			{"id": "end", "type": "end"},
		},
		"edges": []map[string]any{{"from": "start", "to": "wait"}, {"from": "wait", "to": "end"}},
	}
}

func openRedis(raw string) (*redis.Client, error) {
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("--redis: %v", err)
	}
	if _, err := checkLoopback("http://" + opt.Addr); err != nil {
		return nil, fmt.Errorf("--redis: %v", err)
	}
	rdb := redis.NewClient(opt)
	pinRedisPID(rdb)
	return rdb, nil
}

// dueOffset spreads timer i of n over the window in a scattered order (a multiplicative permutation of 0..n-1),
// so consecutive starts do not arm consecutive due times.
func dueOffset(i, n int, window time.Duration) time.Duration {
	if n <= 1 {
		return 0
	}
	p := permute(i, n)
	return time.Duration(float64(window) * float64(p) / float64(n-1))
}

// permute maps 0..n-1 onto itself bijectively: i*k mod n for a k coprime with n.
func permute(i, n int) int {
	k := 7919 // a prime; bump it until it is coprime with n
	for gcd(k, n) != 1 {
		k += 2
	}
	return int((int64(i) * int64(k)) % int64(n))
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// planLead is how long after calibration the first timer may be due: the time arming is expected to take at
// the calibrated rate, with half again as margin (the rate drops as the tables grow, and the machine is
// shared), plus a fixed 10 s. Timers that would still be due too soon are pushed later and counted.
func planLead(n int, ratePerS float64) time.Duration {
	if ratePerS <= 0 {
		ratePerS = 50
	}
	return time.Duration(float64(n)/ratePerS*1.5*float64(time.Second)) + 10*time.Second
}

// sampler watches Redis and Halley's RSS every second.
type sampler struct {
	mu          sync.Mutex
	pendingPeak int64
	redisPeak   float64
	dueKeyMB    float64
	rssPeak     float64
}

func (s *sampler) run(ctx context.Context, rdb *redis.Client, dueKey string, pid int, stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		n, err := rdb.ZCard(ctx, dueKey).Result()
		mb, merr := redisUsedMB(ctx, rdb)
		s.mu.Lock()
		if err == nil && n > s.pendingPeak {
			s.pendingPeak = n
			if u, err := rdb.MemoryUsage(ctx, dueKey).Result(); err == nil {
				s.dueKeyMB = round3(float64(u) / (1 << 20))
			}
		}
		if merr == nil && mb > s.redisPeak {
			s.redisPeak = mb
		}
		if pid > 0 {
			if r, err := rssMB(pid); err == nil && r > s.rssPeak {
				s.rssPeak = r
			}
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-t.C:
		}
	}
}

func timersSuite(ctx context.Context, tc timersConfig, stdout, stderr io.Writer) error {
	began := time.Now()
	m := newMachine()
	c, err := newClient(tc.cf.url, tc.armClients+tc.loadClients)
	if err != nil {
		return err
	}
	defer c.close()
	db, err := openMySQL(tc.mysqlURL, 8)
	if err != nil {
		return err
	}
	defer db.Close()
	rdb, err := openRedis(tc.redisURL)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("--redis: %v", err)
	}
	m.versions(ctx, db, rdb)
	id := runID()
	f := TimersFigures{Suite: "timers", Storm: tc.storm, N: tc.n, ArmClients: tc.armClients}
	if !tc.storm {
		f.WindowS = tc.window.Seconds()
	}
	if tc.storm && tc.baseClients > 0 {
		// The yardstick first, alone on the machine as in the steps suite: storm times move with the machine,
		// the ratio to the raw commit rate of the same run does not.
		fmt.Fprintf(stderr, "storm: baseline: %d clients of one-row INSERT transactions for %s (+2s warm-up)\n", tc.baseClients, tc.baseDur)
		bdb, err := openMySQL(tc.mysqlURL, tc.baseClients)
		if err != nil {
			return err
		}
		b, err := runBaseline(ctx, bdb, id, tc.baseClients, 2*time.Second, tc.baseDur)
		bdb.Close()
		if err != nil {
			return err
		}
		f.Baseline = b
	}

	admin, err := c.login(ctx, tc.cf.adminUser, tc.cf.adminPassword)
	if err != nil {
		return err
	}
	key, calKey := "bench-timers-"+id, "bench-timers-cal-"+id
	if err := c.publishTemplate(ctx, admin, key, timersDefinition()); err != nil {
		return err
	}
	if err := c.publishTemplate(ctx, admin, calKey, timersDefinition()); err != nil {
		return err
	}

	dueKey := tc.prefix + "{timers}:due"
	f.RedisStartMB, _ = redisUsedMB(ctx, rdb)
	if tc.pid > 0 {
		if f.RSSStartMB, err = rssMB(tc.pid); err != nil {
			return fmt.Errorf("--halley-pid: %v", err)
		}
	}
	var smp sampler
	stopSampler := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { defer bg.Done(); smp.run(ctx, rdb, dueKey, tc.pid, stopSampler) }()
	defer func() { close(stopSampler); bg.Wait() }()

	// The background step load runs from before arming until every timer has fired.
	stopLoad := make(chan struct{})
	var loadRes loadResult
	var loadWG sync.WaitGroup
	if tc.loadClients > 0 {
		load, err := setupStepLoad(ctx, c, tc.cf, id, tc.loadClients, stderr)
		if err != nil {
			return err
		}
		loadWG.Add(1)
		go func() { defer loadWG.Done(); loadRes = load.run(ctx, 0, 0, stopLoad) }()
	}
	loadStopped := false
	endLoad := func() {
		if !loadStopped {
			loadStopped = true
			close(stopLoad)
			loadWG.Wait()
		}
	}
	defer endLoad()

	// Calibrate the arming rate, to plan when the first timer is due: instances of the same definition under
	// another key (not counted), whose timers are due a few seconds later and fire while arming goes on.
	k := min(max(tc.n/50, 100), 1000)
	calStart := time.Now()
	calDue := calStart.Add(5 * time.Second).UTC().Format(time.RFC3339Nano)
	calOK, _ := startMany(ctx, c, admin, k, tc.armClients, func(int) map[string]any {
		return map[string]any{"template": calKey, "context": map[string]any{"due": calDue}}
	}, nil)
	calRate := float64(calOK) / time.Since(calStart).Seconds()
	f.CalPerS = round3(calRate)
	lead := tc.lead
	if lead == 0 {
		lead = planLead(tc.n, calRate)
	}
	armStart := time.Now()
	t0 := armStart.Add(lead).Truncate(time.Second).Add(time.Second)
	f.LeadS = round3(t0.Sub(armStart).Seconds())
	fmt.Fprintf(stderr, "timers: calibrated %.0f timers armed/s on %d instances; arming %d timers with %d clients, first due at %s (in %s)%s\n",
		calRate, calOK, tc.n, tc.armClients, t0.Format(time.RFC3339), t0.Sub(armStart).Round(time.Second), map[bool]string{true: ", all in that second (storm)", false: fmt.Sprintf(", spread over %s", tc.window)}[tc.storm])

	var pushed atomic.Int64
	dueOf := func(i int) time.Time {
		var due time.Time
		if tc.storm {
			due = t0.Add(time.Duration(i%1000) * time.Millisecond)
		} else {
			due = t0.Add(dueOffset(i, tc.n, tc.window))
		}
		if earliest := time.Now().Add(tc.minLead); due.Before(earliest) {
			pushed.Add(1)
			due = earliest
		}
		return due.UTC().Truncate(time.Millisecond)
	}
	watch := newCPUWatch(tc.pid)
	armMeter := startCPU(watch, 0)
	armStatus, _ := globalStatus(ctx, db)
	var dueMu sync.Mutex
	minDue, maxDue := time.Time{}, time.Time{}
	armCtx, cancelArm := context.WithTimeout(ctx, tc.maxArm)
	armRec := newRecorder()
	armed, spot := startMany(armCtx, c, admin, tc.n, tc.armClients, func(i int) map[string]any {
		due := dueOf(i)
		dueMu.Lock()
		if minDue.IsZero() || due.Before(minDue) {
			minDue = due
		}
		if due.After(maxDue) {
			maxDue = due
		}
		dueMu.Unlock()
		return map[string]any{"template": key, "context": map[string]any{"due": due.Format(time.RFC3339Nano)}}
	}, armRec)
	cancelArm()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	armDur := time.Since(armStart)
	f.ArmCPU = ptr(armMeter.stop(armed))
	if after, err := globalStatus(ctx, db); err == nil && armStatus != nil {
		_, f.MySQLPerArm = statusDelta(armStatus, after, armed)
	}
	f.Armed, f.ArmErrors, f.ArmS, f.ArmPerS, f.ArmLat = armed, armRec.errors, round3(armDur.Seconds()), perSecond(armed, armDur), armRec.summary()
	f.Pushed = pushed.Load()
	fmt.Fprintf(stderr, "timers: armed %d in %s (%.0f/s), %d errors, %d due times pushed later; waiting for %s + up to %s\n",
		armed, armDur.Round(time.Millisecond), f.ArmPerS, f.ArmErrors, f.Pushed, maxDue.Format(time.RFC3339), tc.settle)

	// Profile the firing: from the first due time (or now, when arming ran late), for at most the window.
	sleepCtx(ctx, time.Until(t0))
	if !tc.storm {
		tc.pf.seconds = max(1, min(tc.pf.seconds, int(time.Until(maxDue).Seconds())))
	}
	prof := tc.pf.start(ctx, stderr)
	defer prof.wait(stderr)
	fireMeter := startCPU(watch, 0)
	fireStatus, _ := globalStatus(ctx, db)

	// Wait for the last due time, then until no timer of the range is pending (or --settle passes).
	sleepCtx(ctx, time.Until(maxDue))
	poll := time.Second
	if tc.storm {
		poll = 100 * time.Millisecond
	}
	deadline := time.Now().Add(tc.settle)
	var doneAt time.Time
	for ctx.Err() == nil {
		// Whether one is still pending, not how many: a count walks every pending timer of the range, and ten
		// of them a second would be the bench's own load on the database it measures.
		var one int
		err := db.QueryRowContext(ctx, "SELECT 1 FROM timers WHERE status = 'pending' AND due_at BETWEEN ? AND ? LIMIT 1", minDue, maxDue).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			doneAt = time.Now()
			break
		}
		if time.Now().After(deadline) {
			f.TimedOut = true
			break
		}
		sleepCtx(ctx, poll)
	}
	if ctx.Err() != nil {
		// Stopped while the timers fire (the suite's time limit, Ctrl-C): report what fired so far rather than
		// nothing. bench.sh kills the suite 30 s after its TERM, so the report's reads get 25 s.
		f.Interrupted, f.TimedOut = true, true
		fmt.Fprintln(stderr, "timers: stopped before every timer fired; reporting the timers fired so far")
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 25*time.Second)
		defer cancel()
	}
	fireCPU := fireMeter.stop(0)
	fireStatusEnd, _ := globalStatus(ctx, db)
	endLoad()
	if tc.pid > 0 {
		f.RSSEndMB, _ = rssMB(tc.pid)
	}
	smp.mu.Lock()
	f.PendingPeak, f.RedisPeakMB, f.RedisDueKeyMB, f.RSSPeakMB = smp.pendingPeak, smp.redisPeak, smp.dueKeyMB, smp.rssPeak
	smp.mu.Unlock()
	if f.RSSEndMB > f.RSSPeakMB {
		f.RSSPeakMB = f.RSSEndMB
	}
	if f.PendingPeak > 0 {
		f.RedisPerMillion = ptr(round3(f.RedisDueKeyMB / float64(f.PendingPeak) * 1e6))
	}

	if err := timerRows(ctx, db, key, t0, &f); err != nil {
		return err
	}
	f.Lost = f.Armed - f.Fired
	if f.Fired > 0 {
		for k, v := range fireCPU.Cores {
			fireCPU.MsPerOp[k] = round3(v * fireCPU.WallS * 1000 / float64(f.Fired))
		}
	}
	f.FireCPU = &fireCPU
	if fireStatus != nil && fireStatusEnd != nil {
		_, f.MySQLPerFire = statusDelta(fireStatus, fireStatusEnd, f.Fired)
	}
	if tc.storm && !doneAt.IsZero() {
		f.StormDoneS = ptr(round3(doneAt.Sub(t0).Seconds()))
	}
	if tc.storm && f.Baseline != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "storm: baseline again, after the storm and the load: %d clients for %s (+2s warm-up)\n", tc.baseClients, tc.baseDur)
		bdb, err := openMySQL(tc.mysqlURL, tc.baseClients)
		if err != nil {
			return err
		}
		b, err := runBaseline(ctx, bdb, id+"b", tc.baseClients, 2*time.Second, tc.baseDur)
		bdb.Close()
		if err != nil {
			return err
		}
		f.BaselineAfter = b
	}
	f.stormRate(m.NProc)
	f.SpotCheck = spotCheck(ctx, c, admin, spot)
	if tc.loadClients > 0 {
		lf := StepsFigures{Suite: "steps", Clients: tc.loadClients, DurationS: round3(loadRes.measured.Seconds())}
		fillSteps(&lf, loadRes, loadRes.measured)
		lf.Targets = nil
		f.Load = &lf
	}
	m.finish()
	f.Machine = &m
	f.TotalS = round3(time.Since(began).Seconds())
	f.Targets = timersTargets(&f)
	return emit(stdout, timersSummary(&f, tc), f)
}

// startMany starts n instances with conc clients; body(i) gives the request of the i-th. It returns how many
// were started and a few instance ids (for the API spot check). rec, when set, records the latencies.
func startMany(ctx context.Context, c *client, token string, n, conc int, body func(i int) map[string]any, rec *recorder) (int64, []string) {
	var next, okN atomic.Int64
	recs := make([]*recorder, conc)
	spots := make([][]string, conc)
	var wg sync.WaitGroup
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
				var inst instanceView
				t0 := time.Now()
				err := c.do(ctx, http.MethodPost, "/api/v1/instances", token, body(i), &inst)
				if err != nil {
					if ctx.Err() == nil {
						recs[w].fail(errKind(err))
						sleepCtx(ctx, 20*time.Millisecond)
					}
					continue
				}
				recs[w].ok(time.Since(t0))
				okN.Add(1)
				if len(spots[w]) < 2 || i%(n/8+1) == 0 && len(spots[w]) < 4 {
					spots[w] = append(spots[w], inst.ID)
				}
			}
		}(w)
	}
	wg.Wait()
	var ids []string
	for w := range conc {
		if rec != nil {
			rec.merge(recs[w])
		}
		ids = append(ids, spots[w]...)
	}
	if len(ids) > 20 {
		ids = ids[:20]
	}
	return okN.Load(), ids
}

// timerRows reads the run's timer rows, their lateness and the timer.fired history from the database.
func timerRows(ctx context.Context, db *sql.DB, key string, t0 time.Time, f *TimersFigures) error {
	rows, err := db.QueryContext(ctx, `SELECT t.status, COUNT(*) FROM timers t JOIN instances i ON i.id = t.instance_id
		WHERE i.tkey = ? GROUP BY t.status`, key)
	if err != nil {
		return fmt.Errorf("timer rows: %w", err)
	}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			rows.Close()
			return err
		}
		f.Rows += n
		switch st {
		case "fired":
			f.Fired = n
		case "pending":
			f.Pending = n
		case "cancelled":
			f.Cancelled = n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}

	lat := make([]int64, 0, f.Fired)
	var firstDue, lastFired time.Time
	rows, err = db.QueryContext(ctx, `SELECT TIMESTAMPDIFF(MICROSECOND, t.due_at, t.fired_at), t.due_at, t.fired_at
		FROM timers t JOIN instances i ON i.id = t.instance_id WHERE i.tkey = ? AND t.status = 'fired'`, key)
	if err != nil {
		return fmt.Errorf("timer lateness: %w", err)
	}
	for rows.Next() {
		var us int64
		var due, fired time.Time
		if err := rows.Scan(&us, &due, &fired); err != nil {
			rows.Close()
			return err
		}
		lat = append(lat, us)
		if firstDue.IsZero() || due.Before(firstDue) {
			firstDue = due
		}
		if fired.After(lastFired) {
			lastFired = fired
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	l := latenessOf(lat)
	f.Early, f.LateP50, f.LateP99, f.LateMax, f.LateMean = l.early, l.p50, l.p99, l.max, l.mean
	f.LateP90, f.LateP999, f.LateHist = l.p90, l.p999, l.hist
	if !firstDue.IsZero() {
		f.FireS = round3(lastFired.Sub(firstDue).Seconds())
		if f.FireS > 0 {
			f.FirePerS = perSecond(int64(len(lat)), lastFired.Sub(firstDue))
		}
		if f.Storm {
			f.StormLastS = ptr(round3(lastFired.Sub(t0).Seconds()))
		}
	}

	if f.FiredEvts, f.Duplicates, err = countFired(ctx, db, key); err != nil {
		return err
	}
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM instances WHERE tkey = ? AND status = 'completed'`, key).Scan(&f.Completed); err != nil {
		return fmt.Errorf("completed instances: %w", err)
	}
	return nil
}

// countFired counts the timer.fired history events of the template's instances and the instances with more than
// one. A step's events share a history row (the first in the row's columns, the rest in more_events, migration
// 0020), so the rows are read and their further events searched; one row at a time, for a million instances.
func countFired(ctx context.Context, db *sql.DB, key string) (events, duplicates int64, err error) {
	rows, err := db.QueryContext(ctx, `SELECT h.instance_id, h.action, COALESCE(h.more_events, '') FROM history h
		JOIN instances i ON i.id = h.instance_id WHERE i.tkey = ?`, key)
	if err != nil {
		return 0, 0, fmt.Errorf("timer.fired history: %w", err)
	}
	defer rows.Close()
	per := map[string]int{}
	for rows.Next() {
		var id, action, more string
		if err := rows.Scan(&id, &action, &more); err != nil {
			return 0, 0, fmt.Errorf("timer.fired history: %w", err)
		}
		n := 0
		if action == "timer.fired" {
			n++
		}
		if more != "" {
			n += int(gjson.Get(more, `#(action=="timer.fired")#|#`).Int())
		}
		if n > 0 {
			events += int64(n)
			per[id] += n
		}
	}
	if err := rows.Err(); err != nil {
		return 0, 0, fmt.Errorf("timer.fired history: %w", err)
	}
	for _, n := range per {
		if n > 1 {
			duplicates++
		}
	}
	return events, duplicates, nil
}

// lateness is the distribution of fired_at - due_at.
type lateness struct {
	early                          int64
	p50, p90, p99, p999, max, mean float64 // ms
	hist                           []Bucket
}

// Bucket is one bar of a histogram: how many values were at most Le (the last bucket: above the previous one).
type Bucket struct {
	Le    string `json:"le"`
	Count int64  `json:"count"`
}

// lateBuckets are the histogram's upper bounds in microseconds; the last bucket holds everything above.
var lateBuckets = []struct {
	name string
	us   int64
}{{"<=10ms", 10_000}, {"<=50ms", 50_000}, {"<=100ms", 100_000}, {"<=500ms", 500_000}, {"<=1s", 1_000_000}, {"<=5s", 5_000_000}, {">5s", math.MaxInt64}}

// histogram counts sorted values (µs) per bucket.
func histogram(sorted []int64) []Bucket {
	out := make([]Bucket, len(lateBuckets))
	i := 0
	for b, lb := range lateBuckets {
		out[b].Le = lb.name
		for i < len(sorted) && sorted[i] <= lb.us {
			out[b].Count++
			i++
		}
	}
	return out
}

// latenessOf summarises lateness values in microseconds; negative ones (fired early) are counted apart and
// kept in the distribution.
func latenessOf(us []int64) lateness {
	var l lateness
	if len(us) == 0 {
		return l
	}
	s := append([]int64(nil), us...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum float64
	for _, v := range s {
		if v < 0 {
			l.early++
		}
		sum += float64(v)
	}
	l.p50 = round3(float64(percentile(s, 50)) / 1000)
	l.p90 = round3(float64(percentile(s, 90)) / 1000)
	l.p99 = round3(float64(percentile(s, 99)) / 1000)
	l.p999 = round3(float64(percentile(s, 99.9)) / 1000)
	l.hist = histogram(s)
	l.max = round3(float64(s[len(s)-1]) / 1000)
	l.mean = round3(sum / float64(len(s)) / 1000)
	return l
}

// spotCheck counts timer.fired through the public API on a few instances, to show the database query and
// the API agree.
func spotCheck(ctx context.Context, c *client, token string, ids []string) string {
	good, bad := 0, 0
	for _, id := range ids {
		var h struct {
			Items []struct {
				Action string `json:"action"`
			} `json:"items"`
		}
		if err := c.do(ctx, http.MethodGet, "/api/v1/instances/"+url.PathEscape(id)+"/history", token, nil, &h); err != nil {
			bad++
			continue
		}
		n := 0
		for _, it := range h.Items {
			if it.Action == "timer.fired" {
				n++
			}
		}
		if n == 1 {
			good++
		} else {
			bad++
		}
	}
	return fmt.Sprintf("%d of %d sampled instances show exactly one timer.fired in GET /instances/{id}/history", good, good+bad)
}

// stormRate sets the storm's fired/s (fired and committed within storm_done_s) and its ratio to the baseline's
// raw commits/s; both stay null without a completion time, the ratio without a baseline.
func (f *TimersFigures) stormRate(cores int) {
	if !f.Storm || f.StormDoneS == nil || *f.StormDoneS <= 0 {
		return
	}
	f.StormFiredPerS = ptr(round3(float64(f.Fired) / *f.StormDoneS))
	if f.Baseline == nil {
		return
	}
	f.StormRatioBefore = ratio(*f.StormFiredPerS, f.Baseline.CommitsPS)
	best, errs := f.Baseline.CommitsPS, f.Baseline.Latency.Errors
	if f.BaselineAfter != nil && f.BaselineAfter.CommitsPS > best {
		best, errs = f.BaselineAfter.CommitsPS, f.BaselineAfter.Latency.Errors
	}
	f.StormBaselineErrors = ptr(float64(errs))
	f.StormRatio = ratio(*f.StormFiredPerS, best)
	f.StormRatioDBBound = dbBound(f.FireCPU, cores, best)
}

// timersTargets are the targets: with fewer than 1M timers (or 100k for the storm) the size target is
// reported as missed, so a small run never reads as a pass.
func timersTargets(f *TimersFigures) []Target {
	ts := []Target{}
	if f.Storm {
		ts = append(ts, atLeast("storm_timers", ptr(float64(f.Armed)), 100000), atLeast("storm_ratio", f.StormRatio, 1.1))
		if f.StormBaselineErrors != nil {
			ts = append(ts, atMost("baseline_errors", f.StormBaselineErrors, 0)) // a refused commit is not in the yardstick
		}
	} else {
		ts = append(ts, atLeast("pending_peak", ptr(float64(f.PendingPeak)), 1000000),
			atMost("lateness_p99_ms", ptr(f.LateP99), 50), atMost("lateness_max_ms", ptr(f.LateMax), 500))
	}
	ts = append(ts, atMost("lost", ptr(float64(f.Lost)), 0), atMost("duplicates", ptr(float64(f.Duplicates)), 0),
		atMost("early", ptr(float64(f.Early)), 0), atMost("redis_mb_per_million_pending", f.RedisPerMillion, 300))
	return ts
}

func timersSummary(f *TimersFigures, tc timersConfig) []string {
	mode := fmt.Sprintf("spread over %s", tc.window)
	if f.Storm {
		mode = "all due in one second (storm)"
	}
	s := []string{
		fmt.Sprintf("timers: %d armed of %d requested, %s, first due %.0f s after arming began; arming took %.1f s (%.1f starts/s, %d errors, %d due times pushed later)",
			f.Armed, f.N, mode, f.LeadS, f.ArmS, f.ArmPerS, f.ArmErrors, f.Pushed),
		latencyLine("arm", f.ArmLat),
		fmt.Sprintf("  rows %d: fired %d, pending %d, cancelled %d; lost %d; timer.fired events %d, duplicates %d; instances completed %d",
			f.Rows, f.Fired, f.Pending, f.Cancelled, f.Lost, f.FiredEvts, f.Duplicates, f.Completed),
		fmt.Sprintf("  lateness (fired_at - due_at): p50 %.1f ms  p90 %.1f ms  p99 %.1f ms  p99.9 %.1f ms  max %.1f ms  mean %.1f ms; early %d",
			f.LateP50, f.LateP90, f.LateP99, f.LateP999, f.LateMax, f.LateMean, f.Early),
		"  lateness histogram: " + histString(f.LateHist),
		fmt.Sprintf("  firing: %.1f s from the first due time to the last fired_at (%.1f fired/s)", f.FireS, f.FirePerS),
	}
	if f.Storm {
		s = append(s, fmt.Sprintf("  storm: every timer fired and committed %s s after the due second (last fired_at at %s s) = %s fired/s", fmtPtr(f.StormDoneS), fmtPtr(f.StormLastS), fmtPtr(f.StormFiredPerS)))
		if b := f.Baseline; b != nil {
			s = append(s, fmt.Sprintf("  baseline (before arming, alone): %d clients, %.0f s: %d one-row commits = %.1f commits/s (p99 %.1f ms)%s", b.Clients, b.DurationS, b.Commits, b.CommitsPS, b.Latency.P99, failedNote(b)))
			if a := f.BaselineAfter; a != nil {
				s = append(s, fmt.Sprintf("  baseline (after the storm, alone): %d clients, %.0f s: %d one-row commits = %.1f commits/s (p99 %.1f ms)%s", a.Clients, a.DurationS, a.Commits, a.CommitsPS, a.Latency.P99, failedNote(a)))
			}
			s = append(s, fmt.Sprintf("  storm_ratio = storm fired/s ÷ the higher raw commits/s = %s (over the first baseline alone: %s)", fmtPtr(f.StormRatio), fmtPtr(f.StormRatioBefore)))
			if f.StormRatioDBBound != nil {
				s = append(s, fmt.Sprintf("  limit: at %.3f ms of MariaDB CPU a fire (the load's included), MariaDB alone on all %d cores would reach storm_ratio %s at most (storm_ratio_db_bound)",
					f.FireCPU.MsPerOp["mysqld"], f.Machine.NProc, fmtPtr(f.StormRatioDBBound)))
			}
		}
	}
	s = append(s,
		fmt.Sprintf("  pending peak %d; Redis used_memory %.1f MB at start, %.1f MB at peak; due set %.1f MB at the peak = %s MB per million pending",
			f.PendingPeak, f.RedisStartMB, f.RedisPeakMB, f.RedisDueKeyMB, fmtPtr(f.RedisPerMillion)),
		fmt.Sprintf("  Halley RSS: %.1f MB at start, %.1f MB peak, %.1f MB at end", f.RSSStartMB, f.RSSPeakMB, f.RSSEndMB),
		"  "+f.SpotCheck,
	)
	if f.ArmCPU != nil {
		s = append(s, "  cpu while arming (per timer armed): "+f.ArmCPU.String())
	}
	if f.FireCPU != nil {
		s = append(s, "  cpu while firing (per timer fired): "+f.FireCPU.String())
	}
	for _, x := range []struct {
		what string
		p    map[string]float64
	}{{"armed", f.MySQLPerArm}, {"fired", f.MySQLPerFire}} {
		if x.p != nil {
			s = append(s, fmt.Sprintf("  mysql per timer %s (server-wide counters, background load included): %.1f statements, %.2f commits, %.2f rollbacks, %.2f deadlocks, %.2f pages read from disk",
				x.what, x.p["Questions"], x.p["Com_commit"], x.p["Com_rollback"], x.p["Innodb_deadlocks"], x.p["Innodb_buffer_pool_reads"]))
		}
	}
	switch {
	case f.Interrupted:
		s = append(s, "  WARNING: the suite was stopped before every timer fired (its time limit): pending timers count as lost")
	case f.TimedOut:
		s = append(s, fmt.Sprintf("  WARNING: timers were still pending %s after the last due time", tc.settle))
	}
	if l := f.Load; l != nil {
		s = append(s, fmt.Sprintf("background load: %d clients, %.1f steps/s over %.0f s, step p99 %.1f ms, errors %d", l.Clients, l.StepsPerS, l.DurationS, l.StepsLat.P99, l.Errors))
	}
	s = append(s, targetLines(f.Targets)...)
	s = append(s, "machine: "+fmt.Sprintf("%d CPUs, %d MB, MySQL %s, Redis %s; ", f.Machine.NProc, f.Machine.MemTotalMB, f.Machine.MariaDB, f.Machine.Redis)+f.Machine.loadString()+" (shared machine: figures are noisy)")
	return s
}

func histString(h []Bucket) string {
	parts := make([]string, len(h))
	for i, b := range h {
		parts[i] = fmt.Sprintf("%s %d", b.Le, b.Count)
	}
	return strings.Join(parts, ", ")
}

// failedNote says how many of a baseline's commits failed, and why, if any did.
func failedNote(b *BaselineFigures) string {
	if b.Latency.Errors == 0 {
		return ""
	}
	return fmt.Sprintf("; %d commits FAILED %v: the rate understates the server", b.Latency.Errors, b.Latency.Kinds)
}
