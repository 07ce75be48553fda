package main

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/server/config"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/scheduler"
)

// TestServeOpensARedisCluster: HALLEY_REDIS_URL=redis+cluster://... gives halley serve a cluster client, and the
// scheduler it builds puts timers in HALLEY_TIMER_SHARDS shards on it.
func TestServeOpensARedisCluster(t *testing.T) {
	url := os.Getenv("HALLEY_TEST_REDIS_CLUSTER")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("HALLEY_TEST_REDIS_CLUSTER is not set: under CI=true the Redis Cluster tests must run (scripts/redis-cluster.sh start)")
		}
		t.Skip("HALLEY_TEST_REDIS_CLUSTER is not set; skipping (CI=true would fail)")
	}
	ctx := context.Background()
	env := map[string]string{"HALLEY_REDIS_URL": url, "HALLEY_TIMER_SHARDS": "8", "HALLEY_DATA_DIR": t.TempDir(),
		"HALLEY_REDIS_PREFIX": newRedisPrefix()}
	cfg, err := config.Load("", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	rdb := openRedis(ctx, cfg.RedisURL, testkit.Quiet())
	defer closeRedis(rdb)
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("openRedis(%q) = %T, want a cluster client", url, rdb)
	}
	sched, err := newScheduler(cfg, rdb, clock.Real{}, testkit.Quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer sched.Close()
	r, ok := sched.(*scheduler.Redis)
	if !ok || r.Shards() != 8 {
		t.Fatalf("scheduler %T, want the Redis scheduler with 8 shards", sched)
	}
	if err := readiness(nil, rdb, sched)["redis"].Ping(ctx); err != nil {
		t.Fatalf("the readiness ping of the cluster: %v", err)
	}
}
