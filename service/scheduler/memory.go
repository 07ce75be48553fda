package scheduler

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Memory is the in-process scheduler of the embedded default: a min-heap of due timers with a map index, and
// a lease map, under one mutex. It keeps the Redis backend's semantics (ordering, batches, leases, attempts,
// Ensure) so the engine cannot tell them apart; it holds nothing across a restart, which is why the engine
// re-arms from its timer rows with Ensure on start.
type Memory struct {
	opts   Options
	mu     sync.Mutex
	due    memHeap
	index  map[string]*memEntry // timers in the due heap
	leased map[string]*memLease
	wake   waker
	closer closer
}

var _ Scheduler = (*Memory)(nil)

type memEntry struct {
	id       string
	due      int64 // ms
	attempts int   // deliveries so far: 0 for a fresh timer, >0 after a lease expired
	pos      int   // index in the heap
}

type memLease struct {
	due      int64
	attempts int
	deadline int64
}

// NewMemory returns an in-process scheduler.
func NewMemory(opts Options) *Memory {
	return &Memory{
		opts:   opts.withDefaults(),
		index:  make(map[string]*memEntry),
		leased: make(map[string]*memLease),
		closer: newCloser(),
	}
}

// WatchLoss waits until ctx is done or the scheduler is closed: the heap loses timers only with its process, and
// the start of the next one re-arms them (Recover).
func (m *Memory) WatchLoss(ctx context.Context, _ time.Duration, _ func(context.Context) error) {
	select {
	case <-ctx.Done():
	case <-m.closer.done:
	}
}

// Schedule implements Scheduler.Schedule.
func (m *Memory) Schedule(ctx context.Context, items ...Item) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	if err := validateItems(items); err != nil {
		return err
	}
	m.mu.Lock()
	head := m.headLocked()
	earliest := int64(-1)
	for _, it := range items {
		ms := toMs(it.Due)
		delete(m.leased, it.ID) // re-arming a leased timer: the running handler's ack must not touch it
		if e, ok := m.index[it.ID]; ok {
			e.due, e.attempts = ms, 0
			heap.Fix(&m.due, e.pos)
		} else {
			e := &memEntry{id: it.ID, due: ms}
			m.index[it.ID] = e
			heap.Push(&m.due, e)
		}
		if earliest < 0 || ms < earliest {
			earliest = ms
		}
	}
	m.mu.Unlock()
	if earliest >= 0 && (head < 0 || earliest < head) {
		m.wake.notify()
	}
	return nil
}

// Cancel implements Scheduler.Cancel.
func (m *Memory) Cancel(ctx context.Context, ids ...string) error {
	if err := m.check(ctx); err != nil {
		return err
	}
	if err := validateIDs(ids); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		delete(m.leased, id)
		if e, ok := m.index[id]; ok {
			heap.Remove(&m.due, e.pos)
			delete(m.index, id)
		}
	}
	return nil
}

// Ensure implements Scheduler.Ensure.
func (m *Memory) Ensure(ctx context.Context, items ...Item) (int, error) {
	if err := m.check(ctx); err != nil {
		return 0, err
	}
	if err := validateItems(items); err != nil {
		return 0, err
	}
	m.mu.Lock()
	head := m.headLocked()
	added, earliest := 0, int64(-1)
	for _, it := range items {
		if _, ok := m.index[it.ID]; ok {
			continue
		}
		if _, ok := m.leased[it.ID]; ok {
			continue
		}
		ms := toMs(it.Due)
		e := &memEntry{id: it.ID, due: ms}
		m.index[it.ID] = e
		heap.Push(&m.due, e)
		added++
		if earliest < 0 || ms < earliest {
			earliest = ms
		}
	}
	m.mu.Unlock()
	if earliest >= 0 && (head < 0 || earliest < head) {
		m.wake.notify()
	}
	return added, nil
}

// Run implements Scheduler.Run.
func (m *Memory) Run(ctx context.Context, h Handler) error {
	if m.closer.isClosed() {
		return ErrClosed
	}
	return runLoop(ctx, m, m.opts, &m.wake, m.closer.done, h)
}

// Len implements Scheduler.Len.
func (m *Memory) Len(ctx context.Context) (int, int, error) {
	if err := m.check(ctx); err != nil {
		return 0, 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.index), len(m.leased), nil
}

// Ping implements Scheduler.Ping.
func (m *Memory) Ping(ctx context.Context) error { return m.check(ctx) }

// Close implements Scheduler.Close.
func (m *Memory) Close() error {
	m.closer.close()
	return nil
}

func (m *Memory) check(ctx context.Context) error {
	if m.closer.isClosed() {
		return ErrClosed
	}
	return ctx.Err()
}

// headLocked returns the earliest due score, or -1.
func (m *Memory) headLocked() int64 {
	if len(m.due) == 0 {
		return -1
	}
	return m.due[0].due
}

func (m *Memory) pop(_ context.Context, now int64, n int, deadline int64) ([]Due, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var batch []Due
	for len(batch) < n && len(m.due) > 0 && m.due[0].due <= now {
		e := heap.Pop(&m.due).(*memEntry)
		delete(m.index, e.id)
		e.attempts++
		m.leased[e.id] = &memLease{due: e.due, attempts: e.attempts, deadline: deadline}
		batch = append(batch, Due{ID: e.id, Due: fromMs(e.due), Attempt: e.attempts})
	}
	return batch, m.headLocked(), nil
}

func (m *Memory) ack(_ context.Context, ids []string, deadline int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		if l, ok := m.leased[id]; ok && l.deadline == deadline {
			delete(m.leased, id)
		}
	}
	return nil
}

func (m *Memory) recoverExpired(_ context.Context, now int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, l := range m.leased {
		if l.deadline > now {
			continue
		}
		delete(m.leased, id)
		e := &memEntry{id: id, due: l.due, attempts: l.attempts}
		m.index[id] = e
		heap.Push(&m.due, e)
		n++
	}
	return n, nil
}

// memHeap orders by due time, then by id — the order of a Redis sorted set, so both backends deliver alike.
type memHeap []*memEntry

func (h memHeap) Len() int { return len(h) }
func (h memHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].id < h[j].id
}
func (h memHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i, j
}
func (h *memHeap) Push(x any) {
	e := x.(*memEntry)
	e.pos = len(*h)
	*h = append(*h, e)
}
func (h *memHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.pos = -1
	return e
}
