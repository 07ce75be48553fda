// Package telemetry is where Halley's Prometheus metrics are defined and registered: HTTP requests, the
// database pool, readiness, engine steps, timers, plugin runs, the outbox and failed deliveries. Other packages
// expose seams (engine.StepObserver, notify.FailureCounter, the executor's OnComplete, a scheduler.Handler
// wrapper) and the composition root connects them to a Metrics here; no package keeps metric globals.
//
// Labels are bounded: route templates, actions, statuses and kinds, never instance ids or user names. Gauges that
// need a database query (instances by status, the outbox backlog) are refreshed by one replica at a time (see
// Refresh) and exported only while that replica's refresh is fresh, so a dashboard takes max() across replicas.
package telemetry

import (
	"context"
	"database/sql"
	"errors"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/scheduler"
)

// Metrics holds every Halley metric and the registry /metrics serves.
type Metrics struct {
	reg   *prometheus.Registry
	clock clock.Clock

	httpRequests *prometheus.CounterVec
	httpLatency  *prometheus.HistogramVec

	steps       *prometheus.CounterVec
	stepSeconds *prometheus.HistogramVec

	timerLateness prometheus.Histogram
	timersFired   *prometheus.CounterVec

	pluginRuns    *prometheus.CounterVec
	pluginSeconds prometheus.Histogram

	deliveriesFailed *prometheus.CounterVec

	shared *sharedGauges
}

// Options tune Metrics; the zero value is the default.
type Options struct {
	Clock clock.Clock // [clock.Real]
	// Stale is how long after its last refresh a replica stops exporting the query gauges [3 min]: past it, another
	// replica refreshes them.
	Stale time.Duration
}

// New returns the metrics, registered in a new registry with the Go and process collectors.
func New(opts Options) *Metrics {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Stale <= 0 {
		opts.Stale = 3 * time.Minute
	}
	m := &Metrics{
		reg:   prometheus.NewRegistry(),
		clock: opts.Clock,
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "halley_http_requests_total", Help: "HTTP requests by route, method and status.",
		}, []string{"route", "method", "status"}),
		httpLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "halley_http_request_duration_seconds", Help: "HTTP request latency by route and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "method", "status"}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "halley_steps_total",
			Help: "Engine steps by action (start, approve, timer...) and outcome (committed, or the error kind: conflict, not_found, internal...).",
		}, []string{"action", "outcome"}),
		stepSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "halley_step_duration_seconds", Help: "Wall time of engine steps by action, retries and the wait for the instance's lock included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"action"}),
		timerLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "halley_timer_lateness_seconds", Help: "How late timers were handed to their handler, after their due time.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		timersFired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "halley_timers_fired_total", Help: "Timers handled, by outcome (ok: acknowledged; error: left leased, delivered again).",
		}, []string{"outcome"}),
		pluginRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "halley_plugin_runs_total", Help: "Plugin process runs by status: succeeded, failed, timed_out, stopped, abandoned.",
		}, []string{"status"}),
		pluginSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "halley_plugin_run_seconds", Help: "Duration of plugin process runs.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900},
		}),
		deliveriesFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "halley_deliveries_failed_total", Help: "Outbound deliveries given up after their last attempt, by kind: subscription (event webhooks), or a notification channel kind (smtp, dingtalk, feishu, wecom, webhook).",
		}, []string{"kind"}),
	}
	m.shared = &sharedGauges{clock: opts.Clock, stale: opts.Stale,
		instances:     prometheus.NewDesc("halley_instances", "Instances by status (refreshed by one replica; take max() across replicas).", []string{"status"}, nil),
		timersPending: prometheus.NewDesc("halley_timers_pending", "Timers armed in the scheduler, due or being handled (refreshed by one replica).", nil, nil),
		outboxPending: prometheus.NewDesc("halley_outbox_pending", "Outbox rows not yet dispatched (refreshed by one replica).", nil, nil),
		outboxOldest:  prometheus.NewDesc("halley_outbox_oldest_age_seconds", "Age of the oldest outbox row not yet dispatched, 0 when none (refreshed by one replica).", nil, nil),
		refreshedAt:   prometheus.NewDesc("halley_metrics_refreshed_timestamp_seconds", "When this replica last refreshed the query gauges.", nil, nil),
	}
	m.reg.MustRegister(m.httpRequests, m.httpLatency, m.steps, m.stepSeconds, m.timerLateness, m.timersFired, m.pluginRuns,
		m.pluginSeconds, m.deliveriesFailed, m.shared,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every kind starts at zero, so that rate() and ratios see the series before the first failure.
	for _, s := range []string{plugin.StatusSucceeded, plugin.StatusFailed, plugin.StatusTimedOut} {
		m.pluginRuns.WithLabelValues(s)
	}
	m.deliveriesFailed.WithLabelValues("subscription")
	m.timersFired.WithLabelValues("ok")
	m.timersFired.WithLabelValues("error")
	return m
}

