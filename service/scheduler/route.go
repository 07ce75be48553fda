package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
)

// TimerHandler fires due timers of the kinds it was given in Handlers: pending rows, each id once. It returns
// one error per timer, in order; nil acks the timer, an error has it delivered again after its lease expires.
type TimerHandler interface {
	FireTimers(ctx context.Context, timers []*model.Timer) []error
}

// Handlers says who fires the timers of each kind; the composition root fills it (the engine for the kinds of
// instances, the trigger service for crontab starts). Kinds that share a handler reach it in one call per batch,
// so the engine still fires a batch's timers of every kind of its own together.
type Handlers map[string]TimerHandler

// TimerRows reads the timer rows of a delivered batch.
type TimerRows interface {
	// GetTimers returns the timers with these ids (missing ids are left out).
	GetTimers(ctx context.Context, ids []string) ([]*model.Timer, error)
}

// Route returns the Handler of Run that hands due timers to the handler of their kind. The rows of a batch are
// read in one query. A timer whose row is gone, fired or cancelled is acknowledged without effect, and so is a
// second copy of one id in a batch: a re-delivered timer fires once. A timer of a kind nobody handles fails (it is
// retried, and logged, until a build that knows it runs).
func Route(rows TimerRows, hs Handlers) (Handler, error) {
	if rows == nil || len(hs) == 0 {
		return nil, fmt.Errorf("scheduler: Route needs the timer rows and at least one handler")
	}
	for kind, h := range hs {
		if h == nil {
			return nil, fmt.Errorf("scheduler: the handler of timer kind %q is nil", kind)
		}
		// Timers are grouped by handler with ==, which panics on a func or a struct holding one: use a pointer.
		if !reflect.TypeOf(h).Comparable() {
			return nil, fmt.Errorf("scheduler: the handler of timer kind %q (%T) is not comparable; use a pointer", kind, h)
		}
	}
	return func(ctx context.Context, batch []Due) []error {
		errs := make([]error, len(batch))
		ids := make([]string, len(batch))
		for i, d := range batch {
			ids[i] = d.ID
		}
		found, err := rows.GetTimers(ctx, ids)
		if err != nil {
			for i := range errs {
				errs[i] = err
			}
			return errs
		}
		byID := make(map[string]*model.Timer, len(found))
		for _, t := range found {
			byID[t.ID] = t
		}
		// One group per handler, in the order the batch (due order) first reaches it.
		type group struct {
			h      TimerHandler
			pos    []int
			timers []*model.Timer
		}
		var groups []*group
		seen := make(map[string]bool, len(batch))
		for i, d := range batch {
			t := byID[d.ID]
			if t == nil || t.Status != model.TimerPending || seen[d.ID] {
				continue // a second copy of one id in a batch is acknowledged with the first
			}
			seen[d.ID] = true
			h := hs[t.Kind]
			if h == nil {
				errs[i] = fmt.Errorf("scheduler: no handler for timer %s of kind %q", t.ID, t.Kind)
				continue
			}
			var g *group
			for _, x := range groups {
				if x.h == h {
					g = x
					break
				}
			}
			if g == nil {
				// Most batches reach one handler: size its slices for the whole batch at once.
				g = &group{h: h, pos: make([]int, 0, len(batch)-i), timers: make([]*model.Timer, 0, len(batch)-i)}
				groups = append(groups, g)
			}
			g.pos = append(g.pos, i)
			g.timers = append(g.timers, t)
		}
		for _, g := range groups {
			res := g.h.FireTimers(ctx, g.timers)
			if len(res) != len(g.timers) {
				err := fmt.Errorf("scheduler: timer handler returned %d results for %d timers", len(res), len(g.timers))
				for _, p := range g.pos {
					errs[p] = err
				}
				continue
			}
			for j, p := range g.pos {
				errs[p] = res[j]
			}
		}
		return errs
	}, nil
}

// PendingTimerRows pages through the pending timer rows (the database is the truth the index is rebuilt from).
type PendingTimerRows interface {
	// PendingTimers pages through pending timers by id.
	PendingTimers(ctx context.Context, afterID string, limit int) ([]*model.Timer, error)
	// PendingTimersCreated pages through the pending timers created in [from, to) by (created_at, id), after the
	// row (afterCreated, afterID); a zero time and "" start at from.
	PendingTimersCreated(ctx context.Context, from, to, afterCreated time.Time, afterID string, limit int) ([]*model.Timer, error)
}

// rearmPage is how many rows a re-arm reads at a time.
const rearmPage = 2000

