package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// startRedisCluster runs a private Redis Cluster of three masters on free loopback ports, with append-only files
// fsynced on every write: a master killed with SIGKILL comes back with every key it acknowledged. It returns the
// masters and the redis+cluster:// URL of HALLEY_REDIS_URL.
func startRedisCluster(t *testing.T) ([]*service, string) {
	t.Helper()
	bin := testkit.RequireTool(t, "redis-server", "")
	cli := testkit.RequireTool(t, "redis-cli", "")
	var nodes []*service
	var addrs []string
	for i := range 3 {
		port := freePort(t)
		s := &service{t: t, name: fmt.Sprintf("redis-cluster-%d", i), port: port, logs: &syncBuffer{},
			args: []string{bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000", "--appendonly", "yes",
				"--appendfsync", "always", "--save", "", "--dir", t.TempDir(), "--daemonize", "no"}}
		rdb := redis.NewClient(&redis.Options{Addr: s.addr(), DialTimeout: time.Second, MaxRetries: -1})
		s.up = func() bool { return rdb.Ping(context.Background()).Err() == nil }
		t.Cleanup(func() { rdb.Close(); s.stop(syscall.SIGKILL) })
		s.start()
		nodes = append(nodes, s)
		addrs = append(addrs, s.addr())
	}
	out, err := exec.Command(cli, append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range nodes {
		waitClusterOK(t, n)
	}
	return nodes, "redis+cluster://" + strings.Join(addrs, ",")
}

// waitClusterOK waits until the node says cluster_state:ok.
func waitClusterOK(t *testing.T, n *service) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: n.addr()})
	defer rdb.Close()
	if !testkit.Eventually(30*time.Second, 50*time.Millisecond, func() bool {
		info, err := rdb.ClusterInfo(context.Background()).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	}) {
		t.Fatalf("%s: cluster_state is not ok:\n%s", n.name, tail(n.logs.String(), 2000))
	}
}

