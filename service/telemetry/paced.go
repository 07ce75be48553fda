package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/halley-bpm/halley/service/clock"
)

// Paced bounds the cost of a query gauge whose query grows with the data (the instances by status walk an index
// entry per instance: ~0.3 s at 70,000 instances, seconds at millions): after a run of count that took d, the next
// run comes no sooner than d/duty after it ended, and until then the last result is given again. So the query
// takes at most duty of the time of one database connection however large the tables grow, and runs at every
// refresh while it is cheap. A failed run is not remembered: the next call runs count again.
func Paced[T any](count func(context.Context) (T, error), duty float64, clk clock.Clock) func(context.Context) (T, error) {
	var (
		mu   sync.Mutex
		last T
		have bool
		next time.Time
	)
	return func(ctx context.Context) (T, error) {
		mu.Lock()
		defer mu.Unlock()
		start := clk.Now()
		if have && start.Before(next) {
			return last, nil
		}
		v, err := count(ctx)
		if err != nil {
			return v, err
		}
		end := clk.Now()
		last, have = v, true
		next = end.Add(time.Duration(float64(end.Sub(start)) / duty))
		return v, nil
	}
}
