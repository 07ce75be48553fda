package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/frontend"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/server/config"
	"github.com/halley-bpm/halley/service/archive"
	"github.com/halley-bpm/halley/service/attachments"
	"github.com/halley-bpm/halley/service/audit"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/ends"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/lifecycle"
	"github.com/halley-bpm/halley/service/notify"
	"github.com/halley-bpm/halley/service/outbound"
	"github.com/halley-bpm/halley/service/outbox"
	"github.com/halley-bpm/halley/service/ratelimit"
	"github.com/halley-bpm/halley/service/redisconn"
	"github.com/halley-bpm/halley/service/rules"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/subprocess"
	"github.com/halley-bpm/halley/service/subscription"
	"github.com/halley-bpm/halley/service/telemetry"
	"github.com/halley-bpm/halley/service/template"
	"github.com/halley-bpm/halley/service/tracing"
	"github.com/halley-bpm/halley/service/trigger"
)

// serve is the composition root. It builds every service in dependency order, each from a constructor that takes
// all it needs and says what is missing, then runs the background workers from one list: started in order,
// stopped in reverse within HALLEY_SHUTDOWN_TIMEOUT, and a worker that dies stops the process with its error.
// docs/architecture.md draws it.
func serve(ctx context.Context, cfg *config.Config, st *store.Store, lg *slog.Logger, web *webServer) error {
	clk := clock.Real{}
	metrics := telemetry.New(telemetry.Options{Clock: clk}) // every metric /metrics serves, fed through the services' seams
	metrics.StepCache(func() (int64, int64) { s := st.StepCacheStats(); return s.Hits, s.Stale })
	metrics.GroupStatements(func() (int64, int64, int64) { g := st.GroupStatements(); return g.Kept, g.Prepared, g.Text })
	rdb := openRedis(ctx, cfg.RedisURL, lg) // nil without HALLEY_REDIS_URL: one process, in-process timers
	defer closeRedis(rdb)
	// Spans over OTLP with HALLEY_OTLP_ENDPOINT, hung on the same seams as the metrics; off otherwise.
	tr, err := newTracing(ctx, cfg, lg)
	if err != nil {
		return err
	}
	defer shutdownTracing(tr, cfg, lg)
	sched, errSched := newScheduler(cfg, rdb, clk, lg)
	ids, err := bootstrapAdmin(ctx, cfg, st, rdb, lg) // with its failed-login counter, in Redis when there is one
	if err = errors.Join(errSched, err); err != nil {
		return err
	}
	defer sched.Close() //nolint:errcheck // shutting down: the scheduler's close error has no one to tell
	auditLog := audit.New(st, audit.Options{Clock: clk, Logger: lg})

	pluginFiles, errFiles := pluginCache(ctx, cfg, st, lg)                                                    // this replica's copies of the files in the database
	runLog, errRunLog := plugin.NewDBLog(st)                                                                  // every attempt's record, readable from any replica
	sandbox, errSandbox := pluginSandbox(cfg, lg)                                                             // confines every plugin run; logs what is in force
	runner := &plugin.ProcessRunner{Sandbox: sandbox, OutputCap: cfg.PluginOutputCap, Spawn: !cfg.PluginWarm} // python runs forked from a warm interpreter
	defer runner.Close()
	executor, errExecutor := plugin.NewExecutor(runner,
		plugin.ExecutorOptions{Workers: cfg.PluginWorkers, Lease: time.Minute, PollInterval: 2 * time.Second, Logger: lg, Logs: runLog, Now: clk.Now,
			OnComplete: pluginRunDone(metrics, tr)})
	eventPlugins, errEvents := engine.NewEventPlugins(st, executor)
	out := outboundClient(cfg, tr, lg) // every URL Halley calls: public addresses, and what HALLEY_OUTBOUND_ALLOW lists
	subs := subscription.New(st, subscription.Options{Logger: lg, SecretKey: derive(cfg, "subscription-secret"), Plugins: st, PluginRuns: eventPlugins, Outbound: out,
		OnAttempt: webhookFailures(metrics)})
	notifier, errNotify := notify.New(notify.Deps{Store: st, Links: notify.WebLinks(cfg.PublicURL), Outbound: out,
		SecretKey: derive(cfg, "notification-channel"), Failures: metrics}, notify.Options{Logger: lg, Timeout: cfg.NotifyTimeout}) // in-app notifications, mail and IM channels
	arm, cancelTimers := timerOutbox(sched)
	children := &subprocess.Later{}       // the engine, once built: a child's end resumes its parent through the outbox
	st.OnUserChange(notifier.UserChanged) // in-step notifications render from cached users: a change here is seen at once
	// Events go to the subscriptions through the outbox; the notifications write theirs in the step (InStep) and
	// read from the outbox the events they could not take there (the outbox hands every event row to both).
	handlers := outbox.Handlers{model.OutboxEvent: outbox.All(subs.OutboxHandler(), notifier.HandleEvents),
		model.OutboxTimerArm: arm, model.OutboxTimerCancel: cancelTimers, model.OutboxPluginRun: wake(executor)}
	maps.Copy(handlers, subprocess.Handlers(children))
	disp, errOutbox := outbox.New(st, handlers,
		outbox.Options{Logger: lg, OnDispatched: func(int) { subs.Notify(); notifier.Notify() }}) // deliveries are visible once their batch committed
	publisher, errPublisher := trigger.NewPublisher(st, sched, trigger.Options{Clock: clk, Logger: lg})
	templates := template.New(st, template.Options{Clock: clk, Publishers: []template.Publisher{publisher, subprocess.NewChecker(st)}, SecretKey: derive(cfg, "trigger-secret")})
	people, errRules := rules.New(rules.Deps{Directory: st, Delegations: st}, rules.Options{Clock: clk, Logger: lg}) // who decides a node; delegations
	endBus, errEnds := instanceEnds(cfg, rdb, lg)                                                                    // a sync start waiting here hears of an end on another replica
	eng, errEngine := engine.New(engine.Deps{Store: st, Ends: endBus.engine(), Templates: templates, Directory: st, Rules: people, Events: subs, InStep: notifier, Outbox: disp, PluginFiles: pluginFiles,
		Executor: executor, URLs: server.NewURLs(cfg.PublicURL)}, engine.Options{Clock: clk, Logger: lg, CallbackKey: derive(cfg, "callback-url"), Observer: stepObserver(metrics, tr),
		GroupWorkers: cfg.DBGroupWorkers, NoGroupOverlap: !cfg.DBGroupOverlap})
	if errEngine == nil {
		children.Set(eng)
	}
	triggers, errTriggers := trigger.New(trigger.Deps{Store: st, Templates: templates, Engine: eng, Publisher: publisher}, trigger.Options{Clock: clk, Logger: lg})
	timers, errTimers := scheduler.Route(st, timerHandlers(eng, triggers))
	sweeper, errSweeper := retentionSweeper(cfg, st, lg) // archives and deletes ended instances, one replica at a time
	files, errAttachments := attachments.New(st, attachments.Config{Storage: cfg.AttachmentStorage, Dir: cfg.AttachmentDir, MaxSize: cfg.AttachmentMaxSize, Clock: clk})
	triggerLimit, errLimit := triggerLimiter(cfg, rdb, lg) // per client IP, shared by every replica through Redis
	gauges := &queryGauges{st: st, sched: sched}
	hk, errHousekeeper := scheduler.NewHousekeeper(rdb, cfg.RedisPrefix, scheduler.HousekeeperOptions{Logger: lg}, housekeeping(cfg, st, sched, subs, notifier, auditLog, metrics, gauges, files, lg)...)
	srv, errServer := server.New(server.Deps{Identity: ids, Templates: templates, Engine: eng, Triggers: triggers, Plugins: st,
		PluginMaxSize: cfg.PluginMaxSize, PluginSandbox: sandbox, Subscriptions: subs, Notify: notifier, TrustedProxies: cfg.TrustedProxies, Idempotency: st,
		IdempotencyLease: cfg.IdempotencyLease, Ready: readiness(st, rdb, sched), DBStats: st.Stats, Logger: lg, BodyLimit: cfg.BodyLimit, UI: webUI(lg),
		FormFrameAncestors: cfg.FormFrameAncestors, Audit: auditLog, Metrics: metrics, Tracing: tr, Rules: people, TriggerLimit: triggerLimit, Attachments: files})
	if err := errors.Join(errFiles, errLimit, errEnds, errAttachments, errRunLog, errSandbox, errExecutor, errEvents, errNotify, errOutbox, errPublisher, errRules, errEngine, errTriggers, errTimers,
		errSweeper, errHousekeeper, errServer); err != nil {
		return err
	}
	// Files older requests kept inline (data: URLs) move into the attachments store; a failure is retried at the
	// next start (or by `halley migrate`) and does not keep Halley from serving.
	if _, err := files.MigrateDataURLs(ctx, st, 0, lg); err != nil {
		lg.Warn("attachments: unable to move inline data: URL files into the attachments store; the next start tries again", "err", err)
	}
	if err := subs.Refresh(ctx); err != nil {
		return fmt.Errorf("load event subscriptions: %w", err)
	}
	// The query gauges from the first scrape on: one count unpaced, before this replica serves.
	if err := metrics.Refresh(ctx, func(ctx context.Context) (telemetry.Snapshot, error) { return gauges.read(ctx, false) }); err != nil {
		lg.Warn("unable to refresh the metrics of instances, timers and the outbox; the refresh-metrics job tries again", "err", err)
	}
	err = lifecycle.Run(ctx, cfg.ShutdownTimeout, lg,
		&lifecycle.Service{Name: "outbox dispatcher", Run: disp.Run},
		&lifecycle.Service{Name: "webhook sender", Run: subs.Run},
		&lifecycle.Service{Name: "notification sender", Run: notifier.Run},
		&lifecycle.Service{Name: "plugin executor", Run: func(ctx context.Context) error { return executor.Run(ctx, eng.PluginQueue()) }, Drain: executor.Drain},
		&lifecycle.Service{Name: "timer loop", Run: func(ctx context.Context) error { return sched.Run(ctx, traceTimers(tr, metrics.Timers(timers))) }},
		&lifecycle.Service{Name: "timer recovery", Run: func(ctx context.Context) error { return scheduler.Recover(ctx, st, sched, cfg.RedisCheckInterval, lg) }},
		&lifecycle.Service{Name: "retention sweeper", Run: sweeper.Run},
		&lifecycle.Service{Name: "housekeeping", Run: hk.Run},
		&lifecycle.Service{Name: "instance ends", Run: endBus.Run},
		web.worker(srv.Handler(), st, cfg, lg), // last started, first stopped: requests drain before the workers behind them stop
	)
	if err == nil {
		lg.Info("stopped")
	}
	return err
}