// Registry is what /metrics serves.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// HTTPRequest counts and times one request; route is gin's route template ("unmatched" for none), method a
// bounded method label.
func (m *Metrics) HTTPRequest(route, method string, status int, took time.Duration) {
	st := strconv.Itoa(status)
	m.httpRequests.WithLabelValues(route, method, st).Inc()
	m.httpLatency.WithLabelValues(route, method, st).Observe(took.Seconds())
}

// DBStats exports the database pool's statistics, read at scrape time (no query: the pool's own counters).
func (m *Metrics) DBStats(stats func() sql.DBStats) {
	gauge := func(name, help string, f func(sql.DBStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return f(stats()) })
	}
	counter := func(name, help string, f func(sql.DBStats) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return f(stats()) })
	}
	m.reg.MustRegister(
		gauge("halley_db_open_connections", "Open database connections.", func(s sql.DBStats) float64 { return float64(s.OpenConnections) }),
		gauge("halley_db_in_use_connections", "Database connections in use.", func(s sql.DBStats) float64 { return float64(s.InUse) }),
		gauge("halley_db_idle_connections", "Idle database connections.", func(s sql.DBStats) float64 { return float64(s.Idle) }),
		gauge("halley_db_max_open_connections", "Pool size.", func(s sql.DBStats) float64 { return float64(s.MaxOpenConnections) }),
		counter("halley_db_wait_count_total", "Times a request waited for a database connection.", func(s sql.DBStats) float64 { return float64(s.WaitCount) }),
		counter("halley_db_wait_seconds_total", "Time spent waiting for a database connection.", func(s sql.DBStats) float64 { return s.WaitDuration.Seconds() }),
	)
}

// StepCache exports the store's step cache counters (stats: hits, stale), read at scrape time: transactions run
// on cached rows, and of those run again on a locked read. A stale share that grows means replicas take turns on
// the same instances (or the cache is too small to matter).
func (m *Metrics) StepCache(stats func() (hits, stale int64)) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "halley_step_cache_hits_total", Help: "Step transactions run on cached instance rows, without their lock read (MySQL)."},
			func() float64 { h, _ := stats(); return float64(h) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "halley_step_cache_stale_total", Help: "Of those, transactions run again on a locked read: the cached rows had changed, or the step failed on them."},
			func() float64 { _, st := stats(); return float64(st) }),
	)
}

// GroupStatements exports how the store's step-group statements ran (MariaDB, HALLEY_DB_STMT_CACHE), read at
// scrape time: halley_db_group_statements_total{as="kept"} on a statement kept from before, {as="prepared"}
// prepared for the run, {as="text"} sent as text. kept over the sum is the share the setting saves the parse of.
func (m *Metrics) GroupStatements(stats func() (kept, prepared, text int64)) {
	const help = "MariaDB step-group statements, by how they ran: on a statement kept from before (kept), prepared for the run (prepared), or as text (text)."
	counter := func(as string, f func(kept, prepared, text int64) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "halley_db_group_statements_total", Help: help, ConstLabels: prometheus.Labels{"as": as}},
			func() float64 { return float64(f(stats())) })
	}
	m.reg.MustRegister(
		counter("kept", func(k, _, _ int64) int64 { return k }),
		counter("prepared", func(_, p, _ int64) int64 { return p }),
		counter("text", func(_, _, t int64) int64 { return t }),
	)
}

// Pinger is a dependency readiness checks (the database, Redis, the scheduler).
type Pinger interface {
	Ping(ctx context.Context) error
}

// Readiness exports halley_ready{check}: 1 when the dependency answered a ping within a second at scrape time,
// else 0 — this replica's /readyz as a metric, for the readiness alert.
func (m *Metrics) Readiness(checks map[string]Pinger) {
	m.reg.MustRegister(&readiness{checks: checks,
		desc: prometheus.NewDesc("halley_ready", "1 when this replica's dependency answers (what /readyz checks), else 0.", []string{"check"}, nil)})
}

// StepDone implements engine.StepObserver.
func (m *Metrics) StepDone(_ context.Context, r engine.StepReport) {
	outcome := "committed"
	if r.Err != nil {
		outcome = model.ErrorKind(r.Err) // a fixed set of kinds
	}
	m.steps.WithLabelValues(r.Action, outcome).Inc()
	m.stepSeconds.WithLabelValues(r.Action).Observe(r.Took.Seconds())
}

var _ engine.StepObserver = (*Metrics)(nil)

