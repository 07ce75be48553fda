package archive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
)

// LeaseName is the name of the retention sweep's leader lease.
const LeaseName = "retention-sweep"

// Options configure a Sweeper. Zero values take the defaults noted.
type Options struct {
	// Dir is the archive directory (HALLEY_ARCHIVE_DIR): storage every replica reaches.
	Dir string
	// Retention is how long finished instances are kept (HALLEY_INSTANCE_RETENTION); 0 keeps them forever,
	// except those of template versions whose definition sets options.retention.
	Retention time.Duration
	// Every is the time between sweeps (HALLEY_INSTANCE_RETENTION_SWEEP); default 1h.
	Every time.Duration
	// BatchSize bounds the instances of one batch: one gzip member, one short delete transaction. Default 100.
	BatchSize int
	// Lease is how long the leader lease lasts; it is renewed before every batch and before every write. A
	// replica that dies mid-sweep keeps others from sweeping until it runs out. Default: twice Every, at least
	// 10s and at most 2m.
	Lease time.Duration
	// Duty bounds the share of wall time a sweep spends working: after each batch it pauses so that batches
	// take at most this fraction of the time, leaving the database to the engine (a backlog of years is worked
	// off over days, not in a burst; a day's finished instances take minutes). Default 0.1; 1 never pauses.
	Duty float64
	// Owner names this process in the lease; default host-pid-random.
	Owner  string
	Clock  clock.Clock  // default clock.Real{}
	Logger *slog.Logger // default slog.Default()
	// AfterStep, when set, is called after each step of a batch: "begun" (marker stored), "written" (lines
	// synced to the file), "finished" (tombstones written, rows deleted). An error stops the sweep right there,
	// as a crash would: fault tests use it.
	AfterStep func(step string, b *model.ArchiveBatch) error
	// OnSweep, when set, receives the result of every sweep (a test signal and a metrics hook).
	OnSweep func(Result, error)
}

// Result says what one sweep did.
type Result struct {
	Leader    bool          // false: another replica holds the lease; nothing was done
	Archived  int           // instances archived and deleted
	Batches   int           // batches finished
	Recovered int           // instances of a batch a crashed sweep left, finished now
	Took      time.Duration // wall time of the sweep
}

// Sweeper is the retention sweep: a background worker (Run) that, on whichever replica holds its lease, archives
// finished instances older than their retention and deletes them, in batches.
//
// Per batch: (1) store a marker (the batch's id, file, the file's size, the instance ids) — the write-ahead
// record; (2) read the instances with everything that refers to them, cut the file back to the recorded size and
// append the batch's lines as one gzip member, fsync; (3) in one transaction: check the lease and that no
// instance changed, write a tombstone per instance, delete their rows and the marker. A crash after (1) or (2)
// leaves the marker: the next sweep redoes that batch from the database (whose rows are all still there, since
// (3) is atomic), cutting off whatever the crashed write left, so no instance is lost and none is written twice.
type Sweeper struct {
	st   model.ArchiveStore
	opts Options
	log  *slog.Logger
	// retention caches options.retention per template version (versions never change once published).
	retention map[model.RetentionGroup]*time.Duration
}

// New returns a sweeper over st writing into opts.Dir (required, absolute: every replica must name the same
// storage, whatever its working directory); call Run.
func New(st model.ArchiveStore, opts Options) (*Sweeper, error) {
	switch {
	case st == nil:
		return nil, errors.New("archive: the sweeper needs a store")
	case opts.Dir == "" || !filepath.IsAbs(opts.Dir):
		return nil, fmt.Errorf("archive: the archive directory must be an absolute path (HALLEY_ARCHIVE_DIR), got %q", opts.Dir)
	case opts.Retention < 0:
		return nil, fmt.Errorf("archive: retention must not be negative (0 keeps instances forever), got %v", opts.Retention)
	case opts.Duty < 0 || opts.Duty > 1:
		return nil, fmt.Errorf("archive: duty must be from 0 (the default) to 1, got %v", opts.Duty)
	}
	if opts.Every <= 0 {
		opts.Every = time.Hour
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 100
	}
	if opts.Lease <= 0 {
		opts.Lease = min(max(2*opts.Every, 10*time.Second), 2*time.Minute)
	}
	if opts.Duty == 0 {
		opts.Duty = 0.1
	}
	if opts.Owner == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		opts.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Sweeper{st: st, opts: opts, log: opts.Logger.With("component", "retention_sweep"), retention: map[model.RetentionGroup]*time.Duration{}}, nil
}