// openRedis connects to HALLEY_REDIS_URL, one server or a Redis Cluster (nil when unset). An unreachable Redis is
// logged, not fatal: /readyz reports it until it answers.
func openRedis(ctx context.Context, url string, lg *slog.Logger) redis.UniversalClient {
	if url == "" {
		return nil
	}
	rdb, _ := redisconn.Open(url) // config.Load checked it
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		lg.Error("redis is not reachable yet; /readyz reports not ready until it is", "err", err)
	}
	return rdb
}

func closeRedis(rdb redis.UniversalClient) {
	if rdb != nil {
		_ = rdb.Close() // shutting down: nothing to do about a failed close
	}
}

// newScheduler is the timer index: the Redis sorted set when Redis is configured (shared by every replica), else
// an in-process heap.
func newScheduler(cfg *config.Config, rdb redis.UniversalClient, clk clock.Clock, lg *slog.Logger) (scheduler.Scheduler, error) {
	opts := scheduler.Options{Clock: clk, Linger: cfg.TimerLinger, PartialHandlers: cfg.TimerPartial, Logger: lg, Shards: cfg.TimerShards}
	if rdb != nil {
		return scheduler.NewRedis(rdb, cfg.RedisPrefix, opts)
	}
	return scheduler.NewMemory(opts), nil
}

