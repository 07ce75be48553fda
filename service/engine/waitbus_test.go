package engine_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/ends"
	"github.com/halley-bpm/halley/service/engine"
	"github.com/halley-bpm/halley/service/engine/enginetest"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
	"github.com/halley-bpm/halley/service/template"
)

// runBus runs an end bus over Redis under prefix until the test ends and returns it once it listens.
func runBus(t *testing.T, rdb redis.UniversalClient, prefix string) *ends.Bus {
	t.Helper()
	bus, err := ends.New(rdb, prefix, ends.Options{Logger: testkit.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = bus.Run(ctx) // returns nil when ctx is done
	}()
	t.Cleanup(func() { cancel(); <-done })
	if !testkit.Eventually(10*time.Second, 5*time.Millisecond, bus.Live) {
		t.Fatal("the end bus never subscribed")
	}
	return bus
}

// busReplicas is a SQLite store with the wait template published, a Redis client and a key prefix of the test's
// own, and replicas made on them: engines sharing the store, each with the end bus given.
type busReplicas struct {
	h      *harness
	s      *store.Store
	c      *template.Compiled
	rdb    *redis.Client
	prefix string
}

func newBusReplicas(t *testing.T) *busReplicas {
	t.Helper()
	s := storetest.Open(t, store.SQLite)
	h := newHarness(t, s)
	h.users("bob")
	h.publish("wait", waitDef)
	c, err := h.tpl.Compiled(h.ctx, model.DefaultTenant, "wait", 0)
	if err != nil {
		t.Fatal(err)
	}
	o, err := redis.ParseURL(storetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	var b [6]byte
	rand.Read(b[:])
	return &busReplicas{h: h, s: s, c: c, rdb: rdb, prefix: "halley-test:" + hex.EncodeToString(b[:]) + ":"}
}

func (f *busReplicas) replica(t *testing.T, bus engine.EndBus) *engine.Engine {
	t.Helper()
	tpl := template.New(f.s, template.Options{Clock: f.h.clk})
	d := enginetest.Deps(t, f.s, tpl, f.s)
	d.Ends = bus
	e, err := engine.New(d, engine.Options{Clock: f.h.clk, CallbackKey: []byte("callback-key-for-tests"), Logger: testkit.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type waitResult struct {
	inst *model.Instance
	err  error
}

// waitOn sync-starts the wait template on e under correlation id corr and returns the instance's id once it is
// stored, and where the wait's answer comes.
func (f *busReplicas) waitOn(t *testing.T, e *engine.Engine, corr string) (string, <-chan waitResult) {
	t.Helper()
	ch := make(chan waitResult, 1)
	go func() {
		_, inst, err := e.StartCompiledAndWait(f.h.ctx, model.DefaultTenant, "alice", f.c, json.RawMessage(`{}`), corr, "", time.Minute)
		ch <- waitResult{inst, err}
	}()
	var id string
	if !testkit.Eventually(10*time.Second, 5*time.Millisecond, func() bool {
		got, _, err := f.s.ListInstances(f.h.ctx, model.InstanceFilter{TenantID: model.DefaultTenant, CorrelationID: corr, Page: model.Page{Limit: 5}})
		if err == nil && len(got) == 1 {
			id = got[0].ID
		}
		return id != ""
	}) {
		t.Fatalf("instance %s never started", corr)
	}
	return id, ch
}

// TestWaitHearsOtherReplica (Redis): a sync start waiting on replica A hears at once, through the end bus, of the
// end replica B commits: A's clock never moves, so no poll ever fires (polling alone would need A's clock to
// reach its next poll, 5 s on while the bus listens). Without a live subscription the wait polls as before.
func TestWaitHearsOtherReplica(t *testing.T) {
	f := newBusReplicas(t)
	h := f.h
	a, bEng := f.replica(t, runBus(t, f.rdb, f.prefix)), f.replica(t, runBus(t, f.rdb, f.prefix))

	id, ch := f.waitOn(t, a, "bus")
	if _, err := bEng.Approve(h.ctx, as("bob"), h.task(id, "lead", "bob").ID, "", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		if r.err != nil || r.inst == nil || r.inst.ID != id || r.inst.Status != model.StatusCompleted {
			t.Fatalf("the end on B, as A answers it: %+v %v", r.inst, r.err)
		}
	case <-time.After(10 * time.Second): // a bound for a hung test; the clock that drives polls never moved
		t.Fatal("A did not hear of the end committed on B (its clock never moved, so no poll could have found it)")
	}

	// Fallback: a bus whose Redis is unreachable never listens; the wait polls on the engine's clock.
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	t.Cleanup(func() { down.Close() })
	deadBus, err := ends.New(down, f.prefix, ends.Options{Logger: testkit.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	polling := f.replica(t, deadBus)
	id, ch = f.waitOn(t, polling, "no-bus")
	if _, err := bEng.Approve(h.ctx, as("bob"), h.task(id, "lead", "bob").ID, "", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-ch:
		t.Fatalf("answered before any poll without a bus: %+v", r.inst)
	default:
	}
	h.clk.BlockUntil(1)
	h.clk.Advance(waitPollFirst)
	select {
	case r := <-ch:
		if r.err != nil || r.inst == nil || r.inst.Status != model.StatusCompleted {
			t.Fatalf("polled end: %+v %v", r.inst, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait without a bus did not poll")
	}
}

const waitPollFirst = 250 * time.Millisecond

// TestEndsPublishedForWaitsElsewhere (Redis): the end bus carries only the ends a wait on another replica needs —
// those of instances a sync start waits for, committed by a replica other than the wait's. An instance started
// without a wait, or ended where its wait is, costs no Redis message. Pub/sub keeps one publisher's order, so the
// one message a subscriber hears first is the first end that was published.
func TestEndsPublishedForWaitsElsewhere(t *testing.T) {
	f := newBusReplicas(t)
	h, rdb := f.h, f.rdb
	busB := runBus(t, rdb, f.prefix)
	a, bEng := f.replica(t, runBus(t, rdb, f.prefix)), f.replica(t, busB)
	sub := rdb.Subscribe(h.ctx, busB.Channel())
	t.Cleanup(func() { sub.Close() })
	if _, err := sub.Receive(h.ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}

	// Not awaited, ended on B: no message.
	plain := h.start("alice", "wait", `{}`)
	if _, err := bEng.Approve(h.ctx, as("bob"), h.task(plain, "lead", "bob").ID, "", nil); err != nil {
		t.Fatal(err)
	}
	// Awaited on A, ended on A: A's wait hears it in process; no message.
	ended := func(ch <-chan waitResult) {
		t.Helper()
		if r := <-ch; r.err != nil || r.inst == nil || r.inst.Status != model.StatusCompleted {
			t.Fatalf("the wait: %+v %v; want the completed instance", r.inst, r.err)
		}
	}
	here, ch := f.waitOn(t, a, "here")
	if _, err := a.Approve(h.ctx, as("bob"), h.task(here, "lead", "bob").ID, "", nil); err != nil {
		t.Fatal(err)
	}
	ended(ch)
	// Awaited on A, ended on B: the one message.
	there, ch := f.waitOn(t, a, "there")
	if _, err := bEng.Approve(h.ctx, as("bob"), h.task(there, "lead", "bob").ID, "", nil); err != nil {
		t.Fatal(err)
	}
	ended(ch)
	rctx, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	msg, err := sub.ReceiveMessage(rctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Payload != there {
		t.Fatalf("first end published: %s; want %s (awaited elsewhere), not %s (not awaited) nor %s (awaited where it ended)", msg.Payload, there, plain, here)
	}
}
