package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
)

// passStore lets every transaction through at once.
func passStore() *heldStore {
	hs := &heldStore{release: make(chan struct{}), entered: make(chan struct{}, 1<<16)}
	close(hs.release)
	go func() {
		for range hs.entered {
		}
	}()
	return hs
}

func (g *grouper) counts() (leaders int64, parked, inflight int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stats.Leaders, g.parked, g.inflight
}

// TestLeadersParkBetweenGroups: a leader that finds the queue empty waits for the next step instead of exiting,
// so steps one after another are all led by one goroutine (a goroutine per group grew its stack afresh each
// time); after its idle time it exits, and the next step starts a new one.
func TestLeadersParkBetweenGroups(t *testing.T) {
	hs := passStore()
	defer close(hs.entered)
	g := &grouper{store: hs, idle: time.Hour}
	for i := range 50 {
		if err := g.update(context.Background(), "t", fmt.Sprintf("i-%d", i), func(*model.Work) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if leaders, _, _ := g.counts(); leaders != 1 {
		t.Errorf("50 steps one after another started %d leaders, want 1", leaders)
	}

	g2 := &grouper{store: hs, idle: 20 * time.Millisecond}
	if err := g2.update(context.Background(), "t", "a", func(*model.Work) error { return nil }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, parked, inflight := g2.counts()
		if parked == 0 && inflight == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the leader did not exit after its idle time: parked %d, in flight %d", parked, inflight)
		}
		time.Sleep(time.Millisecond)
	}
	if err := g2.update(context.Background(), "t", "b", func(*model.Work) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if leaders, _, _ := g2.counts(); leaders != 2 {
		t.Errorf("a step after the leader exited: %d leaders started, want 2", leaders)
	}
}

// TestParkedLeadersUnderLoad: many submitters while leaders park, are woken and give up at the same moments (an
// idle time of a few microseconds): every step completes, never more than groupWorkers leaders exist, and all
// of them are gone at the end.
func TestParkedLeadersUnderLoad(t *testing.T) {
	hs := passStore()
	defer close(hs.entered)
	loadLeaders(t, &grouper{store: hs, idle: time.Microsecond}, 1000, groupWorkers)
}

// loadLeaders runs 32 submitters of n steps each through g and checks that never more than maxLeaders leaders are
// parked or in flight together, that every step completes, and that no leader, wake-up or step is left at the end.
func loadLeaders(t *testing.T, g *grouper, n, maxLeaders int) {
	t.Helper()
	var wg sync.WaitGroup
	for c := range 32 {
		wg.Go(func() {
			for i := range n {
				if err := g.update(context.Background(), "t", fmt.Sprintf("c%d-%d", c, i), func(*model.Work) error { return nil }); err != nil {
					t.Error(err)
					return
				}
				_, parked, inflight := g.counts()
				if parked < 0 || inflight < 0 || parked+inflight > maxLeaders {
					t.Errorf("%d leaders parked and %d in flight: want each ≥ 0 and at most %d together", parked, inflight, maxLeaders)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("steps did not complete: a submitter woke no leader")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, parked, inflight := g.counts()
		g.mu.Lock()
		tokens, flying := len(g.wake), g.flying
		g.mu.Unlock()
		if parked == 0 && inflight == 0 && tokens == 0 && flying == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leaders left: parked %d, in flight %d, %d wake-ups nobody took, %d steps flying", parked, inflight, tokens, flying)
		}
		time.Sleep(time.Millisecond)
	}
}
