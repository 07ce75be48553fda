// Command halley is the Halley approval/BPM server. `halley serve` (the default) runs it; `halley migrate`
// applies the database migrations and exits; `halley version` prints the version.
//
// This file is the composition root: it reads the configuration and wires every component; nothing else in
// Halley reads the environment or holds globals.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/frontend"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/plugin"
	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/server/config"
	"github.com/halley-bpm/halley/service/archive"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/identity"
	"github.com/halley-bpm/halley/service/outbox"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/subscription"
	"github.com/halley-bpm/halley/service/template"
	"github.com/halley-bpm/halley/service/trigger"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		if !errors.Is(err, errLogged) {
			fmt.Fprintln(os.Stderr, "halley:", err)
		}
		os.Exit(1)
	}
}

// errLogged is returned by run for an error it has already written to the log (in the log's format).
var errLogged = errors.New("halley: stopped with an error (logged)")

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("halley", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "YAML configuration file (HALLEY_* environment variables override it)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: halley [--config file.yaml] [serve|migrate|version]\n       halley templates load [--url http://127.0.0.1:8080] [--user admin] [--password pw | --token tok]\n       halley [--config file.yaml] archive show [--raw] INSTANCE_ID\n\nSettings come from HALLEY_* environment variables (see docs/configuration.md).\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	cmd := "serve"
	if fs.NArg() > 0 {
		cmd = fs.Arg(0)
	}
	switch cmd {
	case "version":
		fmt.Fprintln(stderr, "halley", version)
		return nil
	case "templates":
		if fs.NArg() < 2 || fs.Arg(1) != "load" {
			fs.Usage()
			return fmt.Errorf("unknown command %q", strings.Join(fs.Args(), " "))
		}
		return loadTemplates(ctx, fs.Args()[2:], getenv, stderr)
	case "archive":
		if fs.NArg() < 2 || fs.Arg(1) != "show" {
			fs.Usage()
			return fmt.Errorf("unknown command %q (want: archive show ID)", strings.Join(fs.Args(), " "))
		}
		args := fs.Args()[2:]
		if *cfgPath != "" {
			args = append([]string{"--config", *cfgPath}, args...)
		}
		return archiveShow(ctx, args, os.Stdout)
	case "serve", "migrate":
	default:
		fs.Usage()
		return fmt.Errorf("unknown command %q", cmd)
	}
	cfg, err := config.Load(*cfgPath, getenv)
	if err != nil {
		return err
	}
	lg := newLogger(cfg, stderr)
	defer func() {
		if err != nil && !errors.Is(err, errLogged) {
			lg.Error("halley stopped", "err", err)
			err = errLogged
		}
	}()
	if err := cfg.EnsureSecret(); err != nil {
		return err
	}
	// serve listens before it has a database: /healthz says the process lives and /readyz answers 503 until the
	// migrations are done and every service is built (the gate then hands requests to the real handler).
	var web *webServer
	if cmd == "serve" {
		if web, err = listen(cfg, lg); err != nil {
			return err
		}
		defer web.close()
		web.gate.Step("connecting to the database")
	}
	st, err := store.Open(ctx, store.Config{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, MaxOpenConns: cfg.DBMaxOpenConns,
		MaxIdleConns: cfg.DBMaxIdleConns, ConnMaxLifetime: cfg.DBConnMaxLifetime, Logger: lg, Wait: cfg.DBWait})
	if err != nil {
		if ctx.Err() != nil {
			lg.Info("stopped while waiting for the database")
			return nil
		}
		return err
	}
	defer st.Close()
	if web != nil {
		web.gate.Step("migrating the database")
	}
	if _, err := st.Migrate(ctx); err != nil {
		return err
	}
	if cmd == "migrate" {
		v, _ := st.SchemaVersion(ctx)
		lg.Info("database schema is current", "version", v, "dialect", st.Dialect())
		return nil
	}
	web.gate.Step("starting services")
	return serve(ctx, cfg, st, lg, web)
}

