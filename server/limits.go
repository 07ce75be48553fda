package server

import (
	"math"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/halley-bpm/halley/model"
)

// limitTriggers rate-limits the API triggers per client IP (HALLEY_TRIGGER_RATE_LIMIT): a trigger with
// login_verification none is open to anyone who can reach Halley, and each call starts an instance (and a sync
// call holds a request open while it waits). With Redis the limit is shared by every replica. 429 rate_limited with Retry-After beyond it.
func (s *Server) limitTriggers(c *gin.Context) {
	if s.triggerLimit == nil {
		c.Next()
		return
	}
	if ok, wait := s.triggerLimit.Allow(c.ClientIP(), time.Now()); !ok {
		secs := int(math.Ceil(wait.Seconds()))
		fail(c, model.CodedError(model.ERATELIMITED, "rate_limited", "too many trigger calls from %s; retry in %s s", c.ClientIP(), strconv.Itoa(secs)).
			WithDetails(map[string]any{"retry_after": secs}))
		return
	}
	c.Next()
}
