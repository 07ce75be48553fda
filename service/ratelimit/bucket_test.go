package ratelimit_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/ratelimit"
)

// TestBuckets: a key gets bursts of twice the rate, then one event per 1/rate, with the wait until the next one;
// keys do not share a bucket; 0 is no limit; 100 goroutines at once on one key get exactly the burst.
func TestBuckets(t *testing.T) {
	if b := ratelimit.NewBuckets(0); b != nil {
		t.Fatal("rate 0 is no limit (nil)")
	}
	var none *ratelimit.Buckets
	if ok, _ := none.Allow("1.2.3.4", time.Now()); !ok {
		t.Fatal("nil Buckets refused")
	}

	b := ratelimit.NewBuckets(2) // bursts of 4, then one every 500 ms
	now := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	for i := range 4 {
		if ok, _ := b.Allow("a", now); !ok {
			t.Fatalf("event %d of the burst refused", i+1)
		}
	}
	ok, wait := b.Allow("a", now)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("past the burst: %v, wait %v; want refused for 500ms", ok, wait)
	}
	if ok, _ := b.Allow("b", now); !ok {
		t.Fatal("another key shares the bucket")
	}
	if ok, _ := b.Allow("a", now.Add(499*time.Millisecond)); ok {
		t.Fatal("allowed before the wait it gave")
	}
	if ok, _ := b.Allow("a", now.Add(500*time.Millisecond)); !ok {
		t.Fatal("refused after the wait it gave (a refusal must not use up a token)")
	}

	// A race on one key: the burst and no more.
	race := ratelimit.NewBuckets(5)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if ok, _ := race.Allow("c", now); ok {
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := allowed.Load(); n != 10 {
		t.Fatalf("%d of 100 concurrent events allowed; want the burst, 10", n)
	}
}
