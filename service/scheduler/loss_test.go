package scheduler_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/scheduler"
)

// TestWatchLossRearmsWhenRedisLosesItsKeys drives WatchLoss with a fake clock: it re-arms once on an empty Redis,
// not while the sentinel is there, at the first check after the keys are lost, and again after a failed re-arm.
func TestWatchLossRearmsWhenRedisLosesItsKeys(t *testing.T) {
	o := redisOptions(t)
	prefix := uniquePrefix(t)
	admin := newClient(t, o)
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newRedisScheduler(t, newClient(t, o), prefix, scheduler.Options{Clock: fc, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { admin.Del(context.Background(), append(timerKeys(prefix), s.AliveKey())...) })

	const every = 5 * time.Second
	item := scheduler.Item{ID: "t1", Due: fc.Now().Add(time.Hour)}
	calls := make(chan struct{}, 10)
	fail := make(chan struct{}, 1) // a value makes the next re-arm fail
	rearm := func(ctx context.Context) error {
		defer func() { calls <- struct{}{} }()
		select {
		case <-fail:
			return errors.New("database down")
		default:
		}
		_, err := s.Ensure(ctx, item)
		return err
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); s.WatchLoss(ctx, every, rearm) }()
	t.Cleanup(func() { cancel(); <-done })

	expect := func(step string, want int) {
		t.Helper()
		fc.BlockUntil(1) // the watcher has checked and is asleep until the next interval
		got := len(calls)
		for range got {
			<-calls
		}
		if got != want {
			t.Fatalf("%s: %d re-arms, want %d", step, got, want)
		}
	}
	tick := func() {
		t.Helper()
		fc.BlockUntil(1)
		fc.Advance(every)
	}
	due := func() int {
		t.Helper()
		n, _, err := s.Len(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	expect("first check on an empty redis", 1)
	if n, _ := admin.Exists(ctx, s.AliveKey()).Result(); n != 1 {
		t.Fatal("the sentinel was not set")
	}
	tick()
	expect("sentinel present", 0)

	admin.Del(ctx, append(timerKeys(prefix), s.AliveKey())...) // what a FLUSHALL does to these keys
	if due() != 0 {
		t.Fatal("the timer survived the loss")
	}
	tick()
	expect("after the loss", 1)
	if due() != 1 {
		t.Fatal("the timer was not re-armed after the loss")
	}

	admin.Del(ctx, append(timerKeys(prefix), s.AliveKey())...)
	fail <- struct{}{}
	tick()
	expect("failing re-arm", 1)
	if n, _ := admin.Exists(ctx, s.AliveKey()).Result(); n != 0 {
		t.Fatal("a failed re-arm must leave the sentinel unset so the next check retries")
	}
	tick()
	expect("retry", 1)
	if due() != 1 {
		t.Fatal("the retry did not re-arm the timer")
	}

	// A re-arm fails and the sentinel's delete does not reach Redis (it went away again in between): the watcher
	// still owes the re-arm and retries it at the next check, though the sentinel is there.
	admin.Del(ctx, append(timerKeys(prefix), s.AliveKey())...)
	fail <- struct{}{}
	tick()
	expect("failing re-arm, the sentinel's delete lost", 1)
	admin.Set(ctx, s.AliveKey(), "1", 0)
	tick()
	expect("retry with the sentinel present", 1)
	if due() != 1 {
		t.Fatal("the owed re-arm did not re-arm the timer")
	}
	tick()
	expect("nothing owed any more", 0)
}
