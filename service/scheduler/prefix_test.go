package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/scheduler"
)

// TestRedisPrefixIsolation runs two deployments on one Redis database with different HALLEY_REDIS_PREFIX values:
// each fires exactly its own timers, and every key either writes starts with its prefix.
func TestRedisPrefixIsolation(t *testing.T) {
	ctx := context.Background()
	o := redisOptions(t)
	admin := newClient(t, o)
	pa, pb := uniquePrefix(t), uniquePrefix(t)
	t.Cleanup(func() { admin.Del(ctx, append(timerKeys(pa), timerKeys(pb)...)...) })
	clk := clock.NewFake(t0)
	a := newRedisScheduler(t, newClient(t, o), pa, scheduler.Options{Clock: clk})
	b := newRedisScheduler(t, newClient(t, o), pb, scheduler.Options{Clock: clk})
	defer a.Close()
	defer b.Close()

	const n = 50
	var itemsA, itemsB []scheduler.Item
	for i := range n {
		// The same ids in both deployments: only the prefix keeps them apart.
		itemsA = append(itemsA, scheduler.Item{ID: fmt.Sprintf("t%02d", i), Due: at(time.Duration(i) * time.Millisecond)})
		itemsB = append(itemsB, scheduler.Item{ID: fmt.Sprintf("t%02d", i), Due: at(time.Duration(i) * time.Millisecond)})
	}
	itemsA = append(itemsA, scheduler.Item{ID: "only-a", Due: at(time.Second)})
	itemsB = append(itemsB, scheduler.Item{ID: "only-b", Due: at(time.Second)})
	schedule(t, a, itemsA...)
	schedule(t, b, itemsB...)
	wantLen(t, a, n+1, 0)
	wantLen(t, b, n+1, 0)

	recA, recB := newRecorder(clk), newRecorder(clk)
	runA, runB := startRun(t, a, recA.handler(nil)), startRun(t, b, recB.handler(nil))
	clk.Set(at(2 * time.Second))
	gotA, gotB := ids(recA.wait(t, n+1)), ids(recB.wait(t, n+1))
	sort.Strings(gotA)
	sort.Strings(gotB)
	if slices.Contains(gotA, "only-b") || !slices.Contains(gotA, "only-a") || len(slices.Compact(gotA)) != n+1 {
		t.Fatalf("deployment A fired %v; want its own %d timers, each once", gotA, n+1)
	}
	if slices.Contains(gotB, "only-a") || !slices.Contains(gotB, "only-b") || len(slices.Compact(gotB)) != n+1 {
		t.Fatalf("deployment B fired %v; want its own %d timers, each once", gotB, n+1)
	}
	// A handler has returned, its ack may not have landed yet: stopping the loops waits for the acks.
	runA.stop(t)
	runB.stop(t)
	wantLen(t, a, 0, 0)
	wantLen(t, b, 0, 0)

	// Nothing either wrote lives outside its prefix.
	schedule(t, a, scheduler.Item{ID: "late", Due: at(time.Hour)})
	for _, p := range []string{pa, pb} {
		keys, err := admin.Keys(ctx, p+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, p+"{timers}:") {
				t.Errorf("key %q is not a timer key of its prefix", k)
			}
		}
	}
	if !strings.HasPrefix(a.WakeChannel(), pa) || !strings.HasPrefix(b.WakeChannel(), pb) {
		t.Errorf("wake channels %q, %q are not under their prefixes", a.WakeChannel(), b.WakeChannel())
	}
}

// TestRedisWakeChannelPerDatabase: pub/sub channels are shared by all databases of a Redis server, so two
// deployments with the same prefix on databases 0 and 1 must not wake each other.
func TestRedisWakeChannelPerDatabase(t *testing.T) {
	ctx := context.Background()
	o0 := redisOptions(t)
	o1 := *o0
	o1.DB = o0.DB + 1
	prefix := uniquePrefix(t)
	c0, c1 := newClient(t, o0), newClient(t, &o1)
	t.Cleanup(func() { c0.Del(ctx, timerKeys(prefix)...); c1.Del(ctx, timerKeys(prefix)...) })
	clk := clock.NewFake(t0)
	s0 := newRedisScheduler(t, c0, prefix, scheduler.Options{Clock: clk})
	s1 := newRedisScheduler(t, c1, prefix, scheduler.Options{Clock: clk})
	defer s0.Close()
	defer s1.Close()
	if s0.WakeChannel() == s1.WakeChannel() {
		t.Fatalf("databases %d and %d share the wake channel %q", o0.DB, o1.DB, s0.WakeChannel())
	}
	sub0 := subscribe(t, c0, s0.WakeChannel())
	sub1 := subscribe(t, c1, s1.WakeChannel())

	// A new earliest timer on database 1 is published on database 1's channel only.
	schedule(t, s1, scheduler.Item{ID: "x", Due: at(time.Second)})
	if m := receive(t, sub1); m.Channel != s1.WakeChannel() {
		t.Fatalf("database 1's subscriber got %+v", m)
	}
	// The first thing database 0's subscriber hears must be this marker, not database 1's wake-up.
	if err := c0.Publish(ctx, s0.WakeChannel(), "marker").Err(); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, sub0); m.Payload != "marker" {
		t.Fatalf("database 0's subscriber heard %q from the other database", m.Payload)
	}
}

func subscribe(t *testing.T, c *redis.Client, ch string) *redis.PubSub {
	t.Helper()
	sub := c.Subscribe(context.Background(), ch)
	t.Cleanup(func() { sub.Close() })
	if _, err := sub.Receive(context.Background()); err != nil { // the subscription confirmation
		t.Fatal(err)
	}
	return sub
}

func receive(t *testing.T, sub *redis.PubSub) *redis.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitGuard)
	defer cancel()
	m, err := sub.ReceiveMessage(ctx)
	if err != nil {
		t.Fatalf("no message: %v", err)
	}
	return m
}
