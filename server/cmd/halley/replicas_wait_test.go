package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestSyncWaitAcrossReplicas (MySQL + Redis, two processes): a sync API start waits on A, the approval that ends
// the instance goes through B; B publishes the end on <prefix>ends:<db> (the test hears it on the channel) and A
// answers 200 completed. Two calls from one IP over the two replicas share HALLEY_TRIGGER_RATE_LIMIT (a burst of
// one): the second, on B, is 429.
func TestSyncWaitAcrossReplicas(t *testing.T) {
	bin := buildHalley(t)
	dbURL := storetest.URL(t, store.MySQL)
	redisURL := storetest.RedisURL(t)
	prefix := uniqueRedisPrefix(t, redisURL)
	env := faultEnv("HALLEY_DATABASE_URL="+dbURL, "HALLEY_REDIS_URL="+redisURL, "HALLEY_REDIS_PREFIX="+prefix, "HALLEY_TRIGGER_RATE_LIMIT=0.01")
	a := startHalley(t, "halley-a", bin, env...)
	b := startHalley(t, "halley-b", bin, env...)
	cl := newAPI()
	cl.login(t, a.URL())
	cl.publish(t, a.URL(), "paid", map[string]any{"nodes": []any{
		map[string]any{"id": "start", "type": "start", "trigger": map[string]any{"kind": "sync-api", "module": "erp", "function": "pay"}},
		map[string]any{"id": "lead", "type": "approval", "approvers": map[string]any{"users": []string{"admin"}}},
		map[string]any{"id": "end", "type": "end"},
	}, "edges": []any{map[string]any{"from": "start", "to": "lead"}, map[string]any{"from": "lead", "to": "end"}}})

	o, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
	ps := rdb.Subscribe(t.Context(), prefix+"ends:"+strconv.Itoa(o.DB))
	defer ps.Close()
	if _, err := ps.Receive(t.Context()); err != nil { // the subscription is live
		t.Fatal(err)
	}

	answer := make(chan reply, 1)
	go func() {
		caller := &api{hc: newAPI().hc}
		answer <- caller.call(context.Background(), a.URL(), "POST", "/api/v1/trigger/sync/erp/pay?wait=120", map[string]any{"amount": 3}, "")
	}()
	var instance string
	if !testkit.Eventually(30*time.Second, 20*time.Millisecond, func() bool {
		items, _ := cl.mustCall(t, b.URL(), "GET", "/api/v1/instances?template=paid", nil)["items"].([]any)
		if len(items) == 1 {
			instance, _ = items[0].(map[string]any)["id"].(string)
		}
		return instance != ""
	}) {
		t.Fatal("the sync start on A never showed")
	}
	var tasks []string
	if !testkit.Eventually(30*time.Second, 20*time.Millisecond, func() bool {
		tasks, _ = cl.pendingTasks(t.Context(), b.URL(), instance)
		return len(tasks) == 1
	}) {
		t.Fatal("no pending task")
	}
	approved := time.Now()
	cl.mustCall(t, b.URL(), "POST", "/api/v1/tasks/"+tasks[0]+"/approve", map[string]any{})

	msg, err := ps.ReceiveMessage(t.Context())
	if err != nil || msg.Payload != instance {
		t.Fatalf("on the ends channel: %v %v; want %s", msg, err, instance)
	}
	select {
	case r := <-answer:
		if r.status != 200 || r.body["status"] != "completed" || r.body["instance_id"] != instance {
			t.Fatalf("A's answer: %d %v %v", r.status, r.body, r.err)
		}
		t.Logf("A answered %s after the approval on B", time.Since(approved).Round(time.Millisecond))
	case <-time.After(30 * time.Second):
		t.Fatal("A did not answer")
	}

	// The trigger's limit (one call per 100 s per IP) is shared: the call on A used it, B refuses.
	r := cl.call(t.Context(), b.URL(), "POST", "/api/v1/trigger/sync/erp/pay?wait=0", map[string]any{}, "")
	if r.status != 429 || r.code() != "rate_limited" {
		t.Fatalf("a second call through B: %d %v", r.status, r.body)
	}
}
