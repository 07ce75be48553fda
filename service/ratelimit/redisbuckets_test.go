package ratelimit_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/ratelimit"
	"github.com/halley-bpm/halley/service/redisconn"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// eachRedis runs fn on HALLEY_TEST_REDIS and on HALLEY_TEST_REDIS_CLUSTER (under CI=true both must run), with a
// random key prefix of the test whose keys are removed after it.
func eachRedis(t *testing.T, fn func(t *testing.T, rdb redis.UniversalClient, prefix string)) {
	newPrefix := func() string {
		var b [6]byte
		rand.Read(b[:])
		return "halley-test:" + hex.EncodeToString(b[:]) + ":"
	}
	t.Run("redis", func(t *testing.T) {
		o, err := redis.ParseURL(storetest.RedisURL(t))
		if err != nil {
			t.Fatal(err)
		}
		rdb, prefix := redis.NewClient(o), newPrefix()
		t.Cleanup(func() {
			if keys, _ := rdb.Keys(context.Background(), prefix+"*").Result(); len(keys) > 0 {
				rdb.Del(context.Background(), keys...)
			}
			rdb.Close()
		})
		fn(t, rdb, prefix)
	})
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
		prefix := newPrefix()
		t.Cleanup(func() {
			_ = rdb.(*redis.ClusterClient).ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
				keys, _ := m.Keys(ctx, prefix+"*").Result()
				for _, k := range keys {
					m.Del(ctx, k)
				}
				return nil
			})
			rdb.Close()
		})
		fn(t, rdb, prefix)
	})
}

// TestRedisBuckets (Redis, Redis Cluster): the shared bucket behaves as Buckets does (bursts of twice the rate, then one event per
// 1/rate with the wait until it, keys apart, a refusal uses up nothing), and two limiters over one prefix (two
// replicas) share it: together they allow the burst once, not twice. 0 is no limit.
func TestRedisBuckets(t *testing.T) {
	eachRedis(t, testRedisBuckets)
}

func testRedisBuckets(t *testing.T, rdb redis.UniversalClient, prefix string) {
	if b, err := ratelimit.NewRedisBuckets(rdb, prefix, "trigger", 0, testkit.Quiet()); b != nil || err != nil {
		t.Fatalf("rate 0: %v %v; want no limit (nil)", b, err)
	}
	a, err := ratelimit.NewRedisBuckets(rdb, prefix, "trigger", 2, testkit.Quiet()) // bursts of 4, then one every 500 ms
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ratelimit.NewRedisBuckets(rdb, prefix, "trigger", 2, testkit.Quiet())
	now := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	for i, replica := range []*ratelimit.RedisBuckets{a, b, a, b} {
		if ok, _ := replica.Allow("10.0.0.1", now); !ok {
			t.Fatalf("event %d of the burst refused", i+1)
		}
	}
	for _, replica := range []*ratelimit.RedisBuckets{a, b} {
		ok, wait := replica.Allow("10.0.0.1", now)
		if ok || wait != 500*time.Millisecond {
			t.Fatalf("past the burst the replicas share: %v, wait %v; want refused for 500ms", ok, wait)
		}
	}
	if ok, _ := b.Allow("10.0.0.2", now); !ok {
		t.Fatal("another key shares the bucket")
	}
	if ok, _ := a.Allow("10.0.0.1", now.Add(499*time.Millisecond)); ok {
		t.Fatal("allowed before the wait it gave")
	}
	if ok, _ := b.Allow("10.0.0.1", now.Add(500*time.Millisecond)); !ok {
		t.Fatal("refused after the wait it gave (a refusal must not use up a token)")
	}
	if ok, _ := a.Allow("10.0.0.1", now.Add(500*time.Millisecond)); ok {
		t.Fatal("the token of 500ms was used twice")
	}
	// Idle for long, the bucket is full again (no more than the burst) and the key expires in Redis.
	later := now.Add(time.Hour)
	n := 0
	for range 10 {
		if ok, _ := a.Allow("10.0.0.1", later); ok {
			n++
		}
	}
	if n != 4 {
		t.Fatalf("%d events allowed after an hour idle; want the burst, 4", n)
	}
	if ttl := rdb.PTTL(context.Background(), a.Key("10.0.0.1")).Val(); ttl <= 0 || ttl > 3*time.Second {
		t.Fatalf("the key's expiry %v; want about the 2 s until the bucket is full again", ttl)
	}
}

// TestRedisBucketsRace (Redis, Redis Cluster): 100 goroutines over 4 replicas calling at once on one key get exactly the burst between
// them — what n replicas behind a load balancer allow one client.
func TestRedisBucketsRace(t *testing.T) {
	eachRedis(t, testRedisBucketsRace)
}

func testRedisBucketsRace(t *testing.T, rdb redis.UniversalClient, prefix string) {
	now := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	var replicas []*ratelimit.RedisBuckets
	for range 4 {
		r, err := ratelimit.NewRedisBuckets(rdb, prefix, "trigger", 5, testkit.Quiet()) // bursts of 10
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, r)
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _ := replicas[i%4].Allow("c", now); ok {
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := allowed.Load(); n != 10 {
		t.Fatalf("%d of 100 concurrent events over 4 replicas allowed; want the burst once, 10", n)
	}
}

// TestRedisBucketsFallback: with Redis unreachable each replica limits alone (the in-process bucket), neither
// refusing everything nor allowing everything.
func TestRedisBucketsFallback(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	b, err := ratelimit.NewRedisBuckets(rdb, "halley-test:down:", "trigger", 1, testkit.Quiet()) // bursts of 2
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	for i := range 2 {
		if ok, _ := b.Allow("k", now); !ok {
			t.Fatalf("event %d refused with Redis down", i+1)
		}
	}
	if ok, wait := b.Allow("k", now); ok || wait != time.Second {
		t.Fatalf("past the burst with Redis down: %v %v; want refused for 1s by the local bucket", ok, wait)
	}
}
