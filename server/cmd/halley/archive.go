package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/server/config"
	"github.com/halley-bpm/halley/service/archive"
	"github.com/halley-bpm/halley/service/store"
)

// archiveShow is `halley archive show [--config file] [--raw] ID`: it prints the archived record of an instance
// (its tombstone in the database names the archive file; the line is read from HALLEY_ARCHIVE_DIR).
func archiveShow(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("halley archive show", flag.ContinueOnError)
	fs.SetOutput(stdout)
	cfgPath := fs.String("config", "", "YAML configuration file (HALLEY_* environment variables override it)")
	raw := fs.Bool("raw", false, "print the line as stored (one line of JSON) instead of indented")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: halley archive show [--config file.yaml] [--raw] INSTANCE_ID\n\n"+
			"Prints an archived instance (with its tasks, history, plugin runs and waits) from the archive directory.\n"+
			"It reads the same settings as halley serve: the database (for the instance's tombstone) and HALLEY_ARCHIVE_DIR.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("archive show needs exactly one instance id")
	}
	id := fs.Arg(0)
	cfg, err := config.Load(*cfgPath, os.Getenv)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, store.Config{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, MaxOpenConns: 2,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer st.Close()
	a, err := st.GetArchived(ctx, "", id)
	if model.IsKind(err, model.ENOTFOUND) {
		if _, _, gerr := st.GetInstance(ctx, model.DefaultTenant, id); gerr == nil {
			return fmt.Errorf("instance %s is not archived: it is still in the database (GET /api/v1/instances/%s)", id, id)
		}
		return fmt.Errorf("instance %s was not archived (no tombstone in the database)", id)
	}
	if err != nil {
		return err
	}
	line, err := archive.Find(cfg.ArchiveDir, a.File, id)
	if err != nil {
		return fmt.Errorf("instance %s was archived on %s into %s, but: %w", id, a.ArchivedAt.Format("2006-01-02"), a.File, err)
	}
	if *raw {
		_, err = fmt.Fprintf(stdout, "%s\n", line)
		return err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, line, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err = stdout.Write(b.Bytes())
	return err
}