// Run sweeps at once and then every Options.Every until ctx is done. A failed sweep is logged and tried again at
// the next one.
func (s *Sweeper) Run(ctx context.Context) error {
	for {
		res, err := s.Sweep(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Error("retention sweep failed; the next sweep goes on from where it stopped", "err", err, "archived", res.Archived)
		case res.Archived > 0 || res.Recovered > 0:
			rate := float64(res.Archived) / max(res.Took.Seconds(), 1e-9)
			s.log.Info("retention sweep archived instances", "archived", res.Archived, "batches", res.Batches,
				"recovered", res.Recovered, "took", res.Took.Round(time.Millisecond), "per_second", int(rate), "dir", s.opts.Dir)
		}
		t := time.NewTimer(s.opts.Every)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// errStop ends a sweep early without an error of its own (the lease went elsewhere).
var errStop = errors.New("archive: stop")

// Sweep runs one sweep if this replica gets the lease (Result.Leader says whether it did).
func (s *Sweeper) Sweep(ctx context.Context) (res Result, err error) {
	start := time.Now()
	defer func() {
		res.Took = time.Since(start)
		if errors.Is(err, errStop) {
			err = nil
		}
		if s.opts.OnSweep != nil {
			s.opts.OnSweep(res, err)
		}
	}()
	lease, ok, err := s.renew(ctx)
	if err != nil || !ok {
		return res, err
	}
	res.Leader = true
	defer func() {
		// Let another replica sweep next time without waiting for the lease to run out. Not after a failed step:
		// the lease then also keeps others off a batch this process may still be writing.
		if err == nil {
			if rerr := s.st.ReleaseLease(context.WithoutCancel(ctx), lease); rerr != nil {
				s.log.Warn("unable to release the retention sweep lease", "err", rerr)
			}
		}
	}()

	if b, err := s.st.PendingArchiveBatch(ctx); err != nil {
		return res, err
	} else if b != nil {
		s.log.Warn("finishing an archive batch a previous sweep left (it stopped mid-batch)", "batch", b.ID, "file", b.File,
			"offset", b.Offset, "instances", len(b.InstanceIDs))
		n, err := s.complete(ctx, lease, b)
		if err != nil {
			return res, err
		}
		res.Recovered += n
		res.Archived += n
		res.Batches++
	}

	groups, err := s.st.RetentionGroups(ctx)
	if err != nil {
		return res, err
	}
	cache := make(map[model.RetentionGroup]*time.Duration, len(groups))
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		l, ok, rerr := s.renew(ctx)
		if rerr != nil {
			return rerr
		}
		if !ok {
			s.log.Warn("the retention sweep lease went to another replica; stopping this sweep")
			return errStop
		}
		lease = l
		began := time.Now()
		n, err := s.archive(ctx, lease, batch)
		res.Archived += n
		if err == nil {
			res.Batches++
		}
		batch = batch[:0]
		if err == nil && s.opts.Duty < 1 {
			pause(ctx, time.Duration(float64(time.Since(began))*(1-s.opts.Duty)/s.opts.Duty))
		}
		return err
	}
	for _, g := range groups {
		keep, err := s.retentionOf(ctx, g, cache)
		if err != nil {
			return res, err
		}
		if keep <= 0 {
			continue
		}
		cutoff := s.opts.Clock.Now().Add(-keep)
		var after model.DueInstance
		for {
			want := s.opts.BatchSize - len(batch)
			due, err := s.st.DueInstances(ctx, g, cutoff, after, want)
			if err != nil {
				return res, err
			}
			for _, d := range due {
				batch = append(batch, d.ID)
			}
			if len(due) > 0 {
				after = due[len(due)-1]
			}
			if len(batch) >= s.opts.BatchSize {
				if err := flush(); err != nil {
					return res, err
				}
			}
			if len(due) < want || ctx.Err() != nil {
				break
			}
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	s.retention = cache
	return res, flush()
}

// pause waits d (real time: it paces work, it is not a timer of the domain) or until ctx is done.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (s *Sweeper) renew(ctx context.Context) (model.Lease, bool, error) {
	now := s.opts.Clock.Now()
	return s.st.AcquireLease(ctx, LeaseName, s.opts.Owner, now, now.Add(s.opts.Lease))
}

// retentionOf returns how long the group's finished instances are kept: its version's options.retention, else
// the deployment's. 0 = forever.
func (s *Sweeper) retentionOf(ctx context.Context, g model.RetentionGroup, cache map[model.RetentionGroup]*time.Duration) (time.Duration, error) {
	d, ok := s.retention[g]
	if !ok {
		var err error
		d, err = s.st.VersionRetention(ctx, g.TenantID, g.Template, g.Version)
		if model.IsKind(err, model.ENOTFOUND) {
			d, err = nil, nil // instances of a version that is gone: the deployment's retention
		}
		if err != nil {
			return 0, err
		}
	}
	cache[g] = d
	if d != nil {
		return *d, nil
	}
	return s.opts.Retention, nil
}

// archive writes a new batch of ids and deletes it; it returns how many instances it archived.
func (s *Sweeper) archive(ctx context.Context, lease model.Lease, ids []string) (int, error) {
	now := s.opts.Clock.Now().UTC()
	name := FileName(now)
	off, err := size(s.opts.Dir, name)
	if err != nil {
		return 0, err
	}
	b := &model.ArchiveBatch{ID: uuid.Must(uuid.NewV7()).String(), File: name, Offset: off, InstanceIDs: slices.Clone(ids), CreatedAt: now}
	if err := s.st.BeginArchiveBatch(ctx, lease, b, now); err != nil {
		return 0, err
	}
	if err := s.step("begun", b); err != nil {
		return 0, err
	}
	return s.complete(ctx, lease, b)
}

// complete writes the lines of batch b at its offset and deletes its instances: for a new batch, and for one a
// crashed sweep left. It returns how many instances it archived.
func (s *Sweeper) complete(ctx context.Context, lease model.Lease, b *model.ArchiveBatch) (int, error) {
	for attempt := 1; ; attempt++ {
		recs, err := s.st.LoadArchiveRecords(ctx, b.InstanceIDs)
		if err != nil {
			return 0, err
		}
		now := s.opts.Clock.Now().UTC()
		for _, r := range recs {
			r.ArchivedAt, r.BatchID = now, b.ID
		}
		lines, err := encode(recs)
		if err != nil {
			return 0, err
		}
		// The last check before touching the file: a sweep whose lease ran out must not write into a file that
		// the new holder may be writing.
		if _, ok, err := s.renew(ctx); err != nil {
			return 0, err
		} else if !ok {
			return 0, errStop
		}
		if _, err := appendMember(s.opts.Dir, b.File, b.Offset, lines); err != nil {
			return 0, err
		}
		if err := s.step("written", b); err != nil {
			return 0, err
		}
		changed, err := s.st.FinishArchiveBatch(ctx, lease, b, recs, now)
		if err != nil {
			return 0, err
		}
		if len(changed) == 0 {
			return len(recs), s.step("finished", b)
		}
		// Some instances changed after they were read (an admin revived a failed one): leave them out and
		// write the batch again, over the lines just written.
		if attempt == 5 {
			return 0, fmt.Errorf("archive: batch %s: instances keep changing while they are archived: %v", b.ID, changed)
		}
		s.log.Info("instances changed while being archived; leaving them for a later sweep", "batch", b.ID, "instances", changed)
		b.InstanceIDs = slices.DeleteFunc(b.InstanceIDs, func(id string) bool { return slices.Contains(changed, id) })
		if err := s.st.BeginArchiveBatch(ctx, lease, b, now); err != nil {
			return 0, err
		}
	}
}

func (s *Sweeper) step(name string, b *model.ArchiveBatch) error {
	if s.opts.AfterStep == nil {
		return nil
	}
	return s.opts.AfterStep(name, b)
}
