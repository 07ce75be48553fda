package scheduler

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/clock"
)

// handBackend pops whatever the test has made due, up to n, and never reports more due: every pop takes all that
// is due, as a single sorted set does. It counts its pops.
type handBackend struct {
	mu    sync.Mutex
	due   []Due
	pops  int
	after chan int // receives the pop count after each pop that took something
}

func (b *handBackend) add(ids ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		b.due = append(b.due, Due{ID: id, Attempt: 1})
	}
}

func (b *handBackend) pop(_ context.Context, _ int64, n int, _ int64) ([]Due, int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := min(n, len(b.due))
	out := slices.Clone(b.due[:k])
	b.due = b.due[k:]
	next := int64(-1)
	if len(b.due) > 0 {
		next = 0 // still due
	}
	if k > 0 {
		b.pops++
		b.after <- b.pops
	}
	return out, next, nil
}

func (b *handBackend) ack(context.Context, []string, int64) error         { return nil }
func (b *handBackend) recoverExpired(context.Context, int64) (int, error) { return 0, nil }

// blockingHandler records each batch and holds it until the test releases it.
type blockingHandler struct {
	batches chan []string
	release map[string]chan struct{} // by the batch's first id
	mu      sync.Mutex
}

func newBlockingHandler() *blockingHandler {
	return &blockingHandler{batches: make(chan []string, 64), release: map[string]chan struct{}{}}
}

func (h *blockingHandler) gate(id string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.release[id] == nil {
		h.release[id] = make(chan struct{})
	}
	return h.release[id]
}

func (h *blockingHandler) handle(ctx context.Context, batch []Due) []error {
	var got []string
	for _, d := range batch {
		got = append(got, d.ID)
	}
	h.batches <- got
	select {
	case <-h.gate(got[0]):
	case <-ctx.Done():
	}
	return nil
}

func startLoop(t *testing.T, b backend, opts Options, wake *waker, h Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runLoop(ctx, b, opts.withDefaults(), wake, make(chan struct{}), h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
}

func nextBatch(t *testing.T, h *blockingHandler) []string {
	t.Helper()
	select {
	case b := <-h.batches:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("no batch delivered")
		return nil
	}
}

// TestPartialBatchesWaitForAHandler: with two partial batches in their handlers (the default PartialHandlers), timers
// falling due one after another are not popped until one of those handlers finishes, and then go in one batch —
// one transaction for both instead of one each.
func TestPartialBatchesWaitForAHandler(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	b := &handBackend{after: make(chan int, 64)}
	wake := &waker{}
	h := newBlockingHandler()
	startLoop(t, b, Options{Clock: clk, LeaseTimeout: time.Hour, MaxIdle: time.Hour}, wake, h.handle)

	b.add("a")
	wake.notify()
	if got := nextBatch(t, h); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("first batch %v, want [a]", got)
	}
	b.add("b")
	wake.notify()
	if got := nextBatch(t, h); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("second batch %v, want [b]", got)
	}
	<-b.after
	<-b.after
	b.add("c")
	wake.notify()
	// No pop while both partial batches are held. The popper is blocked on a channel, not on the clock, so
	// only real time can show it stays put; a pop now would be the bug (and could only make this test fail).
	select {
	case n := <-b.after:
		t.Fatalf("pop %d while two partial batches were being handled", n)
	case <-time.After(100 * time.Millisecond):
	}
	b.add("d")
	wake.notify()
	close(h.gate("a"))
	if got := nextBatch(t, h); !slices.Equal(got, []string{"c", "d"}) {
		t.Fatalf("after a handler finished: batch %v, want [c d] together", got)
	}
	close(h.gate("b"))
	close(h.gate("c"))
}

// TestBacklogUsesEveryHandler: full batches (a backlog) are popped into every free handler, whatever
// PartialHandlers is.
func TestBacklogUsesEveryHandler(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC))
	b := &handBackend{after: make(chan int, 64)}
	wake := &waker{}
	h := newBlockingHandler()
	startLoop(t, b, Options{Clock: clk, BatchSize: 2, Concurrency: 4, PartialHandlers: 1, LeaseTimeout: time.Hour, MaxIdle: time.Hour}, wake, h.handle)

	b.add("a1", "a2", "b1", "b2", "c1", "c2", "d1", "d2", "e1")
	wake.notify()
	var firsts []string
	for range 4 {
		firsts = append(firsts, nextBatch(t, h)[0])
	}
	slices.Sort(firsts)
	if !slices.Equal(firsts, []string{"a1", "b1", "c1", "d1"}) {
		t.Fatalf("batches held at once start with %v, want a1 b1 c1 d1 (four full batches in four handlers)", firsts)
	}
	close(h.gate("a1"))
	if got := nextBatch(t, h); !slices.Equal(got, []string{"e1"}) {
		t.Fatalf("last batch %v, want [e1]", got)
	}
	for _, id := range []string{"b1", "c1", "d1", "e1"} {
		close(h.gate(id))
	}
}

// TestPartialHandlersDefaults: 2 by default, every handler when negative, never more than Concurrency.
func TestPartialHandlersDefaults(t *testing.T) {
	for _, c := range []struct{ in, conc, want int }{{0, 0, 2}, {1, 0, 1}, {-1, 0, 8}, {5, 3, 3}, {0, 1, 1}} {
		if got := (Options{PartialHandlers: c.in, Concurrency: c.conc}).withDefaults().PartialHandlers; got != c.want {
			t.Errorf("PartialHandlers %d with Concurrency %d: %d, want %d", c.in, c.conc, got, c.want)
		}
	}
}
