package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/redisconn"
	"github.com/halley-bpm/halley/service/scheduler"
)

// clusterURL is HALLEY_TEST_REDIS_CLUSTER (scripts/redis-cluster.sh start prints it): the test is skipped when it
// is unset, and fails under CI=true.
func clusterURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("HALLEY_TEST_REDIS_CLUSTER")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("HALLEY_TEST_REDIS_CLUSTER is not set: under CI=true the Redis Cluster tests must run (scripts/redis-cluster.sh start)")
		}
		t.Skip("HALLEY_TEST_REDIS_CLUSTER is not set; skipping (CI=true would fail)")
	}
	return url
}

// clusterClient is a new client of the test cluster, as another process would have, closed when the test ends.
func clusterClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	c, err := redisconn.Open(clusterURL(t))
	if err != nil {
		t.Fatalf("HALLEY_TEST_REDIS_CLUSTER: %v", err)
	}
	if _, ok := c.(*redis.ClusterClient); !ok {
		t.Fatalf("HALLEY_TEST_REDIS_CLUSTER is not a cluster URL (redis+cluster://h1:7000,h2:7001,...)")
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// singleClient is a new client of HALLEY_TEST_REDIS.
func singleClient(t testing.TB) redis.UniversalClient { return newClient(t, redisOptions(t)) }

// prefixKeys lists every key under prefix, on every master of a cluster.
func prefixKeys(ctx context.Context, c redis.UniversalClient, prefix string) ([]string, error) {
	scan := func(ctx context.Context, n redis.UniversalClient) ([]string, error) {
		var out []string
		it := n.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			out = append(out, it.Val())
		}
		return out, it.Err()
	}
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return scan(ctx, c)
	}
	var mu sync.Mutex
	var all []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		keys, err := scan(ctx, m)
		mu.Lock()
		defer mu.Unlock()
		all = append(all, keys...)
		return err
	})
	return all, err
}

// dropPrefix deletes every key under prefix, one key per command (a multi-key DEL spanning slots fails on a
// cluster): what a FLUSHALL does to one deployment.
func dropPrefix(t testing.TB, c redis.UniversalClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	keys, err := prefixKeys(ctx, c, prefix)
	if err != nil {
		t.Fatalf("listing the keys of %s: %v", prefix, err)
	}
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Del(ctx, k)
		}
		return nil
	}); err != nil {
		t.Fatalf("deleting the keys of %s: %v", prefix, err)
	}
}

// shardedBackend runs the contract on the Redis client makes returns, with the given shard count.
func shardedBackend(client func(testing.TB) redis.UniversalClient, shards int) factory {
	return func(t *testing.T, opts scheduler.Options) backend {
		t.Helper()
		prefix := uniquePrefix(t)
		admin := client(t)
		if err := admin.Ping(context.Background()).Err(); err != nil {
			t.Fatalf("redis: %v", err)
		}
		t.Cleanup(func() { dropPrefix(t, admin, prefix) })
		opts.Shards = shards
		return backend{
			open: func() scheduler.Scheduler {
				s := newRedisScheduler(t, client(t), prefix, opts)
				t.Cleanup(func() { _ = s.Close() })
				return s
			},
			lose: func(s scheduler.Scheduler) scheduler.Scheduler {
				dropPrefix(t, admin, prefix)
				return s
			},
		}
	}
}

// TestRedisContractSharded: the contract holds with the timers split over 8 shards of one Redis.
func TestRedisContractSharded(t *testing.T) {
	redisOptions(t)
	testContract(t, shardedBackend(singleClient, 8))
}

// TestClusterContract runs the contract on a real 3-master Redis Cluster, with one shard (every key in one slot,
// on one master) and with 8 (spread over the masters).
func TestClusterContract(t *testing.T) {
	clusterURL(t)
	for _, shards := range []int{1, 8} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) { testContract(t, shardedBackend(clusterClient, shards)) })
	}
}