// Rearm makes sure every pending timer row is in the scheduler (after a start, or when Redis lost its data).
// Timers the scheduler holds already, or has leased to a handler, are left alone. Rows armed less than grace ago
// are skipped: their timer.arm outbox row may not have reached the scheduler yet, and re-adding them would be a
// false "missing" (the periodic job passes a minute; at start-up, 0 re-arms everything). It returns how many
// timers it added.
func Rearm(ctx context.Context, rows PendingTimerRows, s Scheduler, grace time.Duration) (int, error) {
	return rearmAll(ctx, rows, s, grace, nil)
}

// RearmPaced is Rearm for a pass nothing waits for (the hourly rearm-all-timers job): after each page it waits
// until the pages so far took at most duty of the time since the pass began, so that a pass over a million pending
// timers — ~10 s of Redis scripts, database reads and row decoding — runs beside the timers that fall due instead of
// ahead of them (docs/benchmarks.md "The re-arm pass"). duty is in (0, 1]; 1 does not wait.
func RearmPaced(ctx context.Context, rows PendingTimerRows, s Scheduler, grace time.Duration, duty float64, clk clock.Clock) (int, error) {
	pacer, err := clock.NewPacer(clk, duty)
	if err != nil {
		return 0, fmt.Errorf("scheduler: re-arm: %w", err)
	}
	return rearmAll(ctx, rows, s, grace, func() error { return pacer.Wait(ctx) })
}

// rearmAll pages through every pending row; pace, when set, is called after each page.
func rearmAll(ctx context.Context, rows PendingTimerRows, s Scheduler, grace time.Duration, pace func() error) (int, error) {
	cutoff := time.Now().Add(-grace) // the store stamps created_at with the wall clock
	added, after := 0, ""
	for {
		page, err := rows.PendingTimers(ctx, after, rearmPage)
		if err != nil || len(page) == 0 {
			return added, err
		}
		items := make([]Item, 0, len(page))
		for _, t := range page {
			if grace > 0 && t.CreatedAt.After(cutoff) {
				continue
			}
			items = append(items, Item{ID: t.ID, Due: t.DueAt})
		}
		n, err := ensure(ctx, s, items)
		added += n
		if err != nil {
			return added, err
		}
		after = page[len(page)-1].ID
		if pace != nil {
			if err := pace(); err != nil {
				return added, err
			}
		}
	}
}

// RearmCreated makes sure every pending timer row armed (or re-armed) in [from, to) is in the scheduler, and returns
// how many it added. It reads the rows of that window only, through the index on created_at: the periodic re-arm
// (the rearm-timers housekeeping job) checks what was armed since its last pass with it, at a cost that follows
// the rate timers are armed at, not the number pending — a pass over a million pending timers read every row and
// checked each in Redis, seconds of both, every five minutes (docs/benchmarks.md). What can go missing is what was
// armed lately: a failover of Redis loses its last writes, not old ones; a Redis that lost everything is seen by
// the sentinel (WatchLoss) and re-armed whole, and Rearm checks every row once an hour.
func RearmCreated(ctx context.Context, rows PendingTimerRows, s Scheduler, from, to time.Time) (int, error) {
	added, afterAt, afterID := 0, time.Time{}, ""
	for {
		page, err := rows.PendingTimersCreated(ctx, from, to, afterAt, afterID, rearmPage)
		if err != nil || len(page) == 0 {
			return added, err
		}
		items := make([]Item, len(page))
		for i, t := range page {
			items[i] = Item{ID: t.ID, Due: t.DueAt}
		}
		n, err := ensure(ctx, s, items)
		added += n
		if err != nil {
			return added, err
		}
		last := page[len(page)-1]
		afterAt, afterID = last.CreatedAt, last.ID
	}
}

func ensure(ctx context.Context, s Scheduler, items []Item) (int, error) {
	if len(items) == 0 {
		return 0, nil
	}
	return s.Ensure(ctx, items...)
}

// Recover is the timer-recovery worker: it re-arms every pending timer row when it starts (the in-process heap
// starts empty; Redis may have lost timers while no Halley ran), and again each time the scheduler notices that
// it lost its timers (WatchLoss, every interval), until ctx is done. A failed re-arm at start is logged: the
// periodic re-arm job of the housekeeper retries it.
func Recover(ctx context.Context, rows PendingTimerRows, s Scheduler, interval time.Duration, log *slog.Logger) error {
	if n, err := Rearm(ctx, rows, s, 0); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		log.Error("unable to re-arm timers at start; the housekeeping job will retry", "err", err)
	} else if n > 0 {
		log.Info("armed pending timers from the database", "count", n)
	}
	s.WatchLoss(ctx, interval, func(ctx context.Context) error {
		n, err := Rearm(ctx, rows, s, 0)
		if n > 0 {
			log.Warn("re-armed timers after the scheduler lost them", "count", n)
		}
		return err
	})
	return nil
}
