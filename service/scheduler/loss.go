package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/halley-bpm/halley/service/clock"
)

// DefaultLossCheckInterval is how often WatchLoss looks for the sentinel key by default.
const DefaultLossCheckInterval = 5 * time.Second

// AliveKey is the sentinel key WatchLoss keeps in Redis. It carries the same hash tag as the timer keys, so it
// lives in their Redis Cluster slot and disappears with them.
func (r *Redis) AliveKey() string { return r.aliveKey }

// WatchLoss notices that Redis lost the scheduler's keys — a FLUSHALL, a restart without persistence, a failover
// to an empty replica — and calls rearm at once, instead of leaving the timers unarmed until a periodic job.
//
// Every interval it sets the sentinel key if it is missing (SET NX). Finding it missing means Redis lost its data
// since the last check (or this is the first process on an empty Redis), so rearm is called; if rearm fails the
// sentinel is deleted again so that the next check retries. The sentinel is set before re-arming: a loss that
// happens during the re-arm removes it again and is caught by the next check. The first check runs at once.
// WatchLoss returns when ctx is done or the scheduler is closed.
func (r *Redis) WatchLoss(ctx context.Context, interval time.Duration, rearm func(context.Context) error) {
	if interval <= 0 {
		interval = DefaultLossCheckInterval
	}
	c := r.opts.Clock
	var t clock.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		next := c.Now().Add(interval)
		if lost, err := r.checkAlive(ctx); err != nil {
			if ctx.Err() == nil && !r.closer.isClosed() {
				r.opts.Logger.Warn("scheduler: checking the redis sentinel failed; retrying", "err", err, "retry_in", interval)
			}
		} else if lost {
			r.opts.Logger.Warn("scheduler: the redis sentinel is missing (redis lost its data, or is new); re-arming pending timers", "key", r.aliveKey)
			if err := rearm(ctx); err != nil {
				r.opts.Logger.Error("scheduler: re-arming after a redis loss failed; retrying", "err", err, "retry_in", interval)
				// Without the sentinel the next check sees the loss again.
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
				r.rdb.Del(dctx, r.aliveKey)
				cancel()
			}
		}
		if !r.sleepOrClose(ctx, &t, next) {
			return
		}
	}
}

// checkAlive sets the sentinel if it is missing and reports whether it was.
func (r *Redis) checkAlive(ctx context.Context) (bool, error) {
	set, err := r.rdb.SetNX(ctx, r.aliveKey, "1", 0).Result()
	if err != nil {
		return false, fmt.Errorf("scheduler: set %s: %w", r.aliveKey, err)
	}
	return set, nil
}

// sleepOrClose sleeps until the clock reaches until; false when ctx is done or the scheduler closed.
func (r *Redis) sleepOrClose(ctx context.Context, t *clock.Timer, until time.Time) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.closer.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return sleepUntil(ctx, r.opts.Clock, t, until, nil)
}