// TestClusterShardsSpreadOverMasters: with 8 shards, each master of the cluster holds timer keys, and the
// shards hold every timer once.
func TestClusterShardsSpreadOverMasters(t *testing.T) {
	ctx := context.Background()
	c := clusterClient(t).(*redis.ClusterClient)
	prefix := uniquePrefix(t)
	t.Cleanup(func() { dropPrefix(t, c, prefix) })
	s := newRedisScheduler(t, c, prefix, scheduler.Options{Clock: clock.NewFake(t0), Shards: 8})
	defer s.Close()
	const n = 800
	items := make([]scheduler.Item, n)
	for i := range items {
		items[i] = scheduler.Item{ID: fmt.Sprintf("timer-%04d", i), Due: at(time.Duration(i) * time.Second)}
	}
	schedule(t, s, items...)
	wantLen(t, s, n, 0)
	total := 0
	for sh := range 8 {
		k := s.ShardKeys(sh)
		if slot := c.ClusterKeySlot(ctx, k[0]).Val(); slot != c.ClusterKeySlot(ctx, k[1]).Val() || slot != c.ClusterKeySlot(ctx, k[2]).Val() ||
			slot != c.ClusterKeySlot(ctx, k[3]).Val() {
			t.Errorf("shard %d's keys %v are not in one slot", sh, k)
		}
		ids := c.ZRange(ctx, k[0], 0, -1).Val()
		for _, id := range ids {
			if scheduler.ShardOf(id, 8) != sh {
				t.Errorf("timer %s is in shard %d, its hash says %d", id, sh, scheduler.ShardOf(id, 8))
			}
		}
		total += len(ids)
	}
	if total != n {
		t.Errorf("the shards hold %d timers, want %d", total, n)
	}
	var mu sync.Mutex
	perMaster := map[string]int{}
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		var keys []string
		it := m.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		mu.Lock()
		defer mu.Unlock()
		perMaster[m.Options().Addr] = len(keys)
		return it.Err()
	}); err != nil {
		t.Fatal(err)
	}
	for addr, keys := range perMaster {
		if keys == 0 {
			t.Errorf("master %s holds no timer key: %v", addr, perMaster)
		}
	}
	if len(perMaster) < 3 {
		t.Errorf("%d masters, want 3", len(perMaster))
	}
	t.Logf("timer keys per master: %v", perMaster)
}

// TestRedisShardCountChange changes HALLEY_TIMER_SHARDS the way a rolling restart does: processes with the old
// count and with the new one run side by side on the same keys. Timers armed under the old count and then
// cancelled, re-armed, re-ensured or left leased by a crashed handler under the new one are each delivered as the
// contract says — nothing lost, nothing twice — and the old processes, once they re-read the counts in use,
// deliver the new shards too.
func TestRedisShardCountChange(t *testing.T) {
	for _, target := range []struct {
		name   string
		client func(testing.TB) redis.UniversalClient
		check  func(testing.TB)
	}{
		{"redis", singleClient, func(t testing.TB) { redisOptions(t) }},
		{"cluster", clusterClient, func(t testing.TB) { clusterURL(t) }},
	} {
		t.Run(target.name, func(t *testing.T) {
			target.check(t)
			for _, change := range [][2]int{{1, 8}, {8, 1}, {8, 3}} {
				t.Run(fmt.Sprintf("%d-to-%d", change[0], change[1]), func(t *testing.T) {
					testShardCountChange(t, target.client, change[0], change[1])
				})
			}
		})
	}
}

