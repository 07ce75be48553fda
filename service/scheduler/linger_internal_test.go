package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/clock"
)

// partialBackend pops at most per timers at a time, whatever n is, and reports the earliest still due: as a pop
// of one shard among several, or one cut short, does.
type partialBackend struct {
	mu  sync.Mutex
	due []Due // in due order
	per int
}

func (b *partialBackend) pop(_ context.Context, nowMs int64, n int, _ int64) ([]Due, int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Due
	for len(b.due) > 0 && len(out) < min(n, b.per) && toMs(b.due[0].Due) <= nowMs {
		out = append(out, b.due[0])
		b.due = b.due[1:]
	}
	next := int64(-1)
	if len(b.due) > 0 {
		next = toMs(b.due[0].Due)
	}
	return out, next, nil
}

func (b *partialBackend) ack(context.Context, []string, int64) error         { return nil }
func (b *partialBackend) recoverExpired(context.Context, int64) (int, error) { return 0, nil }

// TestLingerWaitsOnlyWhenNothingMoreIsDue: six timers due at once, popped two at a time with a 10 ms linger, are
// all delivered without the clock moving: a partial pop that leaves timers due does not linger.
func TestLingerWaitsOnlyWhenNothingMoreIsDue(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	b := &partialBackend{per: 2}
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		b.due = append(b.due, Due{ID: id, Due: t0, Attempt: 1})
	}
	got := make(chan Due, 6)
	h := func(_ context.Context, batch []Due) []error {
		for _, d := range batch {
			got <- d
		}
		return make([]error, len(batch))
	}
	opts := Options{Clock: clk, Linger: 10 * time.Millisecond, LeaseTimeout: time.Minute}.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runLoop(ctx, b, opts, &waker{}, make(chan struct{}), h) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	for i := range 6 {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of 6 due timers delivered with the clock standing still: the loop lingered while timers were due", i)
		}
	}
	if !clk.Now().Equal(t0) {
		t.Fatalf("the clock moved to %s", clk.Now())
	}
}
