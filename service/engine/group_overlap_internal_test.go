package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
)

// sizedStore is a heldStore that records the size of every transaction it is given.
type sizedStore struct {
	*heldStore
	mu    sync.Mutex
	sizes []int
}

func (s *sizedStore) record(n int) {
	s.mu.Lock()
	s.sizes = append(s.sizes, n)
	s.mu.Unlock()
}

func (s *sizedStore) last() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sizes), s.sizes[len(s.sizes)-1]
}

func (s *sizedStore) UpdateInstance(ctx context.Context, tenant, id string, fn func(w *model.Work) error) error {
	s.record(1)
	return s.heldStore.UpdateInstance(ctx, tenant, id, fn)
}

func (s *sizedStore) UpdateInstances(ctx context.Context, tenant string, ids []string, fn func(w *model.Work) error, creates ...*model.Work) (map[string]error, error) {
	s.record(len(ids) + len(creates))
	return s.heldStore.UpdateInstances(ctx, tenant, ids, fn, creates...)
}

// TestOverlappingGroupWaitsForAFullQueue: with one group allowed and overlap on, a second group starts while the
// first is at the database only once the queue holds as many steps as the first: three steps queued behind a
// group of four wait, the fourth starts them as a group of four; never more than two groups at once.
func TestOverlappingGroupWaitsForAFullQueue(t *testing.T) {
	hs := &sizedStore{heldStore: &heldStore{release: make(chan struct{}), entered: make(chan struct{}, 64)}}
	g := &grouper{store: hs, workersMax: 1, overlap: true}
	expectNone := func(what string) {
		t.Helper()
		select {
		case <-hs.entered:
			t.Fatalf("%s: a transaction started", what)
		case <-time.After(100 * time.Millisecond):
		}
	}

	expectOne := func(what string) {
		t.Helper()
		select {
		case <-hs.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no transaction started", what)
		}
	}

	a := submitOneByOne(t, g, hs.heldStore, "a", 1) // held alone
	expectOne("the first step")
	b := submitOneByOne(t, g, hs.heldStore, "b", 1) // queue 1 ≥ 1 step in flight: a second group
	expectOne("a step queued behind a step at the database")
	c := submitOneByOne(t, g, hs.heldStore, "c", 4) // two groups in flight: queued
	expectNone("two groups in flight and four steps queued")

	hs.release <- struct{}{} // a or b ends; its leader takes the four
	expectOne("a group ended with four queued")
	if n, size := hs.last(); n != 3 || size != 4 {
		t.Fatalf("transaction %d of %d steps, want the third of 4", n, size)
	}
	hs.release <- struct{}{} // the other single ends; the queue is empty: its leader parks
	a.Wait()
	b.Wait()

	d := submitOneByOne(t, g, hs.heldStore, "d", 3)
	expectNone("three steps queued behind a group of four")
	var e sync.WaitGroup
	e.Go(func() {
		if err := g.update(context.Background(), "t", "e", func(*model.Work) error { return nil }); err != nil {
			t.Error(err)
		}
	})
	expectOne("four steps queued behind a group of four")
	if n, size := hs.last(); n != 4 || size != 4 {
		t.Fatalf("transaction %d of %d steps, want the fourth of 4", n, size)
	}
	if p := hs.peak.Load(); p != 2 {
		t.Fatalf("peak %d transactions at once, want 2", p)
	}
	go func() {
		for range hs.entered {
		}
	}()
	close(hs.release)
	for _, wg := range []*sync.WaitGroup{c, d, &e} {
		wg.Wait()
	}
	close(hs.entered)
}

// TestNoOverlapWhileTimersFire: while timers fire, overlap or not, one group at a time.
func TestNoOverlapWhileTimersFire(t *testing.T) {
	hs := &heldStore{release: make(chan struct{}), entered: make(chan struct{}, 64)}
	g := &grouper{store: hs, workersMax: 1, overlap: true}
	g.firing.Add(1)
	wg := submitOneByOne(t, g, hs, "inst", 20)
	<-hs.entered
	select {
	case <-hs.entered:
		t.Fatal("a second transaction started while timers fire")
	case <-time.After(100 * time.Millisecond):
	}
	go func() {
		for range hs.entered {
		}
	}()
	close(hs.release)
	wg.Wait()
	close(hs.entered)
	if p := hs.peak.Load(); p != 1 {
		t.Fatalf("peak %d transactions at once, want 1", p)
	}
}

// TestOverlapUnderLoad: many submitters with overlap on and leaders parking and waking at the same moments: every
// step completes, never more than workers + 1 leaders exist, and all of them are gone at the end.
func TestOverlapUnderLoad(t *testing.T) {
	hs := passStore()
	defer close(hs.entered)
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			loadLeaders(t, &grouper{store: hs, workersMax: workers, overlap: true, idle: time.Microsecond}, 500, workers+1)
		})
	}
}
