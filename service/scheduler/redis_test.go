package scheduler_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/scheduler"
)

// redisOptions returns the options of HALLEY_TEST_REDIS, skipping the test when it is unset (failing it under
// CI=true, where every service must be there).
func redisOptions(t testing.TB) *redis.Options {
	t.Helper()
	url := os.Getenv("HALLEY_TEST_REDIS")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("HALLEY_TEST_REDIS is not set: under CI=true tests that need Redis must run")
		}
		t.Skip("HALLEY_TEST_REDIS is not set; skipping (CI=true would fail)")
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("HALLEY_TEST_REDIS: %v", err)
	}
	return o
}

// newClient returns a client closed when the test ends.
func newClient(t testing.TB, o *redis.Options) *redis.Client {
	t.Helper()
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// uniquePrefix keeps each test's keys apart from other tests and packages sharing the Redis.
func uniquePrefix(t testing.TB) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "halley-test:" + hex.EncodeToString(b[:]) + ":"
}

// timerKeys are the keys a Redis scheduler with prefix and one shard uses (see docs/scheduler.md): due, lease,
// meta, and the shard counts in use.
func timerKeys(prefix string) []string {
	base := prefix + "{timers}:"
	return []string{base + "due", base + "lease", base + "meta", base + "shards"}
}

func newRedisBackend(t *testing.T, opts scheduler.Options) backend {
	t.Helper()
	o := redisOptions(t)
	prefix := uniquePrefix(t)
	admin := newClient(t, o)
	t.Cleanup(func() { admin.Del(context.Background(), timerKeys(prefix)...) })
	if err := admin.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis: %v", err)
	}
	return backend{
		open: func() scheduler.Scheduler {
			s := newRedisScheduler(t, newClient(t, o), prefix, opts)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		// Redis lost the keys (a FLUSHALL, a failover to an empty replica): only this test's keys are dropped.
		lose: func(s scheduler.Scheduler) scheduler.Scheduler {
			if err := admin.Del(context.Background(), timerKeys(prefix)...).Err(); err != nil {
				t.Fatalf("deleting keys: %v", err)
			}
			return s
		},
	}
}

func TestRedisContract(t *testing.T) {
	redisOptions(t) // skip (or fail under CI) once, not in every subtest
	testContract(t, newRedisBackend)
}

// TestRedisFlushDB loses the keys the way an operator's FLUSHDB would, on a database of its own (/15), and
// re-arms them with Ensure as the engine does from its timer rows.
func TestRedisFlushDB(t *testing.T) {
	ctx := context.Background()
	o := redisOptions(t)
	o.DB = 15
	c := newClient(t, o)
	clk := clock.NewFake(t0)
	s := newRedisScheduler(t, c, uniquePrefix(t), scheduler.Options{Clock: clk})
	defer s.Close()
	items := []scheduler.Item{{ID: "x", Due: at(time.Second)}, {ID: "y", Due: at(2 * time.Second)}, {ID: "z", Due: at(3 * time.Second)}}
	schedule(t, s, items...)
	wantLen(t, s, 3, 0)
	if err := c.FlushDB(ctx).Err(); err != nil {
		t.Fatalf("FLUSHDB: %v", err)
	}
	wantLen(t, s, 0, 0)
	if n, err := s.Ensure(ctx, items...); err != nil || n != 3 {
		t.Fatalf("Ensure after FLUSHDB = %d, %v; want 3", n, err)
	}
	if n, err := s.Ensure(ctx, items...); err != nil || n != 0 {
		t.Fatalf("second Ensure = %d, %v; want 0", n, err)
	}
	rec := newRecorder(clk)
	startRun(t, s, rec.handler(nil))
	clk.Set(at(3 * time.Second))
	if got := ids(rec.wait(t, 3)); !slices.Equal(got, []string{"x", "y", "z"}) {
		t.Fatalf("delivered %v, want x y z", got)
	}
}

