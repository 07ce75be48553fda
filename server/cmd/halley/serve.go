package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/frontend"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/server/config"
	"github.com/halley-bpm/halley/service/audit"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/lifecycle"
	"github.com/halley-bpm/halley/service/outbound"
	"github.com/halley-bpm/halley/service/outbox"
	"github.com/halley-bpm/halley/service/ratelimit"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/subscription"
	"github.com/halley-bpm/halley/service/template"
	"github.com/halley-bpm/halley/service/trigger"
)

// serve is the composition root. It builds every service in dependency order, each from a constructor that takes
// all it needs and says what is missing, then runs the background workers from one list: started in order,
// stopped in reverse within HALLEY_SHUTDOWN_TIMEOUT, and a worker that dies stops the process with its error.
// docs/architecture.md draws it.
func serve(ctx context.Context, cfg *config.Config, st *store.Store, lg *slog.Logger) error {
	clk := clock.Real{}
	rdb := openRedis(ctx, cfg.RedisURL, lg) // nil without HALLEY_REDIS_URL: one process, in-process timers
	defer closeRedis(rdb)
	ids, err := bootstrapAdmin(ctx, cfg, st, loginAttempts(rdb), lg)
	if err != nil {
		return err
	}
	auditLog := audit.New(st, clk.Now, lg)
	sched := newScheduler(cfg, rdb, clk, lg)
	defer sched.Close()
	pluginLogs := &plugin.LogStore{Dir: cfg.PluginLogDir}

	pluginFiles, errFiles := plugin.NewFileStore(cfg.PluginDir)
	sandbox, errSandbox := pluginSandbox(cfg, lg) // confines every plugin run; logs what is in force
	executor, errExecutor := plugin.NewExecutor(&plugin.ProcessRunner{Sandbox: sandbox, OutputCap: cfg.PluginOutputCap},
		plugin.ExecutorOptions{Workers: cfg.PluginWorkers, Lease: time.Minute, PollInterval: 2 * time.Second, Logger: lg, Logs: pluginLogs, Now: clk.Now})
	eventPlugins, errEvents := engine.NewEventPlugins(st, executor)
	out := outboundClient(cfg, lg) // every URL Halley calls: public addresses, and what HALLEY_OUTBOUND_ALLOW lists
	subs := subscription.New(st, subscription.Options{Logger: lg, SecretKey: derive(cfg, "subscription-secret"), Plugins: st, PluginRuns: eventPlugins, Outbound: out})
	arm, cancelTimers := engine.TimerOutbox(sched)
	disp, errOutbox := outbox.New(st, outbox.Handlers{model.OutboxEvent: subs.OutboxHandler(), model.OutboxTimerArm: arm,
		model.OutboxTimerCancel: cancelTimers, model.OutboxPluginRun: wake(executor)},
		outbox.Options{Logger: lg, OnDispatched: func(int) { subs.Notify() }}) // deliveries are visible once their batch committed
	publisher, errPublisher := trigger.NewPublisher(st, sched, clk, lg)
	templates := template.New(st, clk.Now, template.WithPublishers(publisher), template.WithSecretKey(derive(cfg, "trigger-secret")))
	eng, errEngine := engine.New(engine.Deps{Store: st, Templates: templates, Directory: st, Events: subs, Outbox: disp, PluginFiles: pluginFiles,
		Executor: executor}, engine.Options{Clock: clk, Logger: lg, CallbackKey: derive(cfg, "callback-url"), PublicURL: cfg.PublicURL})
	triggers, errTriggers := trigger.New(trigger.Deps{Store: st, Templates: templates, Engine: eng, Publisher: publisher}, clk, lg)
	timers, errTimers := scheduler.Route(st, timerHandlers(eng, triggers))
	hk, errHousekeeper := scheduler.NewHousekeeper(redisLocks(rdb), "halley:", lg, housekeeping(cfg, st, sched, subs, pluginLogs, auditLog, lg)...)
	srv, errServer := server.New(server.Deps{Identity: ids, Templates: templates, Engine: eng, Triggers: triggers, Plugins: st,
		PluginFiles: pluginFiles, PluginMaxSize: cfg.PluginMaxSize, PluginSandbox: sandbox, Subscriptions: subs, TrustedProxies: cfg.TrustedProxies, Idempotency: st,
		IdempotencyLease: cfg.IdempotencyLease, Ready: readiness(st, rdb, sched), DBStats: st.Stats, Logger: lg, BodyLimit: cfg.BodyLimit, UI: webUI(lg),
		FormFrameAncestors: cfg.FormFrameAncestors, Audit: auditLog, TriggerLimit: ratelimit.NewBuckets(cfg.TriggerRateLimit)})
	if err := errors.Join(errFiles, errSandbox, errExecutor, errEvents, errOutbox, errPublisher, errEngine, errTriggers, errTimers, errHousekeeper, errServer); err != nil {
		return err
	}
	if err := subs.Refresh(ctx); err != nil {
		return fmt.Errorf("load event subscriptions: %w", err)
	}
	web, err := listen(cfg, srv.Handler(), st, lg)
	if err != nil {
		return err
	}

	err = lifecycle.Run(ctx, cfg.ShutdownTimeout, lg,
		&lifecycle.Service{Name: "outbox dispatcher", Run: disp.Run},
		&lifecycle.Service{Name: "webhook sender", Run: subs.Run},
		&lifecycle.Service{Name: "plugin executor", Run: func(ctx context.Context) error { return executor.Run(ctx, eng.PluginQueue()) }, Drain: executor.Drain},
		&lifecycle.Service{Name: "timer loop", Run: func(ctx context.Context) error { return sched.Run(ctx, timers) }},
		&lifecycle.Service{Name: "timer recovery", Run: func(ctx context.Context) error { return scheduler.Recover(ctx, st, sched, cfg.RedisCheckInterval, lg) }},
		&lifecycle.Service{Name: "housekeeping", Run: hk.Run},
		web, // last started, first stopped: requests drain before the workers behind them stop
	)
	if err == nil {
		lg.Info("stopped")
	}
	return err
}

