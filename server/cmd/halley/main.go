// Command halley is the Halley approval/BPM server. `halley serve` (also plain `halley`) runs it; `halley migrate`
// applies the database migrations and exits; `halley templates load` loads the ready-made templates into a
// running Halley; `halley version` prints the version and build information. `halley <command> --help` says more.
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

	"github.com/spf13/cobra"

	"github.com/halley-bpm/halley/server/config"
	"github.com/halley-bpm/halley/service/store"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "halley:", err)
		os.Exit(1)
	}
}

// run runs the command line args: help and usage go to stdout, logs to stderr. A nil error is exit status 0.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := newCommand(getenv, stdout, stderr)
	cmd.SetArgs(args)
	return cmd.ExecuteContext(ctx)
}

// newCommand builds the command tree. --config is accepted before or after the command name.
func newCommand(getenv func(string) string, stdout, stderr io.Writer) *cobra.Command {
	var cfgPath string
	// server loads the configuration, opens and migrates the database, and hands them to fn.
	server := func(fn func(ctx context.Context, cfg *config.Config, st *store.Store, lg *slog.Logger) error) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, _ []string) error {
			return withDatabase(c.Context(), cfgPath, getenv, stderr, fn)
		}
	}
	root := &cobra.Command{
		Use:   "halley",
		Short: "Halley, an approval and BPM engine in one binary",
		Long: "Halley is an approval and BPM engine in one binary. Without a command it serves (halley serve).\n\n" +
			"Settings come from HALLEY_* environment variables and an optional YAML file given with --config;\n" +
			"the environment wins. See docs/configuration.md.",
		Args:          cobra.NoArgs,
		RunE:          server(serve),
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
			"webhook sender, plugin executor, timer loop, timer recovery, housekeeping). It migrates the database\n" +
			"first. SIGINT or SIGTERM stop it gracefully within HALLEY_SHUTDOWN_TIMEOUT.",
		Args: cobra.NoArgs,
		RunE: server(serve),
	}, &cobra.Command{
		Use:   "migrate",
		Short: "Apply the database migrations and exit",
		Args:  cobra.NoArgs,
		RunE: server(func(_ context.Context, _ *config.Config, st *store.Store, lg *slog.Logger) error {
			v, _ := st.SchemaVersion(context.Background())
			lg.Info("database schema is current", "version", v, "dialect", st.Dialect())
			return nil
		}),
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
	root.AddCommand(templates)
	return root
}

// withDatabase loads the configuration, sets up logging, opens and migrates the database, and calls fn.
func withDatabase(ctx context.Context, cfgPath string, getenv func(string) string, stderr io.Writer,
	fn func(ctx context.Context, cfg *config.Config, st *store.Store, lg *slog.Logger) error) error {
	cfg, err := config.Load(cfgPath, getenv)
	if err != nil {
		return err
	}
	lg := newLogger(cfg, stderr)
	slog.SetDefault(lg)
	lg.Info("paths (absolute; relative settings are taken from the working directory)", cfg.PathAttrs()...)
	if err := cfg.EnsureSecret(); err != nil {
		return err
	}
	st, err := store.Open(ctx, store.Config{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, MaxOpenConns: cfg.DBMaxOpenConns,
		MaxIdleConns: cfg.DBMaxIdleConns, ConnMaxLifetime: cfg.DBConnMaxLifetime, Logger: lg})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		return err
	}
	return fn(ctx, cfg, st, lg)
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
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