// TestRedisKeyLayout pins the documented keys: one hash tag for all of them (one Redis Cluster slot), and no
// per-timer metadata while a timer is merely pending.
func TestRedisKeyLayout(t *testing.T) {
	ctx := context.Background()
	o := redisOptions(t)
	c := newClient(t, o)
	prefix := uniquePrefix(t)
	t.Cleanup(func() { c.Del(ctx, timerKeys(prefix)...) })
	clk := clock.NewFake(t0)
	s := newRedisScheduler(t, c, prefix, scheduler.Options{Clock: clk, LeaseTimeout: time.Minute})
	defer s.Close()
	schedule(t, s, scheduler.Item{ID: "a", Due: at(time.Second)}, scheduler.Item{ID: "b", Due: at(time.Hour)})
	keys := timerKeys(prefix)
	if score, err := c.ZScore(ctx, keys[0], "b").Result(); err != nil || int64(score) != at(time.Hour).UnixMilli() {
		t.Fatalf("due score of b = %v, %v; want %d", score, err, at(time.Hour).UnixMilli())
	}
	if n := c.Exists(ctx, keys[2]).Val(); n != 0 {
		t.Fatalf("meta hash exists for pending timers only")
	}
	release := make(chan struct{})
	rec := newRecorder(clk)
	startRun(t, s, rec.handler(func(context.Context, scheduler.Due) error { <-release; return nil }))
	clk.Set(at(time.Second))
	rec.wait(t, 1)
	if score, err := c.ZScore(ctx, keys[1], "a").Result(); err != nil || int64(score) != at(time.Second+time.Minute).UnixMilli() {
		t.Fatalf("lease score of a = %v, %v; want the deadline %d", score, err, at(time.Second+time.Minute).UnixMilli())
	}
	if meta := c.HGet(ctx, keys[2], "a").Val(); meta != fmt.Sprintf("%d:1", at(time.Second).UnixMilli()) {
		t.Fatalf("meta of leased a = %q, want <due ms>:1", meta)
	}
	close(release)
}

// TestRedisLatenessRealClock measures how late timers fire on the wall clock when they are scheduled by another
// process: the wake-up channel, not MaxIdle polling, must bring them in.
func TestRedisLatenessRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("real-clock test")
	}
	o := redisOptions(t)
	prefix := uniquePrefix(t)
	t.Cleanup(func() { newClient(t, o).Del(context.Background(), timerKeys(prefix)...) })
	opts := scheduler.Options{MaxIdle: 5 * time.Second}
	runner := newRedisScheduler(t, newClient(t, o), prefix, opts)
	other := newRedisScheduler(t, newClient(t, o), prefix, opts)
	defer runner.Close()
	defer other.Close()
	const n = 20
	late := make(chan time.Duration, n)
	startRun(t, runner, func(_ context.Context, batch []scheduler.Due) []error {
		now := time.Now()
		for _, d := range batch {
			late <- now.Sub(d.Due)
		}
		return nil
	})
	// A far timer parks Run for MaxIdle; each near one is a new earliest, scheduled from the other client.
	schedule(t, other, scheduler.Item{ID: "far", Due: time.Now().Add(time.Hour)})
	var worst, total time.Duration
	for i := range n {
		schedule(t, other, scheduler.Item{ID: fmt.Sprintf("near-%d", i), Due: time.Now().Add(30 * time.Millisecond)})
		select {
		case d := <-late:
			if d < 0 {
				t.Fatalf("timer fired %s early", -d)
			}
			worst, total = max(worst, d), total+d
		case <-time.After(waitGuard):
			t.Fatalf("timer %d not delivered", i)
		}
	}
	t.Logf("lateness over %d timers: mean %s, worst %s (MaxIdle %s)", n, total/n, worst, opts.MaxIdle)
	if worst > 250*time.Millisecond {
		t.Fatalf("worst lateness %s: wake-ups are not working", worst)
	}
}