// TestFaultRedisClusterMasterRestart runs two halley replicas on a 3-master Redis Cluster with the timers in 8
// shards, arms timers (delays and approval timeouts) under load, and kills one master with SIGKILL mid-run, then
// starts it again. The masters write an fsynced append-only file, so the restarted one has every timer it held:
// every timer must fire exactly once, no instance may be left behind, and no replica may have had to re-arm lost
// timers from the database.
func TestFaultRedisClusterMasterRestart(t *testing.T) {
	requireFaults(t)
	t.Parallel()
	bin := buildHalley(t)
	dbURL := storetest.URL(t, store.MySQL)
	masters, clusterURL := startRedisCluster(t)
	env := faultEnv("HALLEY_DATABASE_URL="+dbURL, "HALLEY_REDIS_URL="+clusterURL, "HALLEY_TIMER_SHARDS=8",
		"HALLEY_REDIS_CHECK_INTERVAL=1s")
	a := startHalley(t, "halley-a", bin, env...)
	b := startHalley(t, "halley-b", bin, env...)
	cl := newAPI()
	cl.login(t, a.URL())
	templates := []string{"faults-cluster-delay-2s", "faults-cluster-delay-4s", "faults-cluster-timeout-3s"}
	delay := func(d string) map[string]any {
		return map[string]any{"nodes": []any{
			map[string]any{"id": "start", "type": "start", "trigger": map[string]any{"kind": "manual"}},
			map[string]any{"id": "wait", "type": "delay", "interval": d},
			map[string]any{"id": "end", "type": "end"},
		}, "edges": []any{map[string]any{"from": "start", "to": "wait"}, map[string]any{"from": "wait", "to": "end"}}}
	}
	cl.publish(t, a.URL(), templates[0], delay("2s"))
	cl.publish(t, a.URL(), templates[1], delay("4s"))
	cl.publish(t, a.URL(), templates[2], map[string]any{"nodes": []any{
		map[string]any{"id": "start", "type": "start", "trigger": map[string]any{"kind": "manual"}},
		map[string]any{"id": "a", "type": "approval", "approvers": map[string]any{"users": []string{"admin"}}, "sign": "or",
			"timeout": "3s", "on_timeout": "approve"},
		map[string]any{"id": "end", "type": "end"},
	}, "edges": []any{map[string]any{"from": "start", "to": "a"}, map[string]any{"from": "a", "to": "end"}}})

	l := newLedger()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan struct{})
	const workers = 6
	bases := []func() string{a.URL, b.URL}
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for n := 0; ctx.Err() == nil; n++ {
				key := templates[(w+n)%len(templates)]
				idem := fmt.Sprintf("%s-w%d-%d", key, w, n)
				body := map[string]any{"template": key, "correlation_id": idem}
				r := cl.call(ctx, bases[w%2](), "POST", "/api/v1/instances", body, idem)
				if ctx.Err() != nil {
					return
				}
				l.count("start", r)
				l.record(request{"/api/v1/instances", body, idem}, r)
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	time.Sleep(3 * time.Second) // timers armed in every shard, some firing
	victim := masters[1]
	keysBefore := dbsize(t, victim)
	l.setPhase("master down")
	victim.stop(syscall.SIGKILL)
	downAt := time.Now()
	time.Sleep(1500 * time.Millisecond) // timers of its shards fall due while it is down
	victim.start()
	for _, m := range masters {
		waitClusterOK(t, m)
	}
	downFor := time.Since(downAt)
	keysAfter := dbsize(t, victim)
	l.setPhase("after")
	time.Sleep(3 * time.Second)
	stop()
	for range workers {
		<-done
	}

	db := openSQL(t, dbURL)
	l.retryLost(t, cl, b.URL())
	// Every timer is due at most 4 s after its instance started; allow for retries and a loaded machine.
	if !testkit.Eventually(40*time.Second, 50*time.Millisecond, func() bool {
		return queryInt(t, db, "SELECT COUNT(*) FROM timers WHERE status = 'pending'") == 0 &&
			queryInt(t, db, "SELECT COUNT(*) FROM instances WHERE status = 'running'") == 0
	}) {
		t.Fatalf("timers never fired: %d pending timers, %d running instances",
			queryInt(t, db, "SELECT COUNT(*) FROM timers WHERE status = 'pending'"),
			queryInt(t, db, "SELECT COUNT(*) FROM instances WHERE status = 'running'"))
	}
	checkAcknowledged(t, db, l)
	armed := queryInt(t, db, "SELECT COUNT(*) FROM timers")
	fired := queryInt(t, db, "SELECT COUNT(*) FROM timers WHERE status = 'fired'")
	firings := checkFiredOnce(t, db)
	if armed == 0 || fired != armed || firings != armed {
		t.Errorf("timers: %d armed, %d fired, %d timer.fired history rows", armed, fired, firings)
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM instances WHERE status <> 'completed'"); n != 0 {
		t.Errorf("%d instances did not complete", n)
	}
	// The restarted master kept its keys (append-only file), so no replica re-armed timers from the database.
	if keysBefore == 0 || keysAfter == 0 {
		t.Errorf("the killed master held %d keys before and %d after its restart; want its shards' keys kept", keysBefore, keysAfter)
	}
	for _, h := range []*halleyProc{a, b} {
		if logs := h.logs.String(); strings.Contains(logs, "re-armed timers after the scheduler lost them") {
			t.Errorf("%s re-armed timers from the database: the cluster lost timers across the master restart", h.name)
		}
	}
	var lateAvg, lateMax float64
	if err := db.QueryRow("SELECT AVG(TIMESTAMPDIFF(MICROSECOND, due_at, fired_at)) / 1000, MAX(TIMESTAMPDIFF(MICROSECOND, due_at, fired_at)) / 1000 FROM timers").Scan(&lateAvg, &lateMax); err != nil {
		t.Errorf("timers' lateness: %v", err)
	}
	t.Logf("redis cluster master SIGKILL + restart (%v down, %d keys before, %d after): %d timers armed in 8 shards over 2 replicas, %d fired once each; lateness avg %.0f ms, max %.0f ms; %s",
		downFor.Round(time.Millisecond), keysBefore, keysAfter, armed, fired, lateAvg, lateMax, l)
}

// dbsize is how many keys a cluster node holds.
func dbsize(t *testing.T, n *service) int64 {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: n.addr()})
	defer rdb.Close()
	k, err := rdb.DBSize(context.Background()).Result()
	if err != nil {
		t.Errorf("%s: DBSIZE: %v", n.name, err)
	}
	return k
}