// readiness lists what /readyz pings.
func readiness(st *store.Store, rdb redis.UniversalClient, sched scheduler.Scheduler) map[string]server.Pinger {
	ready := map[string]server.Pinger{"database": st, "scheduler": sched}
	if rdb != nil {
		ready["redis"] = redisPinger{rdb}
	}
	return ready
}

type redisPinger struct{ c redis.UniversalClient }

func (p redisPinger) Ping(ctx context.Context) error { return p.c.Ping(ctx).Err() }

// loginAttempts counts failed sign-ins: in Redis when there is one (under HALLEY_REDIS_PREFIX), so that every
// replica throttles the same attempts, else in this process.
func loginAttempts(cfg *config.Config, rdb redis.UniversalClient) (ratelimit.Counter, error) {
	if rdb == nil {
		return ratelimit.NewMemory(identity.LoginWindow, 0), nil
	}
	return ratelimit.NewRedis(rdb, cfg.RedisPrefix, identity.LoginWindow)
}

// instanceEnds is the bus that tells every replica of an instance's end (Redis pub/sub under HALLEY_REDIS_PREFIX);
// without Redis, none: there is no other replica to hear, and waits poll the database.
func instanceEnds(cfg *config.Config, rdb redis.UniversalClient, lg *slog.Logger) (endBus, error) {
	if rdb == nil {
		return endBus{}, nil
	}
	b, err := ends.New(rdb, cfg.RedisPrefix, ends.Options{Logger: lg})
	return endBus{b}, err
}