// TestRedisMemoryPerMillion estimates the Redis memory of 1M pending timers from a 100k sample (target ≤ 300 MB).
func TestRedisMemoryPerMillion(t *testing.T) {
	if testing.Short() {
		t.Skip("schedules 100k timers")
	}
	ctx := context.Background()
	o := redisOptions(t)
	c := newClient(t, o)
	prefix := uniquePrefix(t)
	t.Cleanup(func() { c.Del(ctx, timerKeys(prefix)...) })
	s := newRedisScheduler(t, c, prefix, scheduler.Options{})
	defer s.Close()
	const sample = 100_000
	items := make([]scheduler.Item, sample)
	base := time.Now().Add(time.Hour)
	for i := range items {
		// 36-character ids (UUID-sized) spread over 30 days: a pessimistic sample.
		items[i] = scheduler.Item{ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i*7919), Due: base.Add(time.Duration(i) * 26 * time.Second)}
	}
	schedule(t, s, items...)
	var bytes int64
	for _, k := range timerKeys(prefix) {
		n, err := c.MemoryUsage(ctx, k, 0).Result()
		if err != nil && err != redis.Nil {
			t.Fatalf("MEMORY USAGE %s: %v", k, err)
		}
		bytes += n
	}
	perMillion := float64(bytes) * (1_000_000 / sample) / (1 << 20)
	t.Logf("%d pending timers use %d bytes (%.0f B/timer): about %.0f MB per 1M", sample, bytes, float64(bytes)/sample, perMillion)
	if perMillion > 300 {
		t.Fatalf("%.0f MB per 1M pending timers, over the 300 MB budget", perMillion)
	}
}

// BenchmarkRedisScheduleAndPop schedules 100k due timers and delivers them all through one Run (default batch
// size and concurrency) per iteration.
func BenchmarkRedisScheduleAndPop(b *testing.B) {
	const timers = 100_000
	ctx := context.Background()
	o := redisOptions(b)
	c := newClient(b, o)
	items := make([]scheduler.Item, timers)
	var schedTotal, popTotal time.Duration
	for b.Loop() {
		prefix := uniquePrefix(b)
		s := newRedisScheduler(b, c, prefix, scheduler.Options{Logger: slog.New(slog.DiscardHandler)})
		now := time.Now()
		for i := range items {
			items[i] = scheduler.Item{ID: fmt.Sprintf("timer-%012d", i), Due: now.Add(-time.Duration(i%1000) * time.Millisecond)}
		}
		start := time.Now()
		if err := s.Schedule(ctx, items...); err != nil {
			b.Fatal(err)
		}
		scheduled := time.Now()
		var got atomic.Int64
		done := make(chan struct{})
		rctx, cancel := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() {
			ran <- s.Run(rctx, func(_ context.Context, batch []scheduler.Due) []error {
				if got.Add(int64(len(batch))) == timers {
					close(done)
				}
				return nil
			})
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			b.Fatalf("delivered %d of %d", got.Load(), timers)
		}
		popped := time.Now()
		cancel()
		if err := <-ran; err != nil {
			b.Fatal(err)
		}
		schedTotal += scheduled.Sub(start)
		popTotal += popped.Sub(scheduled)
		if due, leased, err := s.Len(ctx); err != nil || due != 0 || leased != 0 {
			b.Fatalf("after the run: due %d leased %d err %v", due, leased, err)
		}
		c.Del(ctx, timerKeys(prefix)...)
		_ = s.Close()
	}
	n := float64(b.N) * timers
	b.ReportMetric(n/schedTotal.Seconds(), "scheduled/s")
	b.ReportMetric(n/popTotal.Seconds(), "delivered/s")
	b.ReportMetric(0, "ns/op") // one op is 100k timers; the rates above are the figures
}

// newRedisScheduler is scheduler.NewRedis for a test: a refused configuration fails it.
func newRedisScheduler(t testing.TB, rdb redis.UniversalClient, prefix string, opts scheduler.Options) *scheduler.Redis {
	t.Helper()
	s, err := scheduler.NewRedis(rdb, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestNewRedisValidates: no client or no prefix is refused (a made-up prefix would mix deployments).
func TestNewRedisValidates(t *testing.T) {
	if _, err := scheduler.NewRedis(nil, "p:", scheduler.Options{}); err == nil || !strings.Contains(err.Error(), "needs a Redis client") {
		t.Errorf("no client: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	if _, err := scheduler.NewRedis(rdb, "", scheduler.Options{}); err == nil || !strings.Contains(err.Error(), "needs a key prefix") {
		t.Errorf("no prefix: %v", err)
	}
}
