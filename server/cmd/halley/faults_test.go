package main

// Fault tests (docs/faults.md): real halley processes under load while a process, Redis or MySQL fails. They run
// with HALLEY_FAULTS=1 (`make faults`); each starts its own processes on loopback ports and stops them.

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestFaultKillUnderStepLoad runs two halley processes on one MySQL database and one Redis under a load of starts
// and approvals sent to both, kills one with SIGKILL mid-load and starts it again. Every acknowledged request
// must be in the database exactly once, no task may have two decisions, and every running instance must still
// be able to finish.
func TestFaultKillUnderStepLoad(t *testing.T) {
	requireFaults(t)
	t.Parallel()
	bin := buildHalley(t)
	dbURL := storetest.URL(t, store.MySQL)
	rs := startRedis(t)
	env := faultEnv("HALLEY_DATABASE_URL="+dbURL, "HALLEY_REDIS_URL=redis://"+rs.addr()+"/0")
	a := startHalley(t, "halley-a", bin, env...)
	b := startHalley(t, "halley-b", bin, env...)
	cl := newAPI()
	cl.login(t, a.URL())
	const key = "faults-kill"
	cl.publish(t, a.URL(), key, approvalsDefinition(3))

	l := newLedger()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	load := stepLoad(ctx, cl, 8, key, func() []string { return []string{a.URL(), b.URL()} }, l)
	time.Sleep(3 * time.Second) // load on both processes
	l.setPhase("during")
	a.kill()
	killedAt := time.Now()
	time.Sleep(time.Second) // b alone
	a.start()
	restart := time.Since(killedAt)
	l.setPhase("after")
	time.Sleep(3 * time.Second) // load on both again
	stop()
	load.Wait()

	db := openSQL(t, dbURL)
	retries := summarize(t, db, l.retryLost(t, cl, b.URL()))
	checkAcknowledged(t, db, l)
	finished := finishRunning(t, cl, b.URL(), db)
	t.Logf("kill -9 of 1 of 2 processes: back and ready %v after the kill; %s", restart.Round(time.Millisecond), l)
	t.Logf("requests without an answer, sent again with their Idempotency-Key: %v", retries)
	t.Logf("instances: %d in the database, %d were running at the end and all finished; %d history events",
		queryInt(t, db, "SELECT COUNT(*) FROM instances"), finished, len(historyEvents(t, db, "")))
}