// openRedis connects to HALLEY_REDIS_URL (nil when unset). An unreachable Redis is logged, not fatal: /readyz
// reports it until it answers.
func openRedis(ctx context.Context, url string, lg *slog.Logger) *redis.Client {
	if url == "" {
		return nil
	}
	opt, _ := redis.ParseURL(url) // config.Load checked it
	rdb := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		lg.Error("redis is not reachable yet; /readyz reports not ready until it is", "err", err)
	}
	return rdb
}

func closeRedis(rdb *redis.Client) {
	if rdb != nil {
		rdb.Close()
	}
}

// redisLocks is the housekeeper's lock client: none without Redis (one process needs no locks).
func redisLocks(rdb *redis.Client) redis.UniversalClient {
	if rdb == nil {
		return nil
	}
	return rdb
}

// newScheduler is the timer index: the Redis sorted set when Redis is configured (shared by every replica), else
// an in-process heap.
func newScheduler(cfg *config.Config, rdb *redis.Client, clk clock.Clock, lg *slog.Logger) scheduler.Scheduler {
	opts := scheduler.Options{Clock: clk, Linger: cfg.TimerLinger, Logger: lg}
	if rdb != nil {
		return scheduler.NewRedis(rdb, "halley:", opts)
	}
	return scheduler.NewMemory(opts)
}

// readiness lists what /readyz pings.
func readiness(st *store.Store, rdb *redis.Client, sched scheduler.Scheduler) map[string]server.Pinger {
	ready := map[string]server.Pinger{"database": st, "scheduler": sched}
	if rdb != nil {
		ready["redis"] = redisPinger{rdb}
	}
	return ready
}

type redisPinger struct{ c *redis.Client }

func (p redisPinger) Ping(ctx context.Context) error { return p.c.Ping(ctx).Err() }

// loginAttempts counts failed sign-ins: in Redis when there is one, so that every replica throttles the same
// attempts, else in this process.
func loginAttempts(rdb *redis.Client) ratelimit.Counter {
	if rdb == nil {
		return ratelimit.NewMemory(identity.LoginWindow, 0)
	}
	return ratelimit.NewRedis(rdb, "halley:", identity.LoginWindow)
}

