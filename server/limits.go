package server

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/halley-bpm/halley/model"
)

// ipLimiter is a token bucket per client IP, in this process: every replica allows the rate (a load balancer
// spreading a client over n replicas allows it n times; that bounds abuse, which is what it is for).
type ipLimiter struct {
	every rate.Limit
	burst int

	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// maxLimiters bounds the map; past it, it starts over (which only forgives).
const maxLimiters = 100_000

// newIPLimiter allows perSecond requests a second per IP with bursts of twice that; nil (no limit) when
// perSecond < 0.
func newIPLimiter(perSecond float64) *ipLimiter {
	if perSecond < 0 {
		return nil
	}
	return &ipLimiter{every: rate.Limit(perSecond), burst: max(1, int(math.Ceil(2*perSecond))), m: map[string]*rate.Limiter{}}
}

// allow reports whether ip may make a request now, and else how long until it may.
func (l *ipLimiter) allow(ip string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	lim, ok := l.m[ip]
	if !ok {
		if len(l.m) >= maxLimiters {
			clear(l.m)
		}
		lim = rate.NewLimiter(l.every, l.burst)
		l.m[ip] = lim
	}
	l.mu.Unlock()
	r := lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// limitTriggers rate-limits the API triggers per client IP (HALLEY_TRIGGER_RATE_LIMIT): a trigger with
// login_verification none is open to anyone who can reach Halley, and each call starts an instance (and a sync
// call holds a request open while it waits). 429 rate_limited with Retry-After beyond it.
func (s *Server) limitTriggers(c *gin.Context) {
	if s.triggerRate == nil {
		c.Next()
		return
	}
	if ok, wait := s.triggerRate.allow(c.ClientIP(), time.Now()); !ok {
		secs := int(math.Ceil(wait.Seconds()))
		fail(c, model.CodedError(model.ERATELIMITED, "rate_limited", "too many trigger calls from %s; retry in %s s", c.ClientIP(), strconv.Itoa(secs)).
			WithDetails(map[string]any{"retry_after": secs}))
		return
	}
	c.Next()
}
