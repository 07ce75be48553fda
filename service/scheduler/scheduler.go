// Package scheduler keeps Halley's durable timers (delay nodes, callback and approval timeouts, retry back-off,
// crontab next fires) in a fast index and delivers them when they fall due.
//
// The database is the truth: every timer is also a row, and the engine handles a delivered timer idempotently by
// checking that row in a transaction. This package is the index that says *when*: a Redis sorted set shared by
// any number of replicas (Redis), or an in-process min-heap for the embedded single-process default (Memory).
// Both backends follow one contract, tested by one suite:
//
//   - Schedule adds or moves timers; Cancel removes them; Ensure re-adds timers lost by the index (after a Redis
//     FLUSHALL or a restart of the in-process heap) without duplicating ones that are due or being handled.
//   - Run pops due timers in batches, atomically moving each into a lease set with a deadline, and hands the batch
//     to a Handler. A nil error acks (removes) a timer; an error leaves it leased, and a recoverer puts expired
//     leases back as due with Attempt+1. So each timer is delivered once in normal operation, and at least once
//     across crashes and handler failures.
//   - Run sleeps exactly until the earliest due timer (capped at MaxIdle) and wakes early when a new earliest timer
//     is scheduled, in this process or (Redis) in any other: lateness is milliseconds, not a polling interval.
//
// Due times have millisecond precision: a time is rounded up to the next whole millisecond, so a timer is never
// delivered before the time it was scheduled for. See docs/scheduler.md.
package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
)

// Item is a timer to arm: a timer id (the engine's timer row id) and when it falls due.
type Item struct {
	ID  string
	Due time.Time
}

// Due is a timer handed to a Handler. Attempt is 1 on the first delivery and grows by one each time a lease
// expires without an ack. Due is the scheduled time at millisecond precision, in UTC.
type Due struct {
	ID      string
	Due     time.Time
	Attempt int
}

// Handler handles a batch of due timers. It returns one error per item, in the same order: nil acks the timer
// (it is removed); non-nil leaves it leased, so it is delivered again, with Attempt+1, once its lease expires
// (LeaseTimeout after the pop) — the expiry is the retry back-off. A nil slice acks the whole batch. A slice of
// another length, or a panic, acks nothing. The context is cancelled when Run stops.
type Handler func(ctx context.Context, batch []Due) []error

// Scheduler is the contract both backends implement.
type Scheduler interface {
	// Schedule adds timers, or moves (re-arms) existing ones to a new time — also timers currently leased to a
	// handler: they go back to the due set with the new time and Attempt restarts at 1, and the running
	// handler's ack then no longer touches them. Idempotent.
	Schedule(ctx context.Context, items ...Item) error
	// Cancel removes timers from the due and lease sets; unknown ids are ignored.
	Cancel(ctx context.Context, ids ...string) error
	// Ensure adds the items that are in neither the due set nor the lease set, leaving the others as they are
	// (used to re-arm from database rows after the index lost them), and returns how many it added.
	Ensure(ctx context.Context, items ...Item) (int, error)
	// Run delivers due timers to h until ctx is done or the scheduler is closed, then waits for the handlers
	// in flight and returns nil. It is safe to run in many goroutines and (Redis) many processes at once.
	Run(ctx context.Context, h Handler) error
	// Len returns how many timers are waiting to fall due and how many are leased to handlers.
	Len(ctx context.Context) (due int, leased int, err error)
	// Ping checks that the backend answers.
	Ping(ctx context.Context) error
	// WatchLoss calls rearm whenever the backend notices it lost its timers (Redis: FLUSHALL, a restart without
	// persistence), checking every interval, until ctx is done or the scheduler is closed. The in-process heap
	// loses nothing while its process lives: it only waits.
	WatchLoss(ctx context.Context, interval time.Duration, rearm func(context.Context) error)
	// Close stops every Run of this scheduler; further calls return ErrClosed. It does not close a Redis
	// client handed to NewRedis: the caller owns that.
	Close() error
}