// webServer is the HTTP server, listening from the start behind its gate.
type webServer struct {
	gate *server.Gate
	hs   *http.Server
	errc chan error
}

func listen(cfg *config.Config, lg *slog.Logger) (*webServer, error) {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("HALLEY_ADDR: unable to listen on %s: %v", cfg.Addr, err)
	}
	w := &webServer{gate: server.NewGate("starting"), errc: make(chan error, 1)}
	w.hs = &http.Server{
		Handler:           w.gate,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // plugin uploads
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(lg.Handler(), slog.LevelWarn),
	}
	lg.Info("halley is listening; ready once the database is migrated", "addr", ln.Addr().String(), "version", version)
	go func() { w.errc <- w.hs.Serve(ln) }()
	return w, nil
}

// close stops a server that never got past the start (serve drains it gracefully itself).
func (w *webServer) close() { _ = w.hs.Close() }

func serve(ctx context.Context, cfg *config.Config, st *store.Store, lg *slog.Logger, web *webServer) error {
	ready := map[string]server.Pinger{"database": st}
	var rdb *redis.Client
	if cfg.RedisURL != "" {
		opt, err := redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return fmt.Errorf("HALLEY_REDIS_URL: %v", err)
		}
		rdb = redis.NewClient(opt)
		defer rdb.Close()
		ready["redis"] = redisPinger{rdb}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := rdb.Ping(pctx).Err(); err != nil {
			lg.Error("redis is not reachable yet; /readyz reports not ready until it is", "err", err)
		}
		cancel()
	}

	ids := identity.New(st, identity.Options{Secret: []byte(cfg.Secret), TokenTTL: cfg.TokenTTL, Logger: lg})
	created, err := ids.Bootstrap(ctx, cfg.AdminPassword)
	if err != nil {
		return fmt.Errorf("bootstrap admin: %w", err)
	}
	if created && cfg.AdminPasswordDefaulted {
		lg.Warn(strings.Repeat("!", 72))
		lg.Warn("created user 'admin' with the DEFAULT password 'admin': log in and change it, or set HALLEY_ADMIN_PASSWORD before the first start")
		lg.Warn(strings.Repeat("!", 72))
	} else if created {
		lg.Info("created user 'admin' with the password from HALLEY_ADMIN_PASSWORD")
	}
	if cfg.SecretGenerated {
		lg.Warn("HALLEY_SECRET is unset: generated one in the data directory; replicas must share one secret")
	}

	templates := template.New(st, nil)
	eng := engine.New(st, templates, st, engine.Options{Logger: lg, CallbackKey: identity.DeriveKey([]byte(cfg.Secret), "callback-url"), PublicURL: cfg.PublicURL})

	// Timers: the Redis sorted set when Redis is configured (shared by every replica), else an in-process heap.
	schedOpts := scheduler.Options{Clock: clock.Real{}, Linger: cfg.TimerLinger, Logger: lg}
	var sched scheduler.Scheduler
	var redisSched *scheduler.Redis
	if rdb != nil {
		redisSched = scheduler.NewRedis(rdb, cfg.RedisPrefix, schedOpts)
		sched = redisSched
	} else {
		sched = scheduler.NewMemory(schedOpts)
	}
	defer sched.Close()
	ready["scheduler"] = sched
	triggers := trigger.New(st, templates, eng, clock.Real{}, lg)
	triggers.SetScheduler(sched)
	templates.SetPublisher(triggers)
	eng.SetCronHandler(triggers.HandleCron)
	subs := subscription.New(st, subscription.Options{Logger: lg, SecretKey: identity.DeriveKey([]byte(cfg.Secret), "subscription-secret"), Plugins: st, PluginRuns: eng})
	if err := subs.Refresh(ctx); err != nil {
		return fmt.Errorf("load event subscriptions: %w", err)
	}
	eng.SetEvents(subs)
	// OnDispatched wakes the webhook loop once a batch has committed (its deliveries are visible only then).
	disp := outbox.New(st, outbox.Options{Logger: lg, OnDispatched: func(int) { subs.Notify() }})
	disp.Handle(model.OutboxEvent, subs.OutboxHandler())
	arm, cancelTimers := engine.TimerOutbox(sched)
	disp.Handle(model.OutboxTimerArm, arm)
	disp.Handle(model.OutboxTimerCancel, cancelTimers)
	eng.SetOnOutbox(disp.Notify)

	// Plugins: files in the database (uploaded through any replica), fetched by SHA-256 into this replica's
	// cache on first use; runs executed by a bounded worker pool that claims durable run rows, so every replica
	// shares the work; run logs in the database, readable from every replica.
	imported, missing, err := plugin.ImportLegacy(ctx, cfg.PluginDir, st)
	if err != nil {
		return fmt.Errorf("import plugin files from HALLEY_PLUGIN_DIR: %w", err)
	}
	if imported > 0 {
		lg.Info("imported plugin files of an earlier release from the plugin directory into the database", "files", imported, "dir", cfg.PluginDir)
	}
	for _, p := range missing {
		lg.Warn("a plugin version has no file in the database or on this replica: its runs fail until it is uploaded again (or the replica that has it starts)",
			"plugin", p.Name, "version", p.Version, "sha256", p.SHA256)
	}
	pluginFiles, err := plugin.NewCache(filepath.Join(cfg.PluginDir, "sha256"), st)
	if err != nil {
		return fmt.Errorf("HALLEY_PLUGIN_DIR: %v", err)
	}
	legacyLogs := &plugin.LogStore{Dir: filepath.Join(cfg.DataDir, "plugin-logs")} // files of earlier releases, purged as they age
	runner := &plugin.ProcessRunner{WorkRoot: filepath.Join(cfg.DataDir, "plugin-work"), OutputCap: cfg.PluginOutputCap}
	pluginQueue := engine.NewPluginQueue(eng, st, pluginFiles)
	executor := plugin.NewExecutor(pluginQueue, runner, plugin.ExecutorOptions{
		Workers: cfg.PluginWorkers, Lease: time.Minute, PollInterval: 2 * time.Second, Logger: lg, Logs: pluginQueue, Now: eng.Now})
	pluginQueue.Attach(executor) // runs queued while a worker is free go to it at commit, leased, without a claim
	eng.SetOnPluginRun(executor.Notify)
	disp.Handle(model.OutboxPluginRun, func(context.Context, []model.OutboxItem) error {
		executor.Notify()
		return nil
	})

	var rdbLock redis.UniversalClient
	if rdb != nil {
		rdbLock = rdb
	}
	hk, err := scheduler.NewHousekeeper(rdbLock, cfg.RedisPrefix, lg)
	if err != nil {
		return err
	}
	jobs := []struct {
		name  string
		every time.Duration
		fn    func(ctx context.Context) error
	}{
		{"rearm-timers", 5 * time.Minute, func(ctx context.Context) error {
			// Rows younger than a minute are skipped: their outbox row is most likely still on its way.
			n, err := eng.RearmTimers(ctx, sched, time.Minute)
			if n > 0 {
				lg.Warn("re-armed timers missing from the scheduler", "count", n)
			}
			return err
		}},
		{"purge-messages", 10 * time.Minute, func(ctx context.Context) error {
			_, err := st.PurgeMessages(ctx, time.Now().Add(-time.Minute))
			return err
		}},
		{"purge-finished-waits", time.Hour, func(ctx context.Context) error {
			_, err := st.PurgeFinished(ctx, time.Now().Add(-time.Duration(cfg.RetentionDays)*24*time.Hour))
			return err
		}},
		{"purge-plugin-logs", time.Hour, func(ctx context.Context) error {
			before := time.Now().Add(-time.Duration(cfg.RetentionDays) * 24 * time.Hour)
			if _, err := legacyLogs.Purge(before); err != nil {
				return err
			}
			_, err := st.PurgeRunLogs(ctx, before)
			return err
		}},
		{"purge-deliveries", time.Hour, func(ctx context.Context) error {
			_, err := subs.PurgeDeliveries(ctx, time.Now().Add(-time.Duration(cfg.RetentionDays)*24*time.Hour))
			return err
		}},
		{"purge-idempotency-keys", time.Hour, func(ctx context.Context) error {
			_, err := st.PurgeIdempotent(ctx, time.Now().Add(-server.IdempotencyWindow))
			return err
		}},
	}
	for _, j := range jobs {
		if err := hk.Add(j.name, j.every, j.fn); err != nil {
			return err
		}
	}

	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); disp.Run(bg) }()
	go func() { defer wg.Done(); subs.Run(bg) }()
	go func() {
		defer wg.Done()
		if err := executor.Run(bg); err != nil {
			lg.Error("plugin executor stopped", "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		if err := sched.Run(bg, eng.HandleTimers); err != nil {
			lg.Error("scheduler stopped", "err", err)
		}
	}()
	// The retention sweep archives and deletes finished instances past their retention, on one replica at a time
	// (a lease in the database).
	sweeper := archive.New(st, archive.Options{Dir: cfg.ArchiveDir, Retention: cfg.InstanceRetention, Every: cfg.RetentionSweep,
		BatchSize: cfg.RetentionBatch, Duty: cfg.RetentionDuty, Logger: lg})
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := sweeper.Run(bg); err != nil {
			lg.Error("retention sweep stopped", "err", err)
		}
	}()
	if n, err := eng.RearmTimers(ctx, sched, 0); err != nil {
		lg.Error("unable to re-arm timers at start; the housekeeping job will retry", "err", err)
	} else if n > 0 {
		lg.Info("armed pending timers from the database", "count", n)
	}
	if redisSched != nil {
		// Redis may lose its data (FLUSHALL, a restart without persistence): re-arm at the next check, not only
		// at the periodic rearm-timers job.
		wg.Add(1)
		go func() {
			defer wg.Done()
			redisSched.WatchLoss(bg, cfg.RedisCheckInterval, func(ctx context.Context) error {
				n, err := eng.RearmTimers(ctx, sched, 0)
				if n > 0 {
					lg.Warn("re-armed timers after redis lost its data", "count", n)
				}
				return err
			})
		}()
	}
	hk.Start()
	defer func() {
		// After HTTP has drained: stop the background loops and wait for them.
		if err := hk.Shutdown(); err != nil {
			lg.Error("housekeeping shutdown", "err", err)
		}
		stopBG()
		wg.Wait()
	}()

	// Without a UI build, / answers a page that says how to get one.
	ui := http.FS(frontend.Dist())
	if !frontend.Built() {
		lg.Warn("the web UI is not built into this binary; run `make run` or `make build` with Node.js installed to include it")
	}
	srv := server.New(server.Deps{Identity: ids, Templates: templates, Engine: eng, Triggers: triggers, Plugins: st, PluginMaxSize: cfg.PluginMaxSize, Subscriptions: subs, TrustedProxies: cfg.TrustedProxies, Idempotency: st, IdempotencyLease: cfg.IdempotencyLease, Ready: ready, DBStats: st.Stats, Logger: lg, BodyLimit: cfg.BodyLimit, UI: ui})

	web.gate.Open(srv.Handler())
	lg.Info("halley is serving", "addr", cfg.Addr, "version", version, "database", st.Dialect(), "redis", cfg.RedisURL != "", "data_dir", cfg.DataDir)
	select {
	case err := <-web.errc:
		return err
	case <-ctx.Done():
	}
	lg.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := web.hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	lg.Info("stopped")
	return nil
}

type redisPinger struct{ c *redis.Client }

func (p redisPinger) Ping(ctx context.Context) error { return p.c.Ping(ctx).Err() }
