// Command halley is the Halley approval/BPM server. `halley serve` (also plain `halley`) runs it; `halley migrate`
// applies the database migrations and exits; `halley templates load` loads the ready-made templates into a
// running Halley; `halley archive show` prints an instance the retention sweep archived; `halley doctor` checks a
// deployment and says what to fix; `halley version` prints the version and build information. `halley <command> --help` says more.
//
// This package is the composition root: it reads the configuration and builds every component (serve.go);
// nothing else in Halley reads the environment or holds globals.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/spf13/cobra"

	"github.com/halley-bpm/halley/server/config"
	"github.com/halley-bpm/halley/service/attachments"
	"github.com/halley-bpm/halley/service/store"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errLogged) {
			fmt.Fprintln(os.Stderr, "halley:", err)
		}
		os.Exit(1)
	}
}

// errLogged marks an error that has been written to the log already (in the log's format: one JSON line with
// HALLEY_LOG_FORMAT=json), so that main does not print it again as plain text.
var errLogged = errors.New("logged")

// loggedError is an error written to the log; it reads as the error itself.
type loggedError struct{ err error }

func (e loggedError) Error() string   { return e.err.Error() }
func (e loggedError) Unwrap() []error { return []error{e.err, errLogged} }

// run runs the command line args: help and usage go to stdout, logs to stderr. A nil error is exit status 0.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := newCommand(getenv, stdout, stderr)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

// newCommand builds the command tree. --config is accepted before or after the command name.
func newCommand(getenv func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var cfgPath string
	// serveE is serve's: it listens at once behind a gate, opens and migrates the database, and serves.
	serveE := func(c *cobra.Command, _ []string) error {
		gc := tuneGC(getenv, memlimit.FromCgroup)
		return withDatabase(c.Context(), cfgPath, getenv, stderr, true,
			func(ctx context.Context, cfg *config.Config, st *store.Store, lg *slog.Logger, web *webServer) error {
				lg.Info("garbage collector", gc...)
				return serve(ctx, cfg, st, lg, web)
			})
	}
	root := &cobra.Command{
		Use:   "halley",
		Short: "Halley, an approval and BPM engine in one binary",
		Long: "Halley is an approval and BPM engine in one binary. Without a command it serves (halley serve).\n\n" +
			"Settings come from HALLEY_* environment variables and an optional YAML file given with --config;\n" +
			"the environment wins. See docs/configuration.md.",
		Args:          cobra.NoArgs,
		RunE:          serveE,
		SilenceUsage:  true,
		SilenceErrors: true,
		CompletionOptions: cobra.CompletionOptions{
			DisableDefaultCmd: true,
		},
	}
	root.PersistentFlags().StringVar(&cfgPath, "config", "", "YAML configuration file (HALLEY_* environment variables override it)")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%s: %w (see %s --help)", c.CommandPath(), err, c.CommandPath())
	})

	root.AddCommand(&cobra.Command{
		Use:   "serve",
		Short: "Run the server: HTTP API, web UI and background workers, until SIGINT or SIGTERM",
		Long: "Run the server: the HTTP API and web UI on HALLEY_ADDR, and the background workers (outbox dispatcher,\n" +
			"webhook sender, plugin executor, timer loop, timer recovery, retention sweeper, housekeeping). It listens\n" +
			"at once (/healthz answers, /readyz says 503 until it is ready), waits for the database up to HALLEY_DB_WAIT\n" +
			"and migrates it first. SIGINT or SIGTERM stop it gracefully within HALLEY_SHUTDOWN_TIMEOUT.",
		Args: cobra.NoArgs,
		RunE: serveE,
	}, &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations and exit",
		Long: "Apply the database migrations and exit. It waits for the database up to HALLEY_DB_WAIT, as serve does;\n" +
			"replicas started later find the schema current. It then moves the files older requests kept inline\n" +
			"(data: URLs in their data) into the attachments store, as serve does at start.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withDatabase(c.Context(), cfgPath, getenv, stderr, false,
				func(ctx context.Context, cfg *config.Config, st *store.Store, lg *slog.Logger, _ *webServer) error {
					v, _ := st.SchemaVersion(ctx)
					lg.Info("database schema is current", "version", v, "dialect", st.Dialect())
					files, err := attachments.New(st, attachments.Config{Storage: cfg.AttachmentStorage, Dir: cfg.AttachmentDir, MaxSize: cfg.AttachmentMaxSize})
					if err != nil {
						return err
					}
					_, err = files.MigrateDataURLs(ctx, st, 0, lg)
					return err
				})
		},
	}, &cobra.Command{
		Use:   "version",
		Short: "Print the version and build information",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			printVersion(c.OutOrStdout())
			return nil
		},
	})

	templates := &cobra.Command{
		Use:   "templates",
		Short: "Manage the ready-made process templates",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return fmt.Errorf("%s needs a subcommand (see %s --help)", c.CommandPath(), c.CommandPath())
		},
	}
	templates.AddCommand(&cobra.Command{
		Use:   "load [--url URL] [--config file.yaml] [--user admin] [--password pw | --token tok]",
		Short: "Load the ready-made templates and example plugins into a running Halley",
		// loadTemplates parses its own flags (and prints its own usage for --help).
		DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			err := loadTemplates(c.Context(), args, cfgPath, getenv, c.OutOrStdout())
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				return fmt.Errorf("%s: %w", c.CommandPath(), err)
			}
			return err
		},
	})
	root.AddCommand(templates, archiveCommand(&cfgPath, getenv), doctorCommand(&cfgPath, getenv))
	return root
}

