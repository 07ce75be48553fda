package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/redis/go-redis/v9"
)

// Housekeeper runs the service's own periodic jobs (purging old bookmark-queue items and plugin logs,
// re-arming lost timers) on gocron. With Redis, each job takes a Locker first, so among any number of replicas
// only one runs each occurrence; without Redis (the embedded default) jobs simply run in this process.
type Housekeeper struct {
	s      gocron.Scheduler
	rdb    redis.UniversalClient
	prefix string
	log    *slog.Logger
}

// Job is a housekeeping job: Run every Every under Name (unique: it is also the lock key). Run gets a context
// cancelled when the housekeeper stops; its error is logged. A run that is still going when the next one is due
// makes that next one wait rather than overlap.
type Job struct {
	Name  string
	Every time.Duration
	Run   func(ctx context.Context) error
}

// HousekeeperOptions tune the housekeeper; the zero value is the default. Its jobs run on gocron's own clock.
type HousekeeperOptions struct {
	Logger *slog.Logger // default slog.Default(); gocron logs through it too
}

// NewHousekeeper returns a stopped Housekeeper of the jobs. rdb may be nil (single process: no locking); lock
// keys are prefix+"lock:"+job name. A job without a name, a positive interval or a function is an error.
func NewHousekeeper(rdb redis.UniversalClient, prefix string, opts HousekeeperOptions, jobs ...Job) (*Housekeeper, error) {
	if rdb != nil && prefix == "" {
		return nil, fmt.Errorf("scheduler: housekeeper: the job locks in Redis need a key prefix (HALLEY_REDIS_PREFIX)")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	// slog.Logger already has gocron.Logger's method set.
	s, err := gocron.NewScheduler(gocron.WithLogger(logger), gocron.WithStopTimeout(30*time.Second))
	if err != nil {
		return nil, fmt.Errorf("scheduler: housekeeper: %w", err)
	}
	h := &Housekeeper{s: s, rdb: rdb, prefix: prefix, log: logger}
	for _, j := range jobs {
		if err := h.add(j.Name, j.Every, j.Run); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func (h *Housekeeper) add(name string, every time.Duration, fn func(ctx context.Context) error) error {
	if name == "" || every <= 0 || fn == nil {
		return fmt.Errorf("scheduler: housekeeping job needs a name, a positive interval and a function")
	}
	opts := []gocron.JobOption{
		gocron.WithName(name),
		gocron.WithSingletonMode(gocron.LimitModeReschedule),
	}
	if h.rdb != nil {
		// A locker per job rather than one WithDistributedLocker for the scheduler: the lock is held for at
		// least half the job's interval (so replicas firing a few ms apart do not both run it), and its TTL
		// covers at least one interval (so a long purge is not run twice at once).
		opts = append(opts, gocron.WithDistributedJobLocker(NewLocker(h.rdb, h.prefix, max(every, time.Minute), every/2)))
	}
	task := func(ctx context.Context) error {
		start := time.Now()
		err := fn(ctx)
		if err != nil {
			h.log.Error("housekeeping job failed", "job", name, "err", err, "took", time.Since(start))
			return err
		}
		h.log.Debug("housekeeping job done", "job", name, "took", time.Since(start))
		return nil
	}
	if _, err := h.s.NewJob(gocron.DurationJob(every), gocron.NewTask(task), opts...); err != nil {
		return fmt.Errorf("scheduler: housekeeping job %q: %w", name, err)
	}
	return nil
}

// Run runs the jobs until ctx is done, then stops them, cancelling their contexts and waiting (up to 30 s) for
// running ones.
func (h *Housekeeper) Run(ctx context.Context) error {
	h.s.Start()
	<-ctx.Done()
	if err := h.s.Shutdown(); err != nil {
		return fmt.Errorf("scheduler: housekeeper shutdown: %w", err)
	}
	return nil
}
