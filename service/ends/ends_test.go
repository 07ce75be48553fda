package ends_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/ends"
	"github.com/halley-bpm/halley/service/redisconn"
	"github.com/halley-bpm/halley/service/store/storetest"
)

func run(t *testing.T, b *ends.Bus) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.Run(ctx) // returns nil when ctx is done
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(10 * time.Second): // a bound for a hung test
		return false
	}
}

// TestBus (Redis): an end published on one bus wakes the listeners of that instance on another bus of the same
// prefix, not those of other instances nor a bus of another prefix; a dropped subscription wakes every listener
// (they poll) and is taken up again; without a live subscription Listen says so.
func TestBus(t *testing.T) {
	o, err := redis.ParseURL(storetest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var rb [6]byte
	rand.Read(rb[:])
	prefix := "halley-test:" + hex.EncodeToString(rb[:]) + ":"
	name := "halley-test-ends-" + hex.EncodeToString(rb[:])
	o.ClientName = name // to find this test's subscription among the shared Redis's clients
	rdb := redis.NewClient(o)
	t.Cleanup(func() { rdb.Close() })
	a, _ := ends.New(rdb, prefix, ends.Options{Logger: testkit.Quiet()})
	if _, _, ok := a.Listen("x"); ok {
		t.Fatal("Listen before the subscription is live")
	}
	b, _ := ends.New(rdb, prefix, ends.Options{Logger: testkit.Quiet()})
	other, _ := ends.New(rdb, prefix+"other:", ends.Options{Logger: testkit.Quiet()})
	for _, x := range []*ends.Bus{a, b, other} {
		run(t, x)
	}
	if !testkit.Eventually(10*time.Second, 5*time.Millisecond, func() bool { return a.Live() && b.Live() && other.Live() }) {
		t.Fatal("the buses never subscribed")
	}
	heard, stop, ok := b.Listen("i-1")
	defer stop()
	otherID, stop2, _ := b.Listen("i-2")
	defer stop2()
	elsewhere, stop3, _ := other.Listen("i-1")
	defer stop3()
	if !ok {
		t.Fatal("Listen on a live bus")
	}
	a.Publish("i-1")
	if !closed(heard) {
		t.Fatal("b did not hear the end a published")
	}
	// Both buses of the prefix share one channel, which the other prefix's bus does not subscribe to.
	select {
	case <-otherID:
		t.Fatal("the end of i-1 woke a listener of i-2")
	case <-elsewhere:
		t.Fatal("a bus of another prefix heard the end")
	default:
	}

	// Drop b's subscription (kill this test's pub/sub connections only, by name): its listeners wake, and it
	// subscribes again.
	dropped, stop4, _ := a.Listen("i-3")
	defer stop4()
	clients, err := rdb.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	killed := 0
	for _, line := range strings.Split(clients, "\n") {
		if strings.Contains(line, "name="+name+" ") && strings.Contains(line, "cmd=subscribe") {
			for _, f := range strings.Fields(line) {
				if id, ok := strings.CutPrefix(f, "id="); ok {
					if rdb.Do(context.Background(), "CLIENT", "KILL", "ID", id).Err() == nil {
						killed++
					}
				}
			}
		}
	}
	if killed == 0 {
		t.Fatalf("no subscription of this test found to kill in:\n%s", clients)
	}
	if !closed(dropped) {
		t.Fatal("a listener was not woken when the subscription dropped")
	}
	if !testkit.Eventually(10*time.Second, 5*time.Millisecond, a.Live) {
		t.Fatal("the bus did not subscribe again")
	}
	again, stop5, ok := a.Listen("i-4")
	defer stop5()
	if !ok {
		t.Fatal("Listen after the bus subscribed again")
	}
	b.Publish("i-4")
	if !closed(again) {
		t.Fatal("no end heard after the subscription came back")
	}
}

// TestBusCluster (HALLEY_TEST_REDIS_CLUSTER): on a Redis Cluster an end published through one client (another
// replica's) is heard by a bus subscribed through another.
func TestBusCluster(t *testing.T) {
	url := os.Getenv("HALLEY_TEST_REDIS_CLUSTER")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("HALLEY_TEST_REDIS_CLUSTER is not set: under CI=true the Redis Cluster tests must run (scripts/redis-cluster.sh start)")
		}
		t.Skip("HALLEY_TEST_REDIS_CLUSTER is not set; skipping (CI=true would fail)")
	}
	var rb [6]byte
	rand.Read(rb[:])
	prefix := "halley-test:" + hex.EncodeToString(rb[:]) + ":"
	var buses []*ends.Bus
	for range 2 {
		rdb, err := redisconn.Open(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Close() })
		b, err := ends.New(rdb, prefix, ends.Options{Logger: testkit.Quiet()})
		if err != nil {
			t.Fatal(err)
		}
		run(t, b)
		buses = append(buses, b)
	}
	if !testkit.Eventually(10*time.Second, 5*time.Millisecond, func() bool { return buses[0].Live() && buses[1].Live() }) {
		t.Fatal("the buses never subscribed")
	}
	heard, stop, _ := buses[1].Listen("i-1")
	defer stop()
	buses[0].Publish("i-1")
	if !closed(heard) {
		t.Fatal("the end published through one cluster client was not heard through the other")
	}
}
