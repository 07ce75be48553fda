package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
)

// heldStore holds every transaction until the test releases it and counts how many are held at once.
type heldStore struct {
	Store   // only the methods below are called
	release chan struct{}
	now     atomic.Int32
	peak    atomic.Int32
	entered chan struct{}
}

func (h *heldStore) hold() {
	n := h.now.Add(1)
	for {
		p := h.peak.Load()
		if n <= p || h.peak.CompareAndSwap(p, n) {
			break
		}
	}
	h.entered <- struct{}{}
	<-h.release
	h.now.Add(-1)
}

func (h *heldStore) UpdateInstance(context.Context, string, string, func(w *model.Work) error) error {
	h.hold()
	return nil
}

func (h *heldStore) UpdateInstances(_ context.Context, _ string, ids []string, _ func(w *model.Work) error, _ ...*model.Work) (map[string]error, error) {
	h.hold()
	out := make(map[string]error, len(ids))
	for _, id := range ids {
		out[id] = nil
	}
	return out, nil
}

// submitOneByOne submits updates of instances prefix-0, prefix-1, ... one at a time, each once the one before is
// held in a transaction or queued, so that each leader starts with one step (steps submitted at once would be
// taken into one group by the first leader). It returns a WaitGroup of the updates.
func submitOneByOne(t *testing.T, g *grouper, hs *heldStore, prefix string, n int) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	g.mu.Lock()
	base := int(hs.now.Load()) + len(g.queue)
	g.mu.Unlock()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.update(context.Background(), "t", fmt.Sprintf("%s-%02d", prefix, i), func(*model.Work) error { return nil }); err != nil {
				t.Error(err)
			}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for {
			g.mu.Lock()
			held := int(hs.now.Load())
			placed, settled := held+len(g.queue), g.inflight == held // every leader holds its transaction
			g.mu.Unlock()
			if placed == base+i+1 && settled {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("step %d of %s neither held nor queued (%d placed, want %d)", i, prefix, placed, base+i+1)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	return &wg
}

// TestGroupsYieldToFiringTimers: 20 steps of different instances submitted while a timer batch fires run in at most
// one transaction at once (the rest queue and join it); without a fire they take all the grouper's workers
// (groupWorkers unless set).
// Every step completes either way.
func TestGroupsYieldToFiringTimers(t *testing.T) {
	for _, c := range []struct {
		firing     bool
		workersMax int
		want       int
	}{{true, 0, 1}, {false, 0, groupWorkers}, {false, 2, 2}, {false, 3, 3}, {true, 2, 1}, {true, 3, 1}, {true, 1, 1}} {
		t.Run(fmt.Sprintf("firing=%v,max=%d", c.firing, c.workersMax), func(t *testing.T) {
			hs := &heldStore{release: make(chan struct{}), entered: make(chan struct{}, 64)}
			g := &grouper{store: hs, workersMax: c.workersMax}
			if c.firing {
				g.firing.Add(1)
			}
			wg := submitOneByOne(t, g, hs, "inst", 20)
			for range c.want {
				<-hs.entered // submitOneByOne saw them held
			}
			// No further transaction while those are held: only real time can show that one does not start.
			select {
			case <-hs.entered:
				t.Fatalf("a transaction beyond %d started (firing=%v)", c.want, c.firing)
			case <-time.After(100 * time.Millisecond):
			}
			if p := hs.peak.Load(); int(p) != c.want {
				t.Fatalf("peak %d transactions at once, want %d", p, c.want)
			}
			go func() {
				for range hs.entered {
				}
			}()
			close(hs.release)
			wg.Wait()
			close(hs.entered)
		})
	}
}

// TestLeadersStepBackWhenTimersFire: leaders running when a timer batch starts firing finish their group and then
// leave the queue to one of them: the first seven to finish take nothing more.
func TestLeadersStepBackWhenTimersFire(t *testing.T) {
	hs := &heldStore{release: make(chan struct{}), entered: make(chan struct{}, 256)}
	g := &grouper{store: hs}
	first := submitOneByOne(t, g, hs, "a", groupWorkers) // eight leaders, each holding a step alone
	for range groupWorkers {
		<-hs.entered
	}
	g.firing.Add(1)
	second := submitOneByOne(t, g, hs, "b", 40) // queued behind them
	waitFor := func(what string, ok func(queued, inflight int) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			g.mu.Lock()
			queued, inflight := len(g.queue), g.inflight
			g.mu.Unlock()
			if ok(queued, inflight) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d queued, %d leaders", what, queued, inflight)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor("40 steps queued", func(q, _ int) bool { return q == 40 })
	for i := range groupWorkers - 1 {
		hs.release <- struct{}{} // one held transaction ends
		want := groupWorkers - 1 - i
		waitFor(fmt.Sprintf("leader %d stepped back", i+1), func(q, n int) bool { return n == want })
		g.mu.Lock()
		queued := len(g.queue)
		g.mu.Unlock()
		if queued != 40 {
			t.Fatalf("a leader took queued steps while timers fired and %d leaders ran (%d left queued)", want+1, queued)
		}
	}
	// The one left takes the queue in groups; everything completes and every leader ends.
	go func() {
		for range hs.entered {
		}
	}()
	close(hs.release)
	first.Wait()
	second.Wait()
	close(hs.entered)
	waitFor("every leader ended", func(q, n int) bool { return q == 0 && n == 0 })
	if p := hs.now.Load(); p != 0 {
		t.Fatalf("%d transactions still held", p)
	}
}

// TestDefaultGroupWorkers: one group transaction per two cores Halley may use, at least one and at most eight; the
// engine takes Options.GroupWorkers when set.
func TestDefaultGroupWorkers(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	for procs, want := range map[int]int{1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 8: 4, 16: 8, 64: 8} {
		runtime.GOMAXPROCS(procs)
		if got := DefaultGroupWorkers(); got != want {
			t.Errorf("GOMAXPROCS %d: DefaultGroupWorkers() = %d, want %d", procs, got, want)
		}
	}
	runtime.GOMAXPROCS(3)
	for set, want := range map[int]int{0: 1, -1: 1, 5: 5, 2: 2} {
		if got := (Options{GroupWorkers: set}).groupWorkers(); got != want {
			t.Errorf("Options.GroupWorkers %d: the engine allows %d groups at once, want %d", set, got, want)
		}
	}
}