// endBus is the engine's EndBus (nil without Redis) and a worker that runs it.
type endBus struct{ *ends.Bus }

// engine is the EndBus to give the engine: nil, not a nil *ends.Bus, without one.
func (b endBus) engine() engine.EndBus {
	if b.Bus == nil {
		return nil
	}
	return b.Bus
}

// Run runs the bus, or waits for ctx without one.
func (b endBus) Run(ctx context.Context) error {
	if b.Bus == nil {
		<-ctx.Done()
		return nil
	}
	return b.Bus.Run(ctx)
}

// triggerLimiter limits the API trigger calls per client IP (HALLEY_TRIGGER_RATE_LIMIT): in Redis when there is
// one (under HALLEY_REDIS_PREFIX), so that every replica together allows the rate once, else in this process.
func triggerLimiter(cfg *config.Config, rdb redis.UniversalClient, lg *slog.Logger) (ratelimit.Limiter, error) {
	if rdb == nil {
		return ratelimit.NewBuckets(cfg.TriggerRateLimit), nil
	}
	return ratelimit.NewRedisBuckets(rdb, cfg.RedisPrefix, "trigger", cfg.TriggerRateLimit, lg)
}

// pluginCache imports the plugin files an earlier release kept in HALLEY_PLUGIN_DIR into the database (every
// replica its own, at start) and returns this replica's cache of the files in the database.
func pluginCache(ctx context.Context, cfg *config.Config, st *store.Store, lg *slog.Logger) (*plugin.Cache, error) {
	imported, missing, err := plugin.ImportLegacy(ctx, cfg.PluginDir, st)
	if err != nil {
		return nil, fmt.Errorf("import plugin files from HALLEY_PLUGIN_DIR: %w", err)
	}
	if imported > 0 {
		lg.Info("imported plugin files of an earlier release from the plugin directory into the database", "files", imported, "dir", cfg.PluginDir)
	}
	for _, p := range missing {
		lg.Warn("a plugin version has no file in the database or on this replica: its runs fail until it is uploaded again (or the replica that has it starts)",
			"plugin", p.Name, "version", p.Version, "sha256", p.SHA256)
	}
	c, err := plugin.NewCache(filepath.Join(cfg.PluginDir, "sha256"), st)
	if err != nil {
		return nil, fmt.Errorf("HALLEY_PLUGIN_DIR: %w", err)
	}
	return c, nil
}

// bootstrapAdmin returns the identity service, after creating user admin in an empty database. Failed sign-ins
// are counted by loginAttempts.
func bootstrapAdmin(ctx context.Context, cfg *config.Config, st *store.Store, rdb redis.UniversalClient, lg *slog.Logger) (*identity.Service, error) {
	attempts, err := loginAttempts(cfg, rdb)
	if err != nil {
		return nil, err
	}
	ids := identity.New(st, identity.Options{Secret: []byte(cfg.Secret), TokenTTL: cfg.TokenTTL, Logger: lg, Attempts: attempts,
		HashConcurrency: cfg.HashConcurrency})
	created, err := ids.Bootstrap(ctx, cfg.AdminPassword, cfg.AdminPasswordDefaulted)
	if err != nil {
		return nil, fmt.Errorf("bootstrap admin: %w", err)
	}
	switch {
	case created && cfg.AdminPasswordDefaulted:
		lg.Warn(strings.Repeat("!", 72))
		lg.Warn("created user 'admin' with the DEFAULT password 'admin': sign in at " + cfg.LocalURL() + "/ as admin/admin and choose a new password (the UI asks at once; later: your name in the header > Profile > Change password), or set HALLEY_ADMIN_PASSWORD before the first start")
		lg.Warn(strings.Repeat("!", 72))
	case created:
		lg.Info("created user 'admin' with the password from HALLEY_ADMIN_PASSWORD")
	case ids.BootstrapPasswordUnchanged(ctx):
		lg.Warn("user 'admin' still has the password it was created with: sign in at " + cfg.LocalURL() + "/ and choose a new one (Profile > Change password)")
	}
	if cfg.SecretGenerated {
		lg.Warn("HALLEY_SECRET is unset: generated one in the data directory; replicas must share one secret")
	}
	return ids, nil
}