// DeliveryFailed implements notify.FailureCounter; the subscription service's given-up webhooks count as "subscription".
func (m *Metrics) DeliveryFailed(kind string) { m.deliveriesFailed.WithLabelValues(kind).Inc() }

// PluginRunDone is the plugin executor's OnComplete: it counts the run by status and times its process.
func (m *Metrics) PluginRunDone(_ plugin.Job, res plugin.Result, err error) {
	status := res.Status()
	switch {
	case errors.Is(err, plugin.ErrAbandoned):
		status = "abandoned"
	case errors.Is(err, plugin.ErrStopped):
		status = plugin.StatusStopped
	}
	m.pluginRuns.WithLabelValues(status).Inc()
	if !res.StartedAt.IsZero() && res.EndedAt.After(res.StartedAt) {
		m.pluginSeconds.Observe(res.EndedAt.Sub(res.StartedAt).Seconds())
	}
}

// Timers wraps a timer handler: it observes each timer's lateness when the batch is handed over and counts the
// handler's acks and errors.
func (m *Metrics) Timers(h scheduler.Handler) scheduler.Handler {
	return func(ctx context.Context, batch []scheduler.Due) []error {
		now := m.clock.Now()
		for _, d := range batch {
			if d.Attempt == 1 { // a redelivery's lateness is its lease, not the scheduler's
				m.timerLateness.Observe(max(0, now.Sub(d.Due).Seconds()))
			}
		}
		errs := h(ctx, batch)
		failed := 0
		if errs != nil && len(errs) != len(batch) {
			failed = len(batch) // acks nothing
		} else {
			for _, err := range errs {
				if err != nil {
					failed++
				}
			}
		}
		m.timersFired.WithLabelValues("ok").Add(float64(len(batch) - failed))
		m.timersFired.WithLabelValues("error").Add(float64(failed))
		return errs
	}
}

// Snapshot is what the query gauges show.
type Snapshot struct {
	Instances     map[model.InstanceStatus]int64
	TimersPending int64
	OutboxPending int64
	OutboxOldest  time.Time // zero when the outbox is empty
}

// Source reads a Snapshot (the store and the scheduler, in the composition root).
type Source func(ctx context.Context) (Snapshot, error)

// Refresh reads the query gauges from src now. The composition root runs it as a housekeeping job, which takes a
// lock in Redis so that one replica at a time queries; a replica whose last refresh is older than Options.Stale
// stops exporting them.
func (m *Metrics) Refresh(ctx context.Context, src Source) error {
	s, err := src(ctx)
	if err != nil {
		return err
	}
	m.shared.set(s)
	return nil
}

// sharedGauges are the query gauges: one replica refreshes them, and a replica exports them only while its own
// refresh is fresh.
type sharedGauges struct {
	clock                                                              clock.Clock
	stale                                                              time.Duration
	instances, timersPending, outboxPending, outboxOldest, refreshedAt *prometheus.Desc

	mu   sync.Mutex
	snap Snapshot
	at   time.Time
}

func (g *sharedGauges) set(s Snapshot) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.snap, g.at = s, g.clock.Now()
}

func (g *sharedGauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.instances, g.timersPending, g.outboxPending, g.outboxOldest, g.refreshedAt} {
		ch <- d
	}
}

func (g *sharedGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	s, at := g.snap, g.at
	g.mu.Unlock()
	now := g.clock.Now()
	if at.IsZero() || now.Sub(at) > g.stale {
		return
	}
	for _, st := range model.InstanceStatuses {
		ch <- prometheus.MustNewConstMetric(g.instances, prometheus.GaugeValue, float64(s.Instances[st]), string(st))
	}
	ch <- prometheus.MustNewConstMetric(g.timersPending, prometheus.GaugeValue, float64(s.TimersPending))
	ch <- prometheus.MustNewConstMetric(g.outboxPending, prometheus.GaugeValue, float64(s.OutboxPending))
	age := 0.0
	if !s.OutboxOldest.IsZero() {
		age = max(0, now.Sub(s.OutboxOldest).Seconds()) // as of the scrape: a stuck row keeps ageing between refreshes
	}
	ch <- prometheus.MustNewConstMetric(g.outboxOldest, prometheus.GaugeValue, age)
	ch <- prometheus.MustNewConstMetric(g.refreshedAt, prometheus.GaugeValue, float64(at.UnixNano())/1e9)
}

// readiness pings the checks at scrape time.
type readiness struct {
	checks map[string]Pinger
	desc   *prometheus.Desc
}

func (r *readiness) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

func (r *readiness) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	names := make([]string, 0, len(r.checks))
	for n := range r.checks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		v := 1.0
		if err := r.checks[n].Ping(ctx); err != nil {
			v = 0
		}
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.GaugeValue, v, n)
	}
}