// TestFaultRedisFlushAndRestart arms timers (delay nodes and approval timeouts) under load while the private
// Redis of the scheduler is flushed and later restarted without persistence: every timer must still fire, once.
func TestFaultRedisFlushAndRestart(t *testing.T) {
	requireFaults(t)
	t.Parallel()
	bin := buildHalley(t)
	dbURL := storetest.URL(t, store.MySQL)
	rs := startRedis(t)
	h := startHalley(t, "halley", bin, faultEnv("HALLEY_DATABASE_URL="+dbURL, "HALLEY_REDIS_URL=redis://"+rs.addr()+"/0",
		"HALLEY_REDIS_CHECK_INTERVAL=1s")...)
	cl := newAPI()
	cl.login(t, h.URL())
	templates := []string{"faults-delay-2s", "faults-delay-5s", "faults-timeout-3s"}
	delay := func(d string) map[string]any {
		return map[string]any{"nodes": []any{
			map[string]any{"id": "start", "type": "start", "trigger": map[string]any{"kind": "manual"}},
			map[string]any{"id": "wait", "type": "delay", "interval": d},
			map[string]any{"id": "end", "type": "end"},
		}, "edges": []any{map[string]any{"from": "start", "to": "wait"}, map[string]any{"from": "wait", "to": "end"}}}
	}
	cl.publish(t, h.URL(), templates[0], delay("2s"))
	cl.publish(t, h.URL(), templates[1], delay("5s"))
	cl.publish(t, h.URL(), templates[2], map[string]any{"nodes": []any{
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
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for n := 0; ctx.Err() == nil; n++ {
				key := templates[(w+n)%len(templates)]
				idem := fmt.Sprintf("%s-w%d-%d", key, w, n)
				body := map[string]any{"template": key, "correlation_id": idem}
				r := cl.call(ctx, h.URL(), "POST", "/api/v1/instances", body, idem)
				if ctx.Err() != nil {
					return
				}
				l.count("start", r)
				l.record(request{"/api/v1/instances", body, idem}, r)
				time.Sleep(20 * time.Millisecond) // a steady arming rate, not a flood
			}
		}()
	}
	rdb := redis.NewClient(&redis.Options{Addr: rs.addr()})
	defer rdb.Close()
	time.Sleep(2500 * time.Millisecond)
	l.setPhase("flushed")
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	l.setPhase("restart")
	rs.stop(syscall.SIGTERM) // --save "": the restart loses every key
	downAt := time.Now()
	notReady := testkit.Eventually(10*time.Second, 50*time.Millisecond, func() bool { return readyz(h.URL()) == http.StatusServiceUnavailable })
	time.Sleep(time.Second)
	rs.start()
	ready := testkit.Eventually(30*time.Second, 50*time.Millisecond, func() bool { return readyz(h.URL()) == http.StatusOK })
	readyAfter := time.Since(downAt)
	l.setPhase("after")
	time.Sleep(2 * time.Second)
	stop()
	for range workers {
		<-done
	}
	if !notReady || !ready {
		t.Errorf("/readyz while redis was down: 503 seen %v; 200 again %v", notReady, ready)
	}

	db := openSQL(t, dbURL)
	l.retryLost(t, cl, h.URL())
	// Every timer is due at most 5 s after its instance started; allow for the re-arm and a loaded machine.
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
	if fired != armed || firings != armed {
		t.Errorf("timers: %d armed, %d fired, %d timer.fired history rows", armed, fired, firings)
	}
	if n := queryInt(t, db, "SELECT COUNT(*) FROM instances WHERE status <> 'completed'"); n != 0 {
		t.Errorf("%d instances did not complete", n)
	}
	var lateAvg, lateMax float64
	if err := db.QueryRow("SELECT AVG(TIMESTAMPDIFF(MICROSECOND, due_at, fired_at)) / 1000, MAX(TIMESTAMPDIFF(MICROSECOND, due_at, fired_at)) / 1000 FROM timers").Scan(&lateAvg, &lateMax); err != nil {
		t.Errorf("timers' lateness: %v", err)
	}
	t.Logf("redis FLUSHALL + restart: ready again %v after the stop; %d timers armed, %d fired once each; lateness avg %.0f ms, max %.0f ms; %s",
		readyAfter.Round(time.Millisecond), armed, fired, lateAvg, lateMax, l)
}

// TestFaultMySQLRestart runs halley on a private mariadbd under load, stops the database (SIGTERM, then SIGKILL)
// and starts it again: /readyz must say 503 while it is down, halley must recover by itself, and nothing
// acknowledged may be lost.
func TestFaultMySQLRestart(t *testing.T) {
	requireFaults(t)
	t.Parallel()
	bin := buildHalley(t)
	my := startMariaDB(t)
	if _, err := my.mysql(t, "mysql").Exec("CREATE DATABASE halley CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatal(err)
	}
	h := startHalley(t, "halley", bin, faultEnv("HALLEY_DATABASE_URL="+my.mysqlURL("halley"))...)
	cl := newAPI()
	cl.login(t, h.URL())
	const key = "faults-mysql"
	cl.publish(t, h.URL(), key, approvalsDefinition(2))

	l := newLedger()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	load := stepLoad(ctx, cl, 6, key, func() []string { return []string{h.URL()} }, l)
	var figures []string
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		time.Sleep(2 * time.Second)
		l.setPhase("down " + sig.String())
		my.stop(sig)
		downAt := time.Now()
		if !testkit.Eventually(10*time.Second, 50*time.Millisecond, func() bool { return readyz(h.URL()) == http.StatusServiceUnavailable }) {
			t.Errorf("%v: /readyz never answered 503 while the database was down", sig)
		}
		notReady := time.Since(downAt)
		time.Sleep(2 * time.Second)
		my.start()
		upAt := time.Now()
		if !testkit.Eventually(30*time.Second, 50*time.Millisecond, func() bool { return readyz(h.URL()) == http.StatusOK }) {
			t.Fatalf("%v: halley did not recover after the database came back", sig)
		}
		figures = append(figures, fmt.Sprintf("%v: 503 after %v, ready %v after mariadbd was up (%v outage)",
			sig, notReady.Round(time.Millisecond), time.Since(upAt).Round(time.Millisecond), time.Since(downAt).Round(time.Millisecond)))
		l.setPhase("after " + sig.String())
	}
	time.Sleep(2 * time.Second)
	stop()
	load.Wait()

	if n := l.outcomes("down", "503 unavailable"); n == 0 {
		t.Errorf("no request was answered 503 unavailable while the database was down")
	}
	db := my.mysql(t, "halley")
	retries := summarize(t, db, l.retryLost(t, cl, h.URL()))
	checkAcknowledged(t, db, l)
	finished := finishRunning(t, cl, h.URL(), db)
	t.Logf("mysql restarts: %v; %s", figures, l)
	t.Logf("requests without an answer, sent again with their Idempotency-Key: %v; %d running instances finished", retries, finished)
}
