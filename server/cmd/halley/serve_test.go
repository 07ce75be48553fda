package main

import (
	"context"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/scheduler"
)

// The composition root's timer.arm and timer.cancel handlers carry out the rows a step wrote: an armed timer is
// delivered at its due time (model.TimerArmPayload, as the engine writes it), a cancelled one never, and a payload
// that is no timer.arm is an error (the row stays in the outbox).
func TestTimerOutbox(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	sched := scheduler.NewMemory(scheduler.Options{Clock: clk})
	defer sched.Close()
	arm, cancel := timerOutbox(sched)
	ctx := context.Background()
	if err := arm(ctx, []model.OutboxItem{
		{Kind: model.OutboxTimerArm, Ref: "kept", Payload: model.TimerArmPayload(t0.Add(2 * time.Second))},
		{Kind: model.OutboxTimerArm, Ref: "dropped", Payload: model.TimerArmPayload(t0.Add(time.Second))},
	}); err != nil {
		t.Fatal(err)
	}
	if err := cancel(ctx, []model.OutboxItem{{Kind: model.OutboxTimerCancel, Ref: "dropped"}}); err != nil {
		t.Fatal(err)
	}
	if err := arm(ctx, []model.OutboxItem{{Kind: model.OutboxTimerArm, Ref: "bad", Payload: []byte(`not json`)}}); err == nil {
		t.Fatal("a bad payload was armed")
	}
	fired := make(chan string, 4)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = sched.Run(rctx, func(_ context.Context, batch []scheduler.Due) []error {
			for _, d := range batch {
				fired <- d.ID
			}
			return make([]error, len(batch))
		})
	}()
	clk.Set(t0.Add(2 * time.Second))
	select {
	case id := <-fired:
		if id != "kept" {
			t.Fatalf("%s fired, want kept (dropped was cancelled)", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the armed timer did not fire")
	}
	select {
	case id := <-fired:
		t.Fatalf("%s fired too", id)
	default:
	}
}

// TestCountDuty: the count of the instances by status works 5 % of its time while its work is at most a second
// (a pass of at most 20 s), and spreads any longer work over 20 s, up to working all the time; whatever its share
// within a count, the next count begins no sooner than 20 × its work after it began (5 % on average).
func TestCountDuty(t *testing.T) {
	for _, c := range []struct {
		work time.Duration
		want float64
	}{{0, 0.05}, {300 * time.Millisecond, 0.05}, {time.Second, 0.05}, {2 * time.Second, 0.1}, {4 * time.Second, 0.2},
		{20 * time.Second, 1}, {time.Minute, 1}} {
		if got := countDuty(c.work); got != c.want {
			t.Errorf("countDuty(%v) = %v, want %v", c.work, got, c.want)
		}
	}
	began := time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)
	for _, c := range []struct{ work, after time.Duration }{{0, 0}, {10 * time.Millisecond, 200 * time.Millisecond},
		{time.Second, 20 * time.Second}, {4 * time.Second, 80 * time.Second}} {
		if got := countAgain(began, c.work); !got.Equal(began.Add(c.after)) {
			t.Errorf("countAgain after %v of work = %v after it began, want %v", c.work, got.Sub(began), c.after)
		}
	}
}