// outboundClient is the guarded HTTP client for every URL an admin configures (webhooks, notification channels);
// with tracing on, each request is a span and carries its traceparent.
func outboundClient(cfg *config.Config, tr *tracing.Tracing, lg *slog.Logger) *outbound.Client {
	if a := cfg.OutboundAllow.String(); a != "" {
		lg.Info("outbound calls may also reach these non-public addresses", "allow", a)
	}
	opts := outbound.Options{Allow: cfg.OutboundAllow}
	if tr.Enabled() {
		opts.Wrap = tr.Transport
	}
	return outbound.New(opts)
}

// newTracing is the process's tracing: off without HALLEY_OTLP_ENDPOINT (nothing is hung on the seams then, so a
// step, a timer or a request costs what it did without tracing), else an OTLP/HTTP exporter.
func newTracing(ctx context.Context, cfg *config.Config, lg *slog.Logger) (*tracing.Tracing, error) {
	tr, err := tracing.New(ctx, tracing.Options{Endpoint: cfg.OTLPEndpoint, Version: version})
	if err != nil {
		return nil, fmt.Errorf("HALLEY_OTLP_ENDPOINT: %w", err)
	}
	if tr.Enabled() {
		lg.Info("tracing: exporting spans over OTLP/HTTP", "endpoint", cfg.OTLPEndpoint)
	}
	return tr, nil
}

// shutdownTracing exports the spans still buffered, within HALLEY_SHUTDOWN_TIMEOUT (serve's context is done).
func shutdownTracing(tr *tracing.Tracing, cfg *config.Config, lg *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		lg.Warn("tracing: unable to export the last spans", "err", err)
	}
}

// stepObserver is who hears of every engine step: the metrics, and the tracing when it is on.
func stepObserver(m *telemetry.Metrics, tr *tracing.Tracing) engine.StepObserver {
	if !tr.Enabled() {
		return m
	}
	return stepObservers{m, tr}
}

type stepObservers []engine.StepObserver

func (o stepObservers) StepDone(ctx context.Context, r engine.StepReport) {
	for _, x := range o {
		x.StepDone(ctx, r)
	}
}

// pluginRunDone is the executor's OnComplete: the metrics, and a span when tracing is on.
func pluginRunDone(m *telemetry.Metrics, tr *tracing.Tracing) func(plugin.Job, plugin.Result, error) {
	if !tr.Enabled() {
		return m.PluginRunDone
	}
	return func(job plugin.Job, res plugin.Result, err error) {
		m.PluginRunDone(job, res, err)
		tr.PluginRunDone(job, res, err)
	}
}

// traceTimers wraps the timer handler in a span per batch when tracing is on.
func traceTimers(tr *tracing.Tracing, h scheduler.Handler) scheduler.Handler {
	if !tr.Enabled() {
		return h
	}
	return tr.Timers(h)
}

// derive is a key for one purpose, derived from HALLEY_SECRET.
func derive(cfg *config.Config, purpose string) []byte {
	return identity.DeriveKey([]byte(cfg.Secret), purpose)
}

// timerOutbox returns the outbox handlers that arm and cancel timers in the scheduler: the timer.arm and
// timer.cancel rows a step wrote are carried out once it committed.
func timerOutbox(s scheduler.Scheduler) (arm, cancel outbox.Handler) {
	arm = func(ctx context.Context, items []model.OutboxItem) error {
		its := make([]scheduler.Item, 0, len(items))
		for _, it := range items {
			var p model.TimerArm
			if err := json.Unmarshal(it.Payload, &p); err != nil {
				return fmt.Errorf("bad timer.arm payload for %s: %w", it.Ref, err)
			}
			its = append(its, scheduler.Item{ID: it.Ref, Due: p.DueAt()})
		}
		return s.Schedule(ctx, its...)
	}
	cancel = func(ctx context.Context, items []model.OutboxItem) error {
		ids := make([]string, len(items))
		for i, it := range items {
			ids[i] = it.Ref
		}
		return s.Cancel(ctx, ids...)
	}
	return arm, cancel
}

