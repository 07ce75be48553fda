package scheduler

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/service/clock"
)

// DefaultLossCheckInterval is how often WatchLoss looks for the sentinel key by default.
const DefaultLossCheckInterval = 5 * time.Second

// AliveKey is shard 0's sentinel key. Each shard has one, under the shard's hash tag, so it lives in that
// shard's Redis Cluster slot and disappears with its keys (see ShardKeys).
func (r *Redis) AliveKey() string { return r.ShardKeys(0)[3] }

// WatchLoss notices that Redis lost the scheduler's keys — a FLUSHALL, a restart without persistence, a failover
// to an empty replica — and calls rearm at once, instead of leaving the timers unarmed until a periodic job.
//
// Every interval it sets the sentinel key of every shard in use if it is missing (SET NX). Finding one missing
// means Redis lost data since the last check — on a cluster, perhaps one master only — (or this is the first
// process on an empty Redis), so rearm is called; if rearm fails it is called again at every check that reaches
// Redis until it succeeds, and the sentinel is deleted again so that other replicas retry too. The sentinel is set before re-arming: a loss that
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
	// owed: a re-arm failed and none has succeeded since. It is retried at every check that reaches Redis, sentinel
	// or not: deleting the sentinel after the failure may not reach Redis either (it went away again between the
	// check and the re-arm), and the loss would then be forgotten with the timers unarmed.
	owed := false
	for {
		next := c.Now().Add(interval)
		if lost, err := r.checkAlive(ctx); err != nil {
			if ctx.Err() == nil && !r.closer.isClosed() {
				r.opts.Logger.Warn("scheduler: checking the redis sentinel failed; retrying", "err", err, "retry_in", interval)
			}
		} else if lost || owed {
			if lost {
				r.opts.Logger.Warn("scheduler: a redis sentinel is missing (redis lost its data, or is new); re-arming pending timers", "key", r.AliveKey())
			}
			if err := rearm(ctx); err != nil {
				owed = true
				r.opts.Logger.Error("scheduler: re-arming after a redis loss failed; retrying", "err", err, "retry_in", interval)
				// Without the sentinel another replica's next check sees the loss too.
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackTimeout)
				r.rdb.Del(dctx, r.AliveKey())
				cancel()
			} else {
				owed = false
			}
		}
		if !r.sleepOrClose(ctx, &t, next) {
			return
		}
	}
}

// checkAlive sets the sentinels that are missing and reports whether any was.
func (r *Redis) checkAlive(ctx context.Context) (bool, error) {
	counts, err := r.counts(ctx)
	if err != nil {
		return false, fmt.Errorf("scheduler: check the sentinels: %w", err)
	}
	n := slices.Max(counts)
	set := make([]*redis.BoolCmd, n)
	if _, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for sh := range n {
			set[sh] = p.SetNX(ctx, r.ShardKeys(sh)[3], "1", 0)
		}
		return nil
	}); err != nil {
		return false, fmt.Errorf("scheduler: set the sentinels %s...: %w", r.AliveKey(), err)
	}
	for _, c := range set {
		if c.Val() {
			return true, nil
		}
	}
	return false, nil
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
