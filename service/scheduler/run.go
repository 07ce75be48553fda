package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/halley-bpm/halley/service/clock"
)

// backend is the state-moving half of a scheduler; the delivery loop below is shared, so both backends wake,
// batch, lease, ack and recover in exactly the same way.
type backend interface {
	// pop leases up to n timers due at nowMs until deadlineMs and returns them in due order, plus the score of
	// the earliest timer still due (-1 when none). nowMs is the clock rounded down and due scores are rounded
	// up, so "score <= nowMs" means "due time <= now".
	pop(ctx context.Context, nowMs int64, n int, deadlineMs int64) ([]Due, int64, error)
	// ack removes the given timers from the lease set if they are still held under the lease that ended at
	// deadlineMs (a timer re-armed or re-leased meanwhile is left alone).
	ack(ctx context.Context, ids []string, deadlineMs int64) error
	// recoverExpired moves leases whose deadline is <= nowMs back to the due set and returns how many.
	recoverExpired(ctx context.Context, nowMs int64) (int, error)
}

// loop is one Run call.
type loop struct {
	b    backend
	opts Options
	wake *waker
	h    Handler
	log  *slog.Logger
	sem  chan struct{}
	// partial holds a token for each handler running a partial batch (Options.PartialHandlers); nil when they may
	// take every handler.
	partial chan struct{}
	wg      sync.WaitGroup
}