// metricsRefresh is how often one replica refreshes the query gauges (instances by status, outbox backlog,
// timers pending).
const metricsRefresh = 30 * time.Second

// queryGauges reads the query gauges from the database and the scheduler. Counting the instances by status walks
// an index entry per instance (a second or more of the database at millions): the count goes a page at a time,
// paced (countDuty, countAgain), so that it never takes a core from the timers falling due for its whole length
// (docs/benchmarks.md "Nanoseconds, and the instance gauge"); the cheap gauges are read after it, as fresh as the
// refresh.
type queryGauges struct {
	st    *store.Store
	sched scheduler.Scheduler
	// The last count, what it worked and when the next may begin; one refresh at a time reads and sets them.
	counts    map[model.InstanceStatus]int64
	lastWork  time.Duration
	nextCount time.Time
}

// read reads the gauges, counting unpaced when paced is false (a replica's first refresh, before it serves).
func (g *queryGauges) read(ctx context.Context, paced bool) (telemetry.Snapshot, error) {
	var s telemetry.Snapshot
	if err := g.count(ctx, paced); err != nil {
		return s, err
	}
	s.Instances = g.counts
	var err error
	if s.OutboxPending, s.OutboxOldest, err = g.st.OutboxBacklog(ctx); err != nil {
		return s, err
	}
	due, leased, err := g.sched.Len(ctx)
	s.TimersPending = int64(due + leased)
	return s, err
}

// count counts the instances by status, unless the last count is recent for what it cost (countAgain).
func (g *queryGauges) count(ctx context.Context, paced bool) error {
	began := time.Now()
	if paced && g.counts != nil && began.Before(g.nextCount) {
		return nil
	}
	duty := 1.0
	if paced {
		duty = countDuty(g.lastWork)
	}
	pacer, err := clock.NewPacer(clock.Real{}, duty)
	if err != nil {
		return err
	}
	counts, err := g.st.CountInstancesByStatus(ctx, pacer.Wait)
	if err != nil {
		return err
	}
	g.counts, g.lastWork = counts, pacer.Worked()
	g.nextCount = countAgain(began, g.lastWork)
	return nil
}

// The count of the instances by status takes at most countMinDuty of the time on average: a count that worked w
// is not begun again sooner than w / countMinDuty after the last one began (the refreshes in between give its
// result again). Within a count, its pages are paced so that it lasts at most countSpread — at countMinDuty while
// it works at most a second (about a million instances on the 2-core machine of docs/benchmarks.md), a larger
// share beyond — so that a count ends within the refresh-metrics job's period and lock. A count that worked 4 s
// spreads over 20 s at a fifth of a core, and the next begins 80 s after it.
const (
	countMinDuty = 0.05
	countSpread  = 20 * time.Second
)

// countAgain is when a count that began at began and worked w may be begun again.
func countAgain(began time.Time, w time.Duration) time.Time {
	return began.Add(time.Duration(float64(w) / countMinDuty))
}

// countDuty is the duty of a count whose last pass worked w.
func countDuty(w time.Duration) float64 {
	return min(1, max(countMinDuty, float64(w)/float64(countSpread)))
}

// webhookFailures counts the webhook deliveries the subscription service gave up (halley_deliveries_failed_total
// {kind="subscription"}).
func webhookFailures(m *telemetry.Metrics) func(model.DeliveryResult) {
	return func(r model.DeliveryResult) {
		if r.Status == model.DeliveryFailed {
			m.DeliveryFailed("subscription")
		}
	}
}

// wake is the outbox handler of plugin runs queued for a claim: it wakes the executor, which claims them.
func wake(n engine.Notifier) outbox.Handler {
	return func(context.Context, []model.OutboxItem) error {
		n.Notify()
		return nil
	}
}