func testShardCountChange(t *testing.T, client func(testing.TB) redis.UniversalClient, from, to int) {
	ctx := context.Background()
	const lease = 10 * time.Hour // past every due time: the one clock jump below makes everything due, and no lease of an ack in flight expires
	clk := clock.NewFake(t0)
	prefix := uniquePrefix(t)
	admin := client(t)
	t.Cleanup(func() { dropPrefix(t, admin, prefix) })
	opts := scheduler.Options{Clock: clk, LeaseTimeout: lease, BatchSize: 16, Logger: quietLogger()}
	open := func(shards int) *scheduler.Redis {
		o := opts
		o.Shards = shards
		s := newRedisScheduler(t, client(t), prefix, o)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	old := open(from)
	const n = 300
	var items []scheduler.Item
	for i := range n {
		items = append(items, scheduler.Item{ID: fmt.Sprintf("t%03d", i), Due: at(time.Duration(10+i%50) * time.Second)})
	}
	schedule(t, old, append(items, scheduler.Item{ID: "crashed", Due: at(time.Second)})...)

	// A process of the old count pops "crashed" and dies before the ack: it stays leased in its old shard.
	rec := newRecorder(clk)
	crash := startRun(t, old, rec.handler(func(context.Context, scheduler.Due) error { return fmt.Errorf("process died") }))
	clk.Set(at(time.Second))
	if got := rec.wait(t, 1); got[0].ID != "crashed" || got[0].Attempt != 1 {
		t.Fatalf("first delivery %+v, want crashed attempt 1", got[0])
	}
	crash.stop(t)
	wantLen(t, old, n, 1)

	// The new count starts: it sees every timer the old one armed.
	cur := open(to)
	wantLen(t, cur, n, 1)
	if added, err := cur.Ensure(ctx, append(items, scheduler.Item{ID: "crashed", Due: at(time.Second)})...); err != nil || added != 0 {
		t.Fatalf("Ensure of timers armed under %d shards = %d, %v; want 0 added (all are held)", from, added, err)
	}
	cancelled := []string{"t000", "t001", "t002", "t003", "t004", "t005", "t006", "t007"}
	if err := cur.Cancel(ctx, cancelled...); err != nil {
		t.Fatal(err)
	}
	moved := map[string]time.Time{}
	var rearm []scheduler.Item
	for i := 10; i < 20; i++ {
		id := fmt.Sprintf("t%03d", i)
		moved[id] = at(2 * time.Hour)
		rearm = append(rearm, scheduler.Item{ID: id, Due: moved[id]})
	}
	schedule(t, cur, rearm...)
	fresh := []scheduler.Item{{ID: "new-1", Due: at(30 * time.Second)}, {ID: "new-2", Due: at(40 * time.Second)}}
	schedule(t, cur, fresh...)
	wantLen(t, cur, n-len(cancelled)+len(fresh), 1)

	// Both counts run side by side, as during a rolling restart; the old one re-reads the counts in use first.
	clk.Set(at(time.Second + lease))
	rec = newRecorder(clk)
	var mu sync.Mutex
	early := []string{}
	h := rec.handler(func(_ context.Context, d scheduler.Due) error {
		if want, ok := moved[d.ID]; ok && d.Due.Before(want) {
			mu.Lock()
			early = append(early, d.ID)
			mu.Unlock()
		}
		return nil
	})
	runOld, runNew := startRun(t, old, h), startRun(t, cur, h)
	want := n - len(cancelled) + len(fresh) + 1 // + crashed, re-delivered once its lease expired
	got := rec.wait(t, want)
	runOld.stop(t)
	runNew.stop(t)
	counts := map[string]int{}
	for _, d := range got {
		counts[d.ID]++
		if d.ID == "crashed" && d.Attempt != 2 {
			t.Errorf("crashed re-delivered with attempt %d, want 2", d.Attempt)
		}
	}
	for id, c := range counts {
		if c != 1 {
			t.Errorf("%s delivered %d times", id, c)
		}
	}
	for _, id := range cancelled {
		if counts[id] != 0 || rec.delivered(id) != 0 {
			t.Errorf("cancelled %s was delivered", id)
		}
	}
	if len(early) > 0 {
		t.Errorf("re-armed timers delivered at their old time: %v", early)
	}
	if len(counts) != want {
		t.Errorf("%d distinct timers delivered, want %d", len(counts), want)
	}
	wantLen(t, cur, 0, 0)
	wantLen(t, old, 0, 0)
	// Nothing is left behind in any shard of either count.
	keys, err := prefixKeys(ctx, admin, prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.HasSuffix(k, ":due") || strings.HasSuffix(k, ":lease") || strings.HasSuffix(k, ":meta") {
			t.Errorf("key %s is left after every timer was delivered", k)
		}
	}
	if c := admin.SMembers(ctx, prefix+"{timers}:shards").Val(); !slices.Contains(c, fmt.Sprint(from)) || !slices.Contains(c, fmt.Sprint(to)) {
		t.Errorf("shard counts in use %v, want %d and %d", c, from, to)
	}
}

// TestRedisUpgradeFromUnshardedKeys: a release before sharding kept its timers in <prefix>{timers}:due/lease/meta.
// Those are shard 0's keys, so after an upgrade — with one shard or with eight — every pending timer is delivered,
// and a timer a crashed old process had leased is re-delivered once its lease expires.
func TestRedisUpgradeFromUnshardedKeys(t *testing.T) {
	for _, target := range []struct {
		name   string
		client func(testing.TB) redis.UniversalClient
		check  func(testing.TB)
	}{
		{"redis", singleClient, func(t testing.TB) { redisOptions(t) }},
		{"cluster", clusterClient, func(t testing.TB) { clusterURL(t) }},
	} {
		t.Run(target.name, func(t *testing.T) {
			target.check(t)
			for _, shards := range []int{1, 8} {
				t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
					ctx := context.Background()
					c := target.client(t)
					prefix := uniquePrefix(t)
					t.Cleanup(func() { dropPrefix(t, c, prefix) })
					// What the old release wrote: 50 pending timers and one leased at its first delivery.
					base := prefix + "{timers}:"
					var zs []redis.Z
					for i := range 50 {
						zs = append(zs, redis.Z{Score: float64(at(time.Duration(i+1) * time.Second).UnixMilli()), Member: fmt.Sprintf("old-%02d", i)})
					}
					if err := c.ZAdd(ctx, base+"due", zs...).Err(); err != nil {
						t.Fatal(err)
					}
					c.ZAdd(ctx, base+"lease", redis.Z{Score: float64(at(30 * time.Second).UnixMilli()), Member: "old-leased"})
					c.HSet(ctx, base+"meta", "old-leased", fmt.Sprintf("%d:1", at(0).UnixMilli()))
					c.Set(ctx, base+"alive", "1", 0)

					clk := clock.NewFake(t0)
					// The leases of this test's deliveries outlast it: only old-leased's (written above) expires.
					s := newRedisScheduler(t, c, prefix, scheduler.Options{Clock: clk, Shards: shards, LeaseTimeout: 10 * time.Hour, Logger: quietLogger()})
					defer s.Close()
					wantLen(t, s, 50, 1)
					if err := s.Cancel(ctx, "old-07"); err != nil {
						t.Fatal(err)
					}
					schedule(t, s, scheduler.Item{ID: "old-08", Due: at(time.Hour)})
					rec := newRecorder(clk)
					startRun(t, s, rec.handler(nil))
					clk.Set(at(6 * time.Hour)) // past the recoverer's first wake-up (half the lease timeout)
					got := rec.wait(t, 50)     // 50 - old-07 + old-leased
					seen := map[string]scheduler.Due{}
					for _, d := range got {
						if _, dup := seen[d.ID]; dup {
							t.Errorf("%s delivered twice", d.ID)
						}
						seen[d.ID] = d
					}
					if _, ok := seen["old-07"]; ok {
						t.Errorf("the cancelled old-07 was delivered")
					}
					if d := seen["old-leased"]; d.Attempt != 2 {
						t.Errorf("old-leased delivered %+v, want attempt 2", d)
					}
					if d := seen["old-08"]; !d.Due.Equal(at(time.Hour)) {
						t.Errorf("old-08 delivered %+v, want its re-armed time", d)
					}
					if len(seen) != 50 {
						t.Errorf("%d distinct timers delivered, want 50", len(seen))
					}
					rec.checkNoneEarly(t)
				})
			}
		})
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestClusterWatchLossPerShard: on a cluster one master can lose its data alone (a restart without persistence,
// a failover to an empty replica). Each shard has its own sentinel, so losing only shard 5's keys is noticed and
// re-armed too.
func TestClusterWatchLossPerShard(t *testing.T) {
	ctx := context.Background()
	c := clusterClient(t)
	prefix := uniquePrefix(t)
	t.Cleanup(func() { dropPrefix(t, c, prefix) })
	fc := clock.NewFake(t0)
	s := newRedisScheduler(t, clusterClient(t), prefix, scheduler.Options{Clock: fc, Shards: 8, Logger: quietLogger()})
	defer s.Close()
	var items []scheduler.Item
	for i := range 64 {
		items = append(items, scheduler.Item{ID: fmt.Sprintf("t%02d", i), Due: at(time.Hour)})
	}
	const every = 5 * time.Second
	rearms := make(chan int, 10)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.WatchLoss(wctx, every, func(ctx context.Context) error {
			n, err := s.Ensure(ctx, items...)
			rearms <- n
			return err
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	next := func() int {
		t.Helper()
		fc.BlockUntil(1)
		select {
		case n := <-rearms:
			return n
		default:
			return -1
		}
	}
	if n := next(); n != len(items) {
		t.Fatalf("first check on an empty cluster re-armed %d, want %d", n, len(items))
	}
	fc.Advance(every)
	if n := next(); n != -1 {
		t.Fatalf("re-armed %d with every sentinel present", n)
	}
	lost := int(c.ZCard(ctx, s.ShardKeys(5)[0]).Val())
	for _, k := range s.ShardKeys(5) {
		c.Del(ctx, k)
	}
	if lost == 0 {
		t.Fatal("shard 5 held no timer: pick other ids")
	}
	wantLen(t, s, len(items)-lost, 0)
	fc.Advance(every)
	if n := next(); n != lost {
		t.Fatalf("after shard 5 lost its keys, re-armed %d, want %d", n, lost)
	}
	wantLen(t, s, len(items), 0)
}

// TestClusterLocker: the housekeeping jobs' lock is one key, so it works on a cluster like on one Redis: one
// holder at a time, and the unlock script (one key) frees it.
func TestClusterLocker(t *testing.T) {
	ctx := context.Background()
	prefix := uniquePrefix(t)
	admin := clusterClient(t)
	t.Cleanup(func() { dropPrefix(t, admin, prefix) })
	a := scheduler.NewLocker(clusterClient(t), prefix, time.Minute, 0)
	b := scheduler.NewLocker(clusterClient(t), prefix, time.Minute, 0)
	la, err := a.Lock(ctx, "purge")
	if err != nil {
		t.Fatalf("first Lock: %v", err)
	}
	if _, err := b.Lock(ctx, "purge"); err == nil {
		t.Fatal("a second holder got the lock")
	}
	if err := la.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	lb, err := b.Lock(ctx, "purge")
	if err != nil {
		t.Fatalf("Lock after Unlock: %v", err)
	}
	if err := lb.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