func runLoop(ctx context.Context, b backend, opts Options, wake *waker, closed <-chan struct{}, h Handler) error {
	if h == nil {
		return fmt.Errorf("scheduler: Run needs a handler")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	l := &loop{b: b, opts: opts, wake: wake, h: h, log: opts.Logger, sem: make(chan struct{}, opts.Concurrency)}
	if opts.PartialHandlers < opts.Concurrency {
		l.partial = make(chan struct{}, opts.PartialHandlers)
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.recoverer(ctx)
	}()
	l.popper(ctx)
	// Run returns only after the handlers in flight have finished and acked, so a caller that cancels and
	// then closes its Redis client does not lose acks.
	l.wg.Wait()
	return nil
}

// popper pops batches as long as timers are due and a handler slot is free, then sleeps until the earliest due
// timer, MaxIdle, or a wake-up, whichever comes first.
//
// After a partial batch (fewer than BatchSize timers: the popper took all that was due) it pops again only once
// fewer than PartialHandlers partial batches are being handled: timers falling due one by one then gather while
// the handlers work instead of each starting a transaction of its own, and a timer waits at most for one handler
// to finish. After a full batch, or a pop that left timers due (a backlog), it pops again at once, into any free
// handler.
func (l *loop) popper(ctx context.Context) {
	var timer clock.Timer // made on the first sleep, so a parked loop is visible on a fake clock
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var failures int
	backlog := false // the last pop took a full batch or left timers due (a pop of one shard among several)
	for {
		wakeCh := l.wake.wait()
		select {
		case l.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		token := false // this pop holds a partial-batch token
		if l.partial != nil && !backlog {
			select {
			case l.partial <- struct{}{}:
				token = true
			case <-ctx.Done():
				<-l.sem
				return
			}
		}
		now := l.opts.Clock.Now()
		deadline := now.Add(l.opts.LeaseTimeout).UnixMilli()
		batch, next, err := l.b.pop(ctx, now.UnixMilli(), l.opts.BatchSize, deadline)
		full := err == nil && len(batch) == l.opts.BatchSize
		if token && (full || len(batch) == 0) {
			<-l.partial // a full batch, or none: no partial batch to count
			token = false
		}
		if err != nil {
			<-l.sem
			if ctx.Err() != nil {
				return
			}
			failures++
			backoff := retryBackoff(failures)
			l.log.Error("scheduler: pop failed", "err", err, "retry_in", backoff)
			if !sleepUntil(ctx, l.opts.Clock, &timer, l.opts.Clock.Now().Add(backoff), nil) {
				return
			}
			continue
		}
		failures = 0
		moreDue := next >= 0 && next <= now.UnixMilli()
		backlog = full || moreDue
		if len(batch) > 0 {
			if l.partial != nil && !full && !token {
				// A partial batch popped without waiting (after a full one, or with more due): counted if a token
				// is free, run anyway if not.
				select {
				case l.partial <- struct{}{}:
					token = true
				default:
				}
			}
			l.wg.Add(1)
			go func(token bool) {
				defer l.wg.Done()
				defer func() {
					if token {
						<-l.partial
					}
					<-l.sem
				}()
				l.handle(ctx, batch, deadline)
			}(token)
			if full {
				continue // a full batch: more may be due right now
			}
		} else {
			<-l.sem
		}
		until := now.Add(l.opts.MaxIdle)
		if next >= 0 && time.UnixMilli(next).Before(until) {
			until = time.UnixMilli(next)
		}
		wake := wakeCh
		// Linger only when nothing more is due now: a pop that took less than a batch while timers are still
		// due (next <= now: a pop of one shard among several, a pop cut short) goes round at once, or the linger
		// would hold a backlog to one partial batch per Linger.
		if len(batch) > 0 && l.opts.Linger > 0 && !moreDue && until.Before(now.Add(l.opts.Linger)) {
			until = now.Add(l.opts.Linger) // let the next ones gather into one batch; a wake-up would undo it
			wake = nil
		}
		if !sleepUntil(ctx, l.opts.Clock, &timer, until, wake) {
			return
		}
	}
}

// recoverer puts expired leases back as due, once at start (leases of a crashed process) and then every half
// lease timeout.
func (l *loop) recoverer(ctx context.Context) {
	every := l.opts.LeaseTimeout / 2
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := l.opts.Clock.Now()
		n, err := l.b.recoverExpired(ctx, now.UnixMilli())
		switch {
		case err != nil && ctx.Err() == nil:
			l.log.Error("scheduler: recovering expired leases failed", "err", err)
		case n > 0:
			l.log.Warn("scheduler: re-queued timers whose lease expired", "count", n)
			l.wake.notify()
		}
		if !sleepUntil(ctx, l.opts.Clock, &timer, now.Add(every), nil) {
			return
		}
	}
}

func (l *loop) handle(ctx context.Context, batch []Due, deadline int64) {
	errs := l.call(ctx, batch)
	done := make([]string, 0, len(batch))
	switch {
	case errs == nil:
		for _, d := range batch {
			done = append(done, d.ID)
		}
	case len(errs) != len(batch):
		l.log.Error("scheduler: handler returned the wrong number of results; the batch will be re-delivered",
			"batch", len(batch), "results", len(errs))
	default:
		for i, d := range batch {
			if errs[i] == nil {
				done = append(done, d.ID)
				continue
			}
			l.log.Warn("scheduler: timer handler failed; re-delivered after the lease expires",
				"timer_id", d.ID, "attempt", d.Attempt, "err", errs[i])
		}
	}
	if len(done) == 0 {
		return
	}
	// The ack outlives Run's context: work the handler finished must not be delivered again at shutdown.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
	defer cancel()
	if err := l.b.ack(actx, done, deadline); err != nil {
		l.log.Error("scheduler: ack failed; timers will be re-delivered", "count", len(done), "err", err)
	}
}

// call runs the handler, turning a panic into "ack nothing" so it never crosses the package edge.
func (l *loop) call(ctx context.Context, batch []Due) (errs []error) {
	defer func() {
		if p := recover(); p != nil {
			l.log.Error("scheduler: handler panicked; the batch will be re-delivered", "panic", p, "batch", len(batch))
			errs = make([]error, len(batch))
			for i := range errs {
				errs[i] = fmt.Errorf("scheduler: handler panicked: %v", p)
			}
		}
	}()
	return l.h(ctx, batch)
}

// sleepUntil waits until the clock reaches until, or wake fires; it returns false when ctx is done. The
// deadline is absolute and re-checked after the timer is armed: if the clock jumped past it meanwhile (a fake
// clock advanced by a test, a slow pop), the loop goes round at once instead of sleeping a whole period more.
func sleepUntil(ctx context.Context, c clock.Clock, t *clock.Timer, until time.Time, wake <-chan struct{}) bool {
	if ctx.Err() != nil {
		return false
	}
	d := until.Sub(c.Now())
	if d <= 0 {
		return true
	}
	if *t == nil {
		*t = c.NewTimer(d)
	} else {
		if !(*t).Stop() {
			select {
			case <-(*t).C():
			default:
			}
		}
		(*t).Reset(d)
	}
	if !c.Now().Before(until) {
		return true
	}
	select {
	case <-(*t).C():
		return true
	case <-wake:
		return true
	case <-ctx.Done():
		return false
	}
}

func retryBackoff(failures int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < failures && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}
