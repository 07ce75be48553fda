package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limiter limits the rate of events per key: Allow reports whether key may have an event at now, and else how
// long until it may. *Buckets (this process) and *RedisBuckets (every replica together) are Limiters.
type Limiter interface {
	Allow(key string, now time.Time) (bool, time.Duration)
}

var (
	_ Limiter = (*Buckets)(nil)
	_ Limiter = (*RedisBuckets)(nil)
)

// RedisBuckets is the token bucket of Buckets shared by every replica through Redis, so that n replicas behind a
// load balancer together allow the rate once, not n times. Each key is one Redis string holding its theoretical
// arrival time (GCRA, the algorithm of a token bucket kept as one number), checked and moved by one script: any
// number of replicas may call at once. Times are the caller's clock. When Redis does not answer, the key is
// limited by this process's own Buckets (each replica alone, as without Redis) rather than refused or let through
// unlimited.
type RedisBuckets struct {
	rdb      redis.UniversalClient
	prefix   string
	interval time.Duration // one event's share of the rate: 1/perSecond
	burst    int
	local    *Buckets
	timeout  time.Duration
	log      *slog.Logger
	warned   atomic.Int64 // unix seconds of the last warning about Redis, to log at most one a minute
}

// NewRedisBuckets allows perSecond events a second per key in bursts of twice that (as NewBuckets), counted in
// Redis under prefix+name (HALLEY_REDIS_PREFIX and what is limited, e.g. "trigger"). It returns nil, which allows
// everything, when perSecond is 0.
func NewRedisBuckets(rdb redis.UniversalClient, prefix, name string, perSecond float64, lg *slog.Logger) (*RedisBuckets, error) {
	switch {
	case perSecond <= 0:
		return nil, nil
	case rdb == nil:
		return nil, errors.New("ratelimit: shared buckets need a Redis client")
	case prefix == "" || name == "":
		return nil, errors.New("ratelimit: shared buckets need a key prefix (HALLEY_REDIS_PREFIX) and a name")
	}
	if lg == nil {
		lg = slog.Default()
	}
	return &RedisBuckets{rdb: rdb, prefix: prefix + "tb:" + name + ":", interval: time.Duration(float64(time.Second) / perSecond),
		burst: max(1, int(math.Ceil(2*perSecond))), local: NewBuckets(perSecond), timeout: time.Second, log: lg}, nil
}

// Key is the Redis key of a limited key (tests and docs).
func (r *RedisBuckets) Key(key string) string { return r.prefix + key }

// gcraScript: KEYS[1] = the key; ARGV = now µs, interval µs, burst. The key holds the theoretical arrival time
// (tat) of the next event; an event moves it one interval on, and is allowed while the tat stays within burst
// intervals of now. Returns 0 (allowed) or the µs to wait.
var gcraScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local next = tat + interval
local wait = next - burst * interval - now
if wait > 0 then return wait end
redis.call('SET', KEYS[1], string.format('%.0f', next), 'PX', math.ceil((next - now) / 1000) + 1)
return 0
`)

// Allow implements Limiter. A nil RedisBuckets allows all.
func (r *RedisBuckets) Allow(key string, now time.Time) (bool, time.Duration) {
	if r == nil {
		return true, 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	us, err := gcraScript.Run(ctx, r.rdb, []string{r.Key(key)}, now.UnixMicro(), r.interval.Microseconds(), r.burst).Int64()
	if err != nil {
		if t := time.Now().Unix(); t-r.warned.Load() >= 60 {
			r.warned.Store(t)
			r.log.Warn("the shared rate limit is not reachable in redis; each replica limits alone until it is", "err", fmt.Errorf("ratelimit: %w", err))
		}
		return r.local.Allow(key, now)
	}
	if us > 0 {
		return false, time.Duration(us) * time.Microsecond
	}
	return true, 0
}
