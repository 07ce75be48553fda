package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/halley-bpm/halley/service/archive"
	"github.com/halley-bpm/halley/service/store"
)

// SweepFigures is the JSON line of the sweep suite.
type SweepFigures struct {
	Suite string `json:"suite"`
	// Instances is how many finished instances of seeds/004's scenario (1 start + 4 approvals) were made and
	// then archived; DBBytesPerInstance is what each added to the database (InnoDB data + indexes of every
	// table, by information_schema after ANALYZE TABLE), ArchiveBytesPerInstance what each takes in the archive.
	Instances               int     `json:"instances"`
	DBBytesPerInstance      float64 `json:"db_bytes_per_instance"`
	ArchiveBytesPerInstance float64 `json:"archive_bytes_per_instance"`
	// The sweep, run by this process as one replica would (its store, its lease, its archive directory).
	Batch       int     `json:"batch"`
	Duty        float64 `json:"duty"`
	SweepS      float64 `json:"sweep_s"`
	Archived    int     `json:"archived"`
	ArchivedPS  float64 `json:"archived_per_s"`
	SweepErrors int     `json:"sweep_errors"`
	// The step load (--clients) alone for --duration, then while the sweep runs: the sweep must not lower it.
	Clients          int      `json:"clients"`
	StepsPerSAlone   float64  `json:"steps_per_s_alone"` // mean of the runs before and after the sweep
	StepsPerSBefore  float64  `json:"steps_per_s_before"`
	StepsPerSAfter   float64  `json:"steps_per_s_after"`
	StepsPerSDuring  float64  `json:"steps_per_s_during_sweep"`
	StepsRatioDuring *float64 `json:"steps_during_over_alone"`
	Errors           int64    `json:"errors"`
	Machine          *Machine `json:"machine,omitempty"`
}