// retentionSweeper is the retention sweep (HALLEY_INSTANCE_RETENTION*, HALLEY_ARCHIVE_DIR, a template's
// options.retention). It is a worker of its own rather than a housekeeping job: its leader lock is a lease row in
// the database (it needs no Redis, and it fences a sweeper whose lease ran out before it writes), and it paces a
// long backlog itself (HALLEY_INSTANCE_RETENTION_DUTY) for longer than a job's lock would last.
func retentionSweeper(cfg *config.Config, st *store.Store, lg *slog.Logger) (*archive.Sweeper, error) {
	return archive.New(st, archive.Options{Dir: cfg.ArchiveDir, Retention: cfg.InstanceRetention, Every: cfg.RetentionSweep,
		BatchSize: cfg.RetentionBatch, Duty: cfg.RetentionDuty, Logger: lg})
}

// timerHandlers says who fires each kind of timer: the engine its own kinds, the trigger service crontab starts.
func timerHandlers(eng *engine.Engine, triggers *trigger.Service) scheduler.Handlers {
	hs := scheduler.Handlers{model.TimerCrontab: triggers}
	for _, k := range engine.TimerKinds {
		hs[k] = eng
	}
	return hs
}

// The periodic re-arm (scheduler.RearmCreated): every rearmEvery it checks the timers armed since its last pass
// plus rearmOverlap, skipping those armed less than rearmGrace ago; once an hour it checks every pending timer,
// paced (scheduler.RearmPaced).
const (
	rearmEvery   = 5 * time.Minute
	rearmOverlap = 2 * time.Minute
	rearmGrace   = time.Minute
	// rearmAllDuty is the share of the time the hourly pass works: at a million pending timers ~10 s of work
	// spread over ~40.
	rearmAllDuty = 0.25
)

// housekeeping lists the periodic jobs; with Redis each runs on one replica at a time.
func housekeeping(cfg *config.Config, st *store.Store, sched scheduler.Scheduler, subs *subscription.Service, notifier *notify.Service,
	auditLog *audit.Recorder, metrics *telemetry.Metrics, gauges *queryGauges, files *attachments.Service, lg *slog.Logger) []scheduler.Job {
	retention := time.Duration(cfg.RetentionDays) * 24 * time.Hour
	legacyLogs := &plugin.LogStore{Dir: cfg.PluginLogDir} // run logs of earlier releases, on this replica's disk
	return []scheduler.Job{
		{Name: "rearm-timers", Every: rearmEvery, Run: func(ctx context.Context) error {
			// The timers armed since the last pass (and a margin: a pass may run late or on another replica).
			// Rows younger than a minute are skipped: their outbox row is most likely still on its way.
			now := time.Now() // the store stamps created_at with the wall clock
			n, err := scheduler.RearmCreated(ctx, st, sched, now.Add(-rearmEvery-rearmOverlap-rearmGrace), now.Add(-rearmGrace))
			if n > 0 {
				lg.Warn("re-armed timers missing from the scheduler", "count", n)
			}
			return err
		}},
		{Name: "rearm-all-timers", Every: time.Hour, Run: func(ctx context.Context) error {
			// Every pending row, for whatever the pass above cannot see (a key deleted by hand, an eviction); paced,
			// so that the timers falling due meanwhile do not wait behind it.
			n, err := scheduler.RearmPaced(ctx, st, sched, rearmGrace, rearmAllDuty, clock.Real{})
			if n > 0 {
				lg.Warn("re-armed timers missing from the scheduler", "count", n)
			}
			return err
		}},
		{Name: "purge-messages", Every: 10 * time.Minute, Run: func(ctx context.Context) error {
			_, err := st.PurgeMessages(ctx, time.Now().Add(-time.Minute))
			return err
		}},
		{Name: "purge-message-ids", Every: time.Hour, Run: func(ctx context.Context) error {
			// A message_id de-duplicates for 7 days (engine.MessageIDWindow).
			_, err := st.PurgeMessageIDs(ctx, time.Now().Add(-engine.MessageIDWindow))
			return err
		}},
		{Name: "purge-finished-waits", Every: time.Hour, Run: func(ctx context.Context) error {
			_, err := st.PurgeFinished(ctx, time.Now().Add(-retention))
			return err
		}},
		{Name: "purge-plugin-logs", Every: time.Hour, Run: func(ctx context.Context) error {
			before := time.Now().Add(-retention)
			if _, err := legacyLogs.Purge(before); err != nil {
				return err
			}
			_, err := st.PurgeRunLogs(ctx, before)
			return err
		}},
		{Name: "purge-deliveries", Every: time.Hour, Run: func(ctx context.Context) error {
			_, err := subs.PurgeDeliveries(ctx, time.Now().Add(-retention))
			return err
		}},
		{Name: "purge-notifications", Every: time.Hour, Run: func(ctx context.Context) error {
			_, err := notifier.Purge(ctx, time.Now().Add(-retention))
			return err
		}},
		{Name: "notification-digest", Every: 10 * time.Minute, Run: func(ctx context.Context) error {
			// Every run within a tenant's digest hour finds the digests of the day written already but for new users.
			_, err := notifier.Digest(ctx)
			return err
		}},
		{Name: "purge-attachments", Every: time.Hour, Run: func(ctx context.Context) error {
			if files == nil {
				return nil
			}
			_, err := files.Purge(ctx) // uploads no instance uses, a day after their upload
			return err
		}},
		{Name: "purge-audit-log", Every: time.Hour, Run: func(ctx context.Context) error {
			_, err := auditLog.Purge(ctx, cfg.AuditRetention) // HALLEY_AUDIT_RETENTION, 0 = kept forever
			return err
		}},
		{Name: "refresh-metrics", Every: metricsRefresh, Run: func(ctx context.Context) error {
			// The query gauges: one replica at a time counts (the job's lock), the others stop exporting them.
			return metrics.Refresh(ctx, func(ctx context.Context) (telemetry.Snapshot, error) { return gauges.read(ctx, true) })
		}},
		{Name: "purge-idempotency-keys", Every: time.Hour, Run: func(ctx context.Context) error {
			_, err := st.PurgeIdempotent(ctx, time.Now().Add(-server.IdempotencyWindow))
			return err
		}},
	}
}