// bootstrapAdmin returns the identity service, after creating user admin in an empty database. Failed sign-ins
// are counted in attempts.
func bootstrapAdmin(ctx context.Context, cfg *config.Config, st *store.Store, attempts ratelimit.Counter, lg *slog.Logger) (*identity.Service, error) {
	ids := identity.New(st, identity.Options{Secret: []byte(cfg.Secret), TokenTTL: cfg.TokenTTL, Logger: lg, Attempts: attempts,
		HashConcurrency: cfg.HashConcurrency})
	created, err := ids.Bootstrap(ctx, cfg.AdminPassword, cfg.AdminPasswordDefaulted)
	if err != nil {
		return nil, fmt.Errorf("bootstrap admin: %w", err)
	}
	if created && cfg.AdminPasswordDefaulted {
		lg.Warn(strings.Repeat("!", 72))
		lg.Warn("created user 'admin' with the DEFAULT password 'admin': sign in at " + cfg.LocalURL() + "/ as admin/admin and choose a new password (the UI asks at once; later: your name in the header > Profile > Change password), or set HALLEY_ADMIN_PASSWORD before the first start")
		lg.Warn(strings.Repeat("!", 72))
	} else if created {
		lg.Info("created user 'admin' with the password from HALLEY_ADMIN_PASSWORD")
	} else if ids.BootstrapPasswordUnchanged(ctx) {
		lg.Warn("user 'admin' still has the password it was created with: sign in at " + cfg.LocalURL() + "/ and choose a new one (Profile > Change password)")
	}
	if cfg.SecretGenerated {
		lg.Warn("HALLEY_SECRET is unset: generated one in the data directory; replicas must share one secret")
	}
	return ids, nil
}

// outboundClient is the guarded HTTP client for every URL an admin configures (webhooks today).
func outboundClient(cfg *config.Config, lg *slog.Logger) *outbound.Client {
	if a := cfg.OutboundAllow.String(); a != "" {
		lg.Info("outbound calls may also reach these non-public addresses", "allow", a)
	}
	return outbound.New(outbound.Options{Allow: cfg.OutboundAllow})
}

// derive is a key for one purpose, derived from HALLEY_SECRET.
func derive(cfg *config.Config, purpose string) []byte {
	return identity.DeriveKey([]byte(cfg.Secret), purpose)
}

// wake is the outbox handler of plugin runs queued for a claim: it wakes the executor, which claims them.
func wake(n engine.Notifier) outbox.Handler {
	return func(context.Context, []model.OutboxItem) error {
		n.Notify()
		return nil
	}
}

// timerHandlers says who fires each kind of timer: the engine its own kinds, the trigger service crontab starts.
func timerHandlers(eng *engine.Engine, triggers *trigger.Service) scheduler.Handlers {
	hs := scheduler.Handlers{model.TimerCrontab: triggers}
	for _, k := range engine.TimerKinds {
		hs[k] = eng
	}
	return hs
}

// housekeeping lists the periodic jobs; with Redis each runs on one replica at a time.
func housekeeping(cfg *config.Config, st *store.Store, sched scheduler.Scheduler, subs *subscription.Service, logs *plugin.LogStore,
	auditLog *audit.Recorder, lg *slog.Logger) []scheduler.Job {
	retention := time.Duration(cfg.RetentionDays) * 24 * time.Hour
	return []scheduler.Job{
		{Name: "rearm-timers", Every: 5 * time.Minute, Run: func(ctx context.Context) error {
			// Rows younger than a minute are skipped: their outbox row is most likely still on its way.
			n, err := scheduler.Rearm(ctx, st, sched, time.Minute)
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
		{Name: "purge-plugin-logs", Every: time.Hour, Run: func(context.Context) error {
			_, err := logs.Purge(time.Now().Add(-retention))
			return err
		}},
		{Name: "purge-deliveries", Every: time.Hour, Run: func(ctx context.Context) error {
			_, err := subs.PurgeDeliveries(ctx, time.Now().Add(-retention))
			return err
		}},
		{Name: "purge-audit-log", Every: time.Hour, Run: func(ctx context.Context) error {
			_, err := auditLog.Purge(ctx, cfg.AuditRetention) // HALLEY_AUDIT_RETENTION, 0 = kept forever
			return err
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

// listen opens HALLEY_ADDR now — a port in use fails the start before any worker runs — and returns the HTTP
// server as a worker: it serves once started and, when stopped, drains the requests in flight.
func listen(cfg *config.Config, h http.Handler, st *store.Store, lg *slog.Logger) (*lifecycle.Service, error) {
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // plugin uploads
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(lg.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("HALLEY_ADDR: unable to listen on %s: %v", cfg.Addr, err)
	}
	return &lifecycle.Service{Name: "http server",
		Run: func(context.Context) error {
			lg.Info("halley is serving", "addr", ln.Addr().String(), "version", version, "database", st.Dialect(), "redis", cfg.RedisURL != "", "data_dir", cfg.DataDir)
			if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
		Drain: func(ctx context.Context) error {
			lg.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout)
			return hs.Shutdown(ctx)
		}}, nil
}