// runSweep measures the retention sweep: fill the database with finished instances through Halley (of a
// template whose options.retention is 1s, so that only they are due), measure the step load alone, then run a
// sweep in this process with the load running beside it.
func runSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("halley-bench sweep", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf commonFlags
	cf.register(fs)
	mysqlURL := fs.String("mysql", "", "Halley's database, mysql://user:pass@127.0.0.1:3306/db (required: this process sweeps it)")
	n := fs.Int("instances", 20000, "finished instances to make and archive")
	fillClients := fs.Int("fill-clients", 16, "clients making the instances")
	clients := fs.Int("clients", 20, "clients of the step load measured alone and during the sweep")
	duration := fs.Duration("duration", 20*time.Second, "measured time of the step load alone")
	batch := fs.Int("batch", 100, "instances per archive batch (HALLEY_INSTANCE_RETENTION_BATCH)")
	duty := fs.Float64("duty", 0.1, "share of the time the sweep works (HALLEY_INSTANCE_RETENTION_DUTY, default 0.1: after each batch it pauses nine times as long as it took; 1 never pauses)")
	dir := fs.String("archive-dir", "", "archive directory (default: a temporary one, removed afterwards)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *mysqlURL == "" {
		return fmt.Errorf("--mysql is required: the sweep runs in this process on Halley's database")
	}
	if *n < 1 || *n > 5_000_000 || *fillClients < 1 || *fillClients > 500 || *clients < 1 || *clients > 1000 || *batch < 1 || *batch > 1000 {
		return fmt.Errorf("--instances 1..5000000, --fill-clients 1..500, --clients 1..1000, --batch 1..1000")
	}
	if *duration <= 0 || *duration > time.Hour {
		return fmt.Errorf("--duration must be in (0, 1h]")
	}
	if *duty <= 0 || *duty > 1 {
		return fmt.Errorf("--duty must be in (0, 1]")
	}
	if *dir == "" {
		tmp, err := os.MkdirTemp("", "halley-bench-archive-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		*dir = tmp
	}
	m := newMachine()
	db, err := openMySQL(*mysqlURL, 2)
	if err != nil {
		return err
	}
	defer db.Close()
	m.versions(ctx, db, nil)
	c, err := newClient(cf.url, max(*clients, *fillClients))
	if err != nil {
		return err
	}
	defer c.close()
	id := runID()
	figs := SweepFigures{Suite: "sweep", Instances: *n, Batch: *batch, Duty: *duty, Clients: *clients}

	// The instances to archive: seeds/004's flow on a template that keeps its instances one second.
	fill, err := setupStepLoad(ctx, c, cf, id, *fillClients, stderr)
	if err != nil {
		return err
	}
	admin, err := c.login(ctx, cf.adminUser, cf.adminPassword)
	if err != nil {
		return err
	}
	def := stepsDefinition()
	def["options"] = map[string]any{"retention": "1s"}
	fill.key = "bench-sweep-" + id
	if err := c.publishTemplate(ctx, admin, fill.key, def); err != nil {
		return err
	}
	sizeBefore, err := dbBytes(ctx, db)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "sweep: making %d finished instances with %d clients\n", *n, *fillClients)
	t0 := time.Now()
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		for ctx.Err() == nil {
			var done int
			if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM instances WHERE tkey = ? AND status = 'completed'", fill.key).Scan(&done); err == nil && done >= *n {
				return
			}
			sleepCtx(ctx, 200*time.Millisecond)
		}
	}()
	fres := fill.run(ctx, 0, 0, stop)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// The flows still under way when the count was reached finish or stay running; only completed ones are due.
	var made int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM instances WHERE tkey = ? AND status = 'completed'", fill.key).Scan(&made); err != nil {
		return err
	}
	sizeAfter, err := dbBytes(ctx, db)
	if err != nil {
		return err
	}
	figs.Instances = made
	figs.DBBytesPerInstance = float64(sizeAfter-sizeBefore) / float64(made)
	fmt.Fprintf(stderr, "sweep: %d instances in %s (%d errors); the database grew %.1f MB, %.0f bytes per instance\n", made,
		time.Since(t0).Round(time.Second), fres.ops["start"].errors+fres.ops["approve"].errors, float64(sizeAfter-sizeBefore)/1e6, figs.DBBytesPerInstance)
	time.Sleep(1100 * time.Millisecond) // their retention of 1s passes

	load, err := setupStepLoad(ctx, c, cf, id+"l", *clients, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "sweep: step load alone, %d clients for %s\n", *clients, *duration)
	alone := load.run(ctx, 3*time.Second, *duration, nil)
	var sa StepsFigures
	fillSteps(&sa, alone, *duration)
	figs.StepsPerSBefore = sa.StepsPerS

	st, err := store.Open(ctx, store.Config{URL: *mysqlURL, MaxOpenConns: 4, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer st.Close()
	archiveDir, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	sw, err := archive.New(st, archive.Options{Dir: archiveDir, BatchSize: *batch, Duty: *duty, Owner: "halley-bench-" + id,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "sweep: sweeping (batches of %d) with the step load running\n", *batch)
	stopLoad := make(chan struct{})
	during := make(chan loadResult, 1)
	go func() { during <- load.run(ctx, 0, 0, stopLoad) }()
	sleepCtx(ctx, 2*time.Second) // the load at full speed first
	s0 := time.Now()
	var res archive.Result
	for ctx.Err() == nil {
		// Sweep until nothing of the filled template is left (a sweep that lost its lease to Halley's own
		// sweeper stops early; the next one goes on).
		r, err := sw.Sweep(ctx)
		res.Archived += r.Archived
		if err != nil {
			figs.SweepErrors++
			fmt.Fprintf(stderr, "sweep: %v\n", err)
		}
		var left int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM instances WHERE tkey = ? AND status = 'completed'", fill.key).Scan(&left); err != nil {
			return err
		}
		if left == 0 || figs.SweepErrors > 10 {
			break
		}
		if !r.Leader {
			sleepCtx(ctx, time.Second)
		}
	}
	sweepTook := time.Since(s0)
	close(stopLoad)
	dres := <-during
	if ctx.Err() != nil {
		return ctx.Err()
	}
	figs.Archived = res.Archived
	figs.SweepS = sweepTook.Seconds()
	figs.ArchivedPS = perSecond(int64(res.Archived), sweepTook)
	// Steps during the sweep: those that started after the sweep began and finished before it ended.
	var sd StepsFigures
	fillSteps(&sd, dres, dres.measured)
	figs.StepsPerSDuring = sd.StepsPerS
	// The load alone once more: on a shared machine the rate drifts, and the mean of before and after is what the
	// rate during the sweep compares with.
	fmt.Fprintf(stderr, "sweep: step load alone again, %d clients for %s\n", *clients, *duration)
	after := load.run(ctx, 3*time.Second, *duration, nil)
	var sb StepsFigures
	fillSteps(&sb, after, *duration)
	figs.StepsPerSAfter = sb.StepsPerS
	figs.StepsPerSAlone = (figs.StepsPerSBefore + figs.StepsPerSAfter) / 2
	figs.StepsRatioDuring = ratio(figs.StepsPerSDuring, figs.StepsPerSAlone)
	figs.Errors = sa.Errors + sd.Errors + sb.Errors
	files, _ := filepath.Glob(filepath.Join(*dir, "*.jsonl.gz"))
	var archiveBytes int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			archiveBytes += fi.Size()
		}
	}
	if res.Archived > 0 {
		figs.ArchiveBytesPerInstance = float64(archiveBytes) / float64(res.Archived)
	}
	m.finish()
	figs.Machine = &m
	summary := []string{
		fmt.Sprintf("sweep: %d instances of seeds/004's flow; %.0f bytes each in the database, %.0f bytes each in the archive (gzipped JSON lines)",
			figs.Instances, figs.DBBytesPerInstance, figs.ArchiveBytesPerInstance),
		fmt.Sprintf("sweep: archived %d in %.1f s = %.0f instances/s in batches of %d, duty %.2f (%d sweep errors)", figs.Archived, figs.SweepS, figs.ArchivedPS, *batch, *duty, figs.SweepErrors),
		fmt.Sprintf("steps: %d clients: %.1f steps/s alone (%.1f before, %.1f after), %.1f steps/s while sweeping: %s of it", *clients,
			figs.StepsPerSAlone, figs.StepsPerSBefore, figs.StepsPerSAfter, figs.StepsPerSDuring, fmtPtr(figs.StepsRatioDuring)),
		"machine: " + fmt.Sprintf("%d CPUs, %d MB, MySQL %s; ", m.NProc, m.MemTotalMB, m.MariaDB) + m.loadString() + " (shared machine: figures are noisy)",
	}
	return emit(stdout, summary, figs)
}

// dbBytes is the size of the database's tables and indexes, after updating InnoDB's statistics of the tables an
// instance writes to.
func dbBytes(ctx context.Context, db *sql.DB) (int64, error) {
	for _, t := range []string{"instances", "tasks", "history", "bookmarks", "timers", "cc", "plugin_runs", "outbox", "subscription_deliveries"} {
		if _, err := db.ExecContext(ctx, "ANALYZE TABLE "+t); err != nil {
			return 0, fmt.Errorf("analyze %s: %w", t, err)
		}
	}
	var n sql.NullInt64
	err := db.QueryRowContext(ctx, "SELECT SUM(data_length + index_length) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&n)
	return n.Int64, err
}