// webUI is the web app built into the binary; without a UI build, / answers a page that says how to get one.
func webUI(lg *slog.Logger) http.FileSystem {
	if !frontend.Built() {
		lg.Warn("the web UI is not built into this binary; run `make run` or `make build` with Node.js installed to include it")
	}
	return http.FS(frontend.Dist())
}

// webServer is the HTTP server. serve's start opens HALLEY_ADDR before anything else (a port in use fails the
// start at once), behind a gate that answers while the process waits for its database and migrates: /healthz 200,
// /readyz 503 with the step under way, any other request 503 starting. Its worker opens the gate.
type webServer struct {
	gate *server.Gate
	hs   *http.Server
	addr string
	errc chan error // what Serve returned
}

func listen(cfg *config.Config, lg *slog.Logger) (*webServer, error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("HALLEY_ADDR: unable to listen on %s: %v", cfg.Addr, err)
	}
	w := &webServer{gate: server.NewGate("starting"), addr: ln.Addr().String(), errc: make(chan error, 1)}
	w.hs = &http.Server{
		Handler:           w.gate,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // plugin uploads
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(lg.Handler(), slog.LevelWarn),
	}
	lg.Info("halley is listening; ready once the database is migrated and the services are built", "addr", w.addr, "version", version)
	go func() { w.errc <- w.hs.Serve(ln) }()
	return w, nil
}

// step says what the start is doing (/readyz shows it); a no-op without a server (migrate).
func (w *webServer) step(s string) {
	if w != nil {
		w.gate.Step(s)
	}
}

// close stops a server whose start failed (its worker drains it gracefully otherwise).
func (w *webServer) close() { _ = w.hs.Close() }

// worker is the HTTP server as a worker: started, it hands every request to h; stopped, it drains the requests
// in flight.
func (w *webServer) worker(h http.Handler, st *store.Store, cfg *config.Config, lg *slog.Logger) *lifecycle.Service {
	return &lifecycle.Service{Name: "http server",
		Run: func(context.Context) error {
			w.gate.Open(h)
			lg.Info("halley is serving", "addr", w.addr, "version", version, "database", st.Dialect(), "redis", cfg.RedisURL != "", "data_dir", cfg.DataDir)
			if err := <-w.errc; !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
		Drain: func(ctx context.Context) error {
			lg.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout)
			return w.hs.Shutdown(ctx)
		}}
}