// Options tune a scheduler. The zero value is usable.
type Options struct {
	Clock        clock.Clock   // time source; default clock.Real{}
	BatchSize    int           // timers popped per batch; default 256, at most 4096
	Concurrency  int           // handler goroutines per Run, each taking whole batches; default 8
	LeaseTimeout time.Duration // how long a popped timer stays leased before it is re-delivered; default 30s
	MaxIdle      time.Duration // longest sleep when nothing is due; default 1s
	// Linger is the least time between a pop that found fewer than BatchSize timers due and the next pop (default
	// 0: none). Timers falling due one by one at a high rate are then handled in batches — one transaction for
	// several instead of one each — at the price of up to Linger of lateness, and only while they fall due more
	// often than every Linger.
	Linger time.Duration
	// PartialHandlers is how many handlers may run partial batches (fewer than BatchSize timers) at once (default
	// 2; negative: as many as Concurrency). While that many are running, the next pop waits for one of them to
	// finish, and the timers falling due meanwhile gather into its batch. Timers falling due one by one at a high
	// rate are then fired several per transaction with no added wait when the handlers keep up, and a backlog
	// (full batches) still uses every handler. See docs/scheduler.md "The popper".
	PartialHandlers int
	Logger          *slog.Logger // default slog.Default()
	// Shards is how many shards the Redis scheduler splits its timers over (HALLEY_TIMER_SHARDS): default 1, at most
	// MaxShards. The in-process heap has one.
	Shards int
}

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("scheduler: closed")

const (
	defaultBatchSize    = 256
	maxBatchSize        = 4096
	defaultConcurrency  = 8
	defaultPartial      = 2
	defaultLeaseTimeout = 30 * time.Second
	defaultMaxIdle      = time.Second
	// chunkSize bounds how many timers one Lua script call touches, so that a
	// bulk Schedule/Ensure of a million rows does not stall Redis for other clients.
	chunkSize = 1000
	// ackTimeout bounds the ack after a handler returns; the ack outlives Run's context so that work done
	// just before a shutdown is not delivered again.
	ackTimeout = 5 * time.Second
)

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.BatchSize <= 0 {
		o.BatchSize = defaultBatchSize
	}
	if o.BatchSize > maxBatchSize {
		o.BatchSize = maxBatchSize
	}
	if o.Concurrency <= 0 {
		o.Concurrency = defaultConcurrency
	}
	if o.PartialHandlers == 0 {
		o.PartialHandlers = defaultPartial
	}
	if o.PartialHandlers < 0 || o.PartialHandlers > o.Concurrency {
		o.PartialHandlers = o.Concurrency
	}
	if o.LeaseTimeout <= 0 {
		o.LeaseTimeout = defaultLeaseTimeout
	}
	if o.MaxIdle <= 0 {
		o.MaxIdle = defaultMaxIdle
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Shards <= 0 {
		o.Shards = 1
	}
	return o
}

// toMs converts a due time to the integer score both backends order by, rounding up so that a timer is never
// delivered before its time.
func toMs(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

func fromMs(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func validateItems(items []Item) error {
	for _, it := range items {
		if it.ID == "" {
			return model.Errorf(model.EINVALID, "scheduler: timer id is empty")
		}
	}
	return nil
}

func validateIDs(ids []string) error {
	for _, id := range ids {
		if id == "" {
			return model.Errorf(model.EINVALID, "scheduler: timer id is empty")
		}
	}
	return nil
}

// waker is a broadcast: every goroutine holding the channel from wait() is released by the next notify().
// Run takes the channel before it pops, so a Schedule that lands during the pop is never missed.
type waker struct {
	mu sync.Mutex
	ch chan struct{}
}

func (w *waker) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

func (w *waker) notify() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// closer is the Close half shared by both backends.
type closer struct {
	once sync.Once
	done chan struct{}
}

func newCloser() closer { return closer{done: make(chan struct{})} }

func (c *closer) close() { c.once.Do(func() { close(c.done) }) }

func (c *closer) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}
