package engine_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
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

// TestWaitHearsOtherReplica (Redis): a sync start waiting on replica A hears at once, through the end bus, of the
// end replica B commits: A's clock never moves, so no poll ever fires (polling alone would need A's clock to
// reach its next poll, 5 s on while the bus listens). Without a live subscription the wait polls as before.
func TestWaitHearsOtherReplica(t *testing.T) {
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
	prefix := "halley-test:" + hex.EncodeToString(b[:]) + ":"

	replica := func(bus engine.EndBus) *engine.Engine {
		tpl := template.New(s, template.Options{Clock: h.clk})
		d := enginetest.Deps(t, s, tpl, s)
		d.Ends = bus
		e, err := engine.New(d, engine.Options{Clock: h.clk, CallbackKey: []byte("callback-key-for-tests"), Logger: testkit.Quiet()})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, bEng := replica(runBus(t, rdb, prefix)), replica(runBus(t, rdb, prefix))

	type result struct {
		inst *model.Instance
		err  error
	}
	waitOn := func(e *engine.Engine, corr string) (string, <-chan result) {
		ch := make(chan result, 1)
		go func() {
			_, inst, err := e.StartCompiledAndWait(h.ctx, model.DefaultTenant, "alice", c, json.RawMessage(`{}`), corr, "", time.Minute)
			ch <- result{inst, err}
		}()
		var id string
		if !testkit.Eventually(10*time.Second, 5*time.Millisecond, func() bool {
			got, _, err := s.ListInstances(h.ctx, model.InstanceFilter{TenantID: model.DefaultTenant, CorrelationID: corr, Page: model.Page{Limit: 5}})
			if err == nil && len(got) == 1 {
				id = got[0].ID
			}
			return id != ""
		}) {
			t.Fatalf("instance %s never started", corr)
		}
		return id, ch
	}

	id, ch := waitOn(a, "bus")
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
	deadBus, err := ends.New(down, prefix, ends.Options{Logger: testkit.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	polling := replica(deadBus)
	id, ch = waitOn(polling, "no-bus")
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
	prefix := "halley-test:" + hex.EncodeToString(b[:]) + ":"
	replica := func(bus engine.EndBus) *engine.Engine {
		tpl := template.New(s, template.Options{Clock: h.clk})
		d := enginetest.Deps(t, s, tpl, s)
		d.Ends = bus
		e, err := engine.New(d, engine.Options{Clock: h.clk, CallbackKey: []byte("callback-key-for-tests"), Logger: testkit.Quiet()})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	busB := runBus(t, rdb, prefix)
	a, bEng := replica(runBus(t, rdb, prefix)), replica(busB)
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
	waitOn := func(e *engine.Engine, corr string) (string, <-chan error) {
		ch := make(chan error, 1)
		go func() {
			_, inst, err := e.StartCompiledAndWait(h.ctx, model.DefaultTenant, "alice", c, json.RawMessage(`{}`), corr, "", time.Minute)
			if err == nil && (inst == nil || inst.Status != model.StatusCompleted) {
				err = errors.New("the wait did not see the end")
			}
			ch <- err
		}()
		var id string
		if !testkit.Eventually(10*time.Second, 5*time.Millisecond, func() bool {
			got, _, err := s.ListInstances(h.ctx, model.InstanceFilter{TenantID: model.DefaultTenant, CorrelationID: corr, Page: model.Page{Limit: 5}})
			if err == nil && len(got) == 1 {
				id = got[0].ID
			}
			return id != ""
		}) {
			t.Fatalf("instance %s never started", corr)
		}
		return id, ch
	}
	here, ch := waitOn(a, "here")
	if _, err := a.Approve(h.ctx, as("bob"), h.task(here, "lead", "bob").ID, "", nil); err != nil {
		t.Fatal(err)
	}
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	// Awaited on A, ended on B: the one message.
	there, ch := waitOn(a, "there")
	if _, err := bEng.Approve(h.ctx, as("bob"), h.task(there, "lead", "bob").ID, "", nil); err != nil {
		t.Fatal(err)
	}
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
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
