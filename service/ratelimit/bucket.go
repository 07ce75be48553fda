package ratelimit

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Buckets is a token bucket per key (a client IP), in this process: every replica allows the rate (a load balancer
// spreading a client over n replicas allows it n times; that bounds abuse, which is what it is for). Unlike a
// Counter it refuses nothing it has not seen too much of recently, and needs no Redis.
type Buckets struct {
	every rate.Limit
	burst int

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// maxBuckets bounds the map; past it, it starts over (which only forgives).
const maxBuckets = 100_000

// NewBuckets allows perSecond events a second per key with bursts of twice that (at least 1); nil, which allows
// everything, when perSecond is 0.
func NewBuckets(perSecond float64) *Buckets {
	if perSecond <= 0 {
		return nil
	}
	return &Buckets{every: rate.Limit(perSecond), burst: max(1, int(math.Ceil(2*perSecond))), m: map[string]*rate.Limiter{}}
}

// Allow reports whether key may have an event at now, and else how long until it may. A nil Buckets allows all.
func (b *Buckets) Allow(key string, now time.Time) (bool, time.Duration) {
	if b == nil {
		return true, 0
	}
	b.mu.Lock()
	lim, ok := b.m[key]
	if !ok {
		if len(b.m) >= maxBuckets {
			clear(b.m)
		}
		lim = rate.NewLimiter(b.every, b.burst)
		b.m[key] = lim
	}
	b.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}
