package ratelimit_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/service/ratelimit"
	"github.com/halley-bpm/halley/service/redisconn"
	"github.com/halley-bpm/halley/service/store/storetest"
)

var ctx = context.Background()

const window = 15 * time.Minute

// each runs the contract on the in-process counter and on Redis (HALLEY_TEST_REDIS; under CI=true it must run).
func each(t *testing.T, fn func(t *testing.T, c ratelimit.Counter)) {
	t.Run("memory", func(t *testing.T) { fn(t, ratelimit.NewMemory(window, 0)) })
	t.Run("redis", func(t *testing.T) {
		o, err := redis.ParseURL(storetest.RedisURL(t))
		if err != nil {
			t.Fatal(err)
		}
		rdb := redis.NewClient(o)
		t.Cleanup(func() { rdb.Close() })
		var b [6]byte
		rand.Read(b[:])
		prefix := "halley-test:" + hex.EncodeToString(b[:]) + ":"
		t.Cleanup(func() {
			keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
			if len(keys) > 0 {
				rdb.Del(context.Background(), keys...)
			}
		})
		c, err := ratelimit.NewRedis(rdb, prefix, window)
		if err != nil {
			t.Fatal(err)
		}
		fn(t, c)
	})
	// On a Redis Cluster (HALLEY_TEST_REDIS_CLUSTER; under CI=true it must run): the keys of one Take share the
	// {rl} hash tag, so the script that checks and counts them runs in one slot.
	t.Run("cluster", func(t *testing.T) {
		url := os.Getenv("HALLEY_TEST_REDIS_CLUSTER")
		if url == "" {
			if os.Getenv("CI") == "true" {
				t.Fatal("HALLEY_TEST_REDIS_CLUSTER is not set: under CI=true the Redis Cluster tests must run (scripts/redis-cluster.sh start)")
			}
			t.Skip("HALLEY_TEST_REDIS_CLUSTER is not set; skipping (CI=true would fail)")
		}
		rdb, err := redisconn.Open(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		var b [6]byte
		rand.Read(b[:])
		prefix := "halley-test:" + hex.EncodeToString(b[:]) + ":"
		t.Cleanup(func() {
			_ = rdb.(*redis.ClusterClient).ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
				keys, _ := m.Keys(ctx, prefix+"*").Result()
				for _, k := range keys {
					m.Del(ctx, k)
				}
				return nil
			})
		})
		c, err := ratelimit.NewRedis(rdb, prefix, window)
		if err != nil {
			t.Fatal(err)
		}
		fn(t, c)
	})
}

func take(t *testing.T, c ratelimit.Counter, now time.Time, rules ...ratelimit.Rule) (string, time.Duration) {
	t.Helper()
	id, wait, err := c.Take(ctx, rules, now)
	if err != nil {
		t.Fatal(err)
	}
	if (id == "") == (wait == 0) {
		t.Fatalf("Take must give an id or a wait, not %q and %v", id, wait)
	}
	return id, wait
}