// archiveCommand is `halley archive`: reading back what the retention sweep archived.
func archiveCommand(cfgPath *string, getenv func(string) string) *cobra.Command {
	archive := &cobra.Command{
		Use:   "archive",
		Short: "Read the archive of instances the retention sweep removed from the database",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return fmt.Errorf("%s needs a subcommand (see %s --help)", c.CommandPath(), c.CommandPath())
		},
	}
	var raw bool
	show := &cobra.Command{
		Use:   "show INSTANCE_ID",
		Short: "Print an archived instance with its tasks, history, plugin runs and waits",
		Long: "Print an archived instance (with its tasks, history, plugin runs and waits) as JSON, read from the archive\n" +
			"directory. It reads the settings serve reads: the database (where the instance's tombstone names its\n" +
			"archive file) and HALLEY_ARCHIVE_DIR.",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return archiveShow(c.Context(), *cfgPath, getenv, c.OutOrStdout(), c.ErrOrStderr(), args[0], raw)
		},
	}
	show.Flags().BoolVar(&raw, "raw", false, "print the line as stored (one line of JSON) instead of indented")
	archive.AddCommand(show)
	return archive
}

// withDatabase loads the configuration, sets up logging, opens the database (waiting for it up to HALLEY_DB_WAIT)
// and migrates it, and calls fn. With gated (serve), HALLEY_ADDR is opened first, behind a gate: /healthz answers
// at once, /readyz says 503 with the step under way until fn opens the gate. An error from then on is logged
// (in the log's format) before it is returned.
func withDatabase(ctx context.Context, cfgPath string, getenv func(string) string, stderr io.Writer, gated bool,
	fn func(ctx context.Context, cfg *config.Config, st *store.Store, lg *slog.Logger, web *webServer) error) (err error) {
	cfg, err := config.Load(cfgPath, getenv)
	if err != nil {
		return err
	}
	logOut := newLogBuffer(stderr, logInterval)
	defer logOut.Close() // after the deferred line below: it is written too
	lg := newLogger(cfg, logOut)
	defer func() {
		if err != nil {
			lg.Error("halley stopped", "err", err)
			err = loggedError{err}
		}
	}()
	lg.Info("paths (absolute; relative settings are taken from the working directory)", cfg.PathAttrs()...)
	if err := cfg.EnsureSecret(); err != nil {
		return err
	}
	var web *webServer
	if gated {
		if web, err = listen(cfg, lg); err != nil {
			return err
		}
		defer web.close()
	}
	web.step("connecting to the database")
	st, err := store.Open(ctx, store.Config{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, MaxOpenConns: cfg.DBMaxOpenConns,
		MaxIdleConns: cfg.DBMaxIdleConns, TimerConns: cfg.DBTimerConns, StepCache: stepCache(cfg.DBStepCache), StmtCache: cfg.DBStmtCache, ConnMaxLifetime: cfg.DBConnMaxLifetime, Logger: lg, Wait: cfg.DBWait})
	if err != nil {
		if ctx.Err() != nil {
			lg.Info("stopped while waiting for the database")
			return nil
		}
		return err
	}
	defer st.Close() //nolint:errcheck // the command is ending: a failed close of the pool has no one to tell
	web.step("migrating the database")
	if _, err := st.Migrate(ctx); err != nil {
		return err
	}
	web.step("starting services")
	return fn(ctx, cfg, st, lg, web)
}

// printVersion prints the version set at build time and what the Go toolchain recorded in the binary.
func printVersion(w io.Writer) {
	fmt.Fprintln(w, "halley", version)
	fmt.Fprintf(w, "  go        %s\n  platform  %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	fmt.Fprintf(w, "  module    %s %s\n", bi.Main.Path, bi.Main.Version)
	names := map[string]string{"vcs.revision": "commit", "vcs.time": "committed", "vcs.modified": "modified", "CGO_ENABLED": "cgo"}
	for _, s := range bi.Settings {
		if n, ok := names[s.Key]; ok {
			fmt.Fprintf(w, "  %-9s %s\n", n, s.Value)
		}
	}
}

// stepCache is store.Config.StepCache for HALLEY_DB_STEP_CACHE, whose 0 turns the cache off.
func stepCache(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
