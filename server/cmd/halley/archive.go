package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/server/config"
	"github.com/halley-bpm/halley/service/archive"
	"github.com/halley-bpm/halley/service/store"
)

// archiveShow is `halley archive show [--raw] ID`: it prints the archived record of an instance (its tombstone
// in the database names the archive file; the line is read from HALLEY_ARCHIVE_DIR). It needs the database but
// changes nothing: it neither waits for it nor migrates it.
func archiveShow(ctx context.Context, cfgPath string, getenv func(string) string, stdout, stderr io.Writer, id string, raw bool) error {
	cfg, err := config.Load(cfgPath, getenv)
	if err != nil {
		return err
	}
	st, err := store.Open(ctx, store.Config{URL: cfg.DatabaseURL, DataDir: cfg.DataDir, MaxOpenConns: 2, MustExist: true,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer st.Close() //nolint:errcheck // the command is ending: a failed close of the pool has no one to tell
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
	if raw {
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