// TestCounter: the sliding window, the wait until the oldest attempt holding a key at its limit leaves it, rules
// checked together (nothing recorded when one refuses), Give and Reset.
func TestCounter(t *testing.T) {
	each(t, func(t *testing.T, c ratelimit.Counter) {
		t0 := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
		user := ratelimit.Rule{Key: "u:alice", Limit: 3}
		ip := ratelimit.Rule{Key: "ip:10.0.0.1", Limit: 5}
		for i := range 3 {
			if _, wait := take(t, c, t0.Add(time.Duration(i)*time.Minute), user, ip); wait != 0 {
				t.Fatalf("attempt %d refused: %v", i+1, wait)
			}
		}
		// The 4th, 30 s after the 3rd: refused until the 1st (at t0) leaves the window.
		_, wait := take(t, c, t0.Add(2*time.Minute+30*time.Second), user, ip)
		if want := window - 2*time.Minute - 30*time.Second; wait != want {
			t.Fatalf("wait %v, want %v", wait, want)
		}
		// Refused attempts record nothing: the IP still has room for two under another user.
		other := ratelimit.Rule{Key: "u:bob", Limit: 3}
		for i := range 2 {
			if _, wait := take(t, c, t0.Add(3*time.Minute), other, ip); wait != 0 {
				t.Fatalf("bob's attempt %d refused: %v", i+1, wait)
			}
		}
		if _, wait := take(t, c, t0.Add(3*time.Minute), other, ip); wait != window-3*time.Minute {
			t.Fatalf("the IP is at 5: wait %v", wait)
		}
		// A window after the first attempt, alice may try once more (the 2nd and 3rd still count).
		if _, wait := take(t, c, t0.Add(window), user); wait != 0 {
			t.Fatalf("after the window: %v", wait)
		}
		if _, wait := take(t, c, t0.Add(window), user); wait != time.Minute {
			t.Fatalf("the 2nd attempt (t0+1m) holds the key until t0+16m: %v", wait)
		}
		// Give takes one attempt back; Reset forgets a key.
		// At t0+17m the attempts of t0+1m and t0+2m have left: t0+15m and two more fill the key.
		take(t, c, t0.Add(window+2*time.Minute), user)
		id, _ := take(t, c, t0.Add(window+2*time.Minute), user)
		if _, wait := take(t, c, t0.Add(window+2*time.Minute), user); wait != 13*time.Minute {
			t.Fatalf("at the limit until t0+15m leaves: %v", wait)
		}
		if err := c.Give(ctx, id, user.Key); err != nil {
			t.Fatal(err)
		}
		if _, wait := take(t, c, t0.Add(window+2*time.Minute), user); wait != 0 {
			t.Fatalf("after Give: %v", wait)
		}
		if err := c.Reset(ctx, user.Key); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, wait := take(t, c, t0.Add(window+3*time.Minute), user); wait != 0 {
				t.Fatalf("after Reset, attempt %d: %v", i+1, wait)
			}
		}
	})
}

// TestCounterRace: of 100 attempts at once on one key with limit 5, exactly 5 are taken — on Redis from 100
// goroutines with one script each, which is what keeps concurrent guesses under the limit on every replica.
func TestCounterRace(t *testing.T) {
	each(t, func(t *testing.T, c ratelimit.Counter) {
		now := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
		var mu sync.Mutex
		taken := 0
		var wg sync.WaitGroup
		for range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id, _, err := c.Take(ctx, []ratelimit.Rule{{Key: "u:carol", Limit: 5}}, now)
				if err != nil {
					t.Error(err)
					return
				}
				if id != "" {
					mu.Lock()
					taken++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if taken != 5 {
			t.Fatalf("%d attempts taken, want 5", taken)
		}
	})
}

// TestMemoryBound: past MaxKeys, keys whose attempts left the window go first; the map never grows past it.
func TestMemoryBound(t *testing.T) {
	m := ratelimit.NewMemory(window, 10)
	t0 := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	for i := range 10 {
		if _, _, err := m.Take(ctx, []ratelimit.Rule{{Key: string(rune('a' + i)), Limit: 1}}, t0); err != nil {
			t.Fatal(err)
		}
	}
	if m.Len() != 10 {
		t.Fatalf("%d keys", m.Len())
	}
	if _, _, err := m.Take(ctx, []ratelimit.Rule{{Key: "late", Limit: 1}}, t0.Add(window+time.Second)); err != nil {
		t.Fatal(err)
	}
	if m.Len() != 1 {
		t.Fatalf("the expired keys must go: %d keys", m.Len())
	}
	for i := range 30 {
		if _, _, err := m.Take(ctx, []ratelimit.Rule{{Key: string(rune('A' + i)), Limit: 1}}, t0.Add(window+2*time.Second)); err != nil {
			t.Fatal(err)
		}
		if m.Len() > 10 {
			t.Fatalf("%d keys past the bound", m.Len())
		}
	}
}

// TestNewRedisValidates: a Redis counter without a client, a prefix or a window is refused (the composition root
// passes HALLEY_REDIS_PREFIX; no prefix is made up here).
func TestNewRedisValidates(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for name, tc := range map[string]struct {
		rdb    redis.UniversalClient
		prefix string
		window time.Duration
		want   string
	}{
		"no client": {nil, "p:", time.Minute, "needs a Redis client"},
		"no prefix": {rdb, "", time.Minute, "needs a key prefix"},
		"no window": {rdb, "p:", 0, "window must be positive"},
	} {
		if _, err := ratelimit.NewRedis(tc.rdb, tc.prefix, tc.window); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
	c, err := ratelimit.NewRedis(rdb, "tenant-b:", time.Minute)
	if err != nil || c.Key("login:u:bob") != "tenant-b:{rl}:login:u:bob" {
		t.Fatalf("key under the prefix: %v %v", c, err)
	}
}
