package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/scheduler"
)

// waitGuard only guards against a hung test; every wait below ends on a signal long before it.
const waitGuard = 10 * time.Second

// t0 is the fake clock's start, on a whole millisecond like every due time in the suite.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// backend builds one scheduler store for a test. open returns a scheduler over that store: the same Memory
// each time, or a new Redis client and Redis scheduler on the same keys (another "process"). lose simulates
// the index losing everything (Redis: its keys deleted; Memory: a process restart) and returns the scheduler to
// use afterwards.
type backend struct {
	open func() scheduler.Scheduler
	lose func(s scheduler.Scheduler) scheduler.Scheduler
}

type factory func(t *testing.T, opts scheduler.Options) backend

// testContract is the one suite both backends must pass.
func testContract(t *testing.T, newBackend factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, newBackend factory)
	}{
		{"DeliversInDueOrder", testOrder},
		{"RespectsBatchSize", testBatchSize},
		{"NothingBeforeItsTime", testNotBeforeDue},
		{"SubMillisecondDueTimesNeverEarly", testSubMillisecond},
		{"CancelledNeverDelivered", testCancel},
		{"RearmMovesTimer", testRearm},
		{"RearmLeasedTimer", testRearmLeased},
		{"ExactlyOnceAcrossRunLoops", testExactlyOnce},
		{"LeaseExpiryRedelivers", testLeaseExpiry},
		{"EnsureAddsOnlyMissing", testEnsure},
		{"Len", testLen},
		{"SlowHandlerDoesNotBlockOthers", testSlowHandler},
		{"WakesForEarlierTimer", testWake},
		{"LingerGathersABatch", testLinger},
		{"CloseStopsRun", testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newBackend) })
	}
}

// recorder collects deliveries and checks on each one that the fake clock has reached the timer's due time.
type recorder struct {
	clk     *clock.Fake
	mu      sync.Mutex
	all     []scheduler.Due
	batches [][]scheduler.Due
	early   []string
	ch      chan scheduler.Due
}

func newRecorder(clk *clock.Fake) *recorder {
	return &recorder{clk: clk, ch: make(chan scheduler.Due, 10000)}
}

// handler records every delivery and answers each with fn (nil fn: ack all).
func (r *recorder) handler(fn func(ctx context.Context, d scheduler.Due) error) scheduler.Handler {
	return func(ctx context.Context, batch []scheduler.Due) []error {
		now := r.clk.Now()
		r.mu.Lock()
		r.batches = append(r.batches, slices.Clone(batch))
		for _, d := range batch {
			r.all = append(r.all, d)
			if now.Before(d.Due) {
				r.early = append(r.early, fmt.Sprintf("%s due %s delivered at %s", d.ID, d.Due, now))
			}
		}
		r.mu.Unlock()
		errs := make([]error, len(batch))
		for i, d := range batch {
			r.ch <- d
			if fn != nil {
				errs[i] = fn(ctx, d)
			}
		}
		return errs
	}
}

func (r *recorder) wait(t *testing.T, n int) []scheduler.Due {
	t.Helper()
	got := make([]scheduler.Due, 0, n)
	timeout := time.After(waitGuard)
	for len(got) < n {
		select {
		case d := <-r.ch:
			got = append(got, d)
		case <-timeout:
			t.Fatalf("got %d of %d deliveries before the guard timeout: %v", len(got), n, got)
		}
	}
	return got
}

func (r *recorder) delivered(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, d := range r.all {
		if d.ID == id {
			n++
		}
	}
	return n
}

func (r *recorder) checkNoneEarly(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.early {
		t.Errorf("delivered early: %s", e)
	}
}

// running is one Run call in the background.
type running struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func startRun(t *testing.T, s scheduler.Scheduler, h scheduler.Handler) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx, h) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run and waits for it to return, which includes its handlers finishing and acking.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run returned %v, want nil on cancel", err)
			}
		case <-time.After(waitGuard):
			t.Errorf("Run did not return after cancel")
		}
	})
}

func schedule(t *testing.T, s scheduler.Scheduler, items ...scheduler.Item) {
	t.Helper()
	if err := s.Schedule(context.Background(), items...); err != nil {
		t.Fatalf("Schedule: %v", err)
	}
}

func wantLen(t *testing.T, s scheduler.Scheduler, due, leased int) {
	t.Helper()
	d, l, err := s.Len(context.Background())
	if err != nil {
		t.Fatalf("Len: %v", err)
	}
	if d != due || l != leased {
		t.Fatalf("Len = (due %d, leased %d), want (%d, %d)", d, l, due, leased)
	}
}

func at(d time.Duration) time.Time { return t0.Add(d) }

func ids(ds []scheduler.Due) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func testOrder(t *testing.T, newBackend factory) {
	clk := clock.NewFake(t0)
	s := newBackend(t, scheduler.Options{Clock: clk, Concurrency: 1, BatchSize: 2}).open()
	schedule(t, s,
		scheduler.Item{ID: "e", Due: at(5 * time.Second)},
		scheduler.Item{ID: "a", Due: at(1 * time.Second)},
		scheduler.Item{ID: "d", Due: at(3 * time.Second)},
		scheduler.Item{ID: "c", Due: at(2 * time.Second)},
		scheduler.Item{ID: "b", Due: at(2 * time.Second)}, // same time as c: ordered by id
		scheduler.Item{ID: "f", Due: at(7 * time.Second)},
	)
	rec := newRecorder(clk)
	startRun(t, s, rec.handler(nil))
	clk.Set(at(10 * time.Second))
	got := rec.wait(t, 6)
	if want := []string{"a", "b", "c", "d", "e", "f"}; !slices.Equal(ids(got), want) {
		t.Fatalf("delivery order %v, want %v", ids(got), want)
	}
	if !got[0].Due.Equal(at(time.Second)) || got[0].Attempt != 1 {
		t.Fatalf("first delivery %+v, want due %s attempt 1", got[0], at(time.Second))
	}
	rec.checkNoneEarly(t)
}

func testBatchSize(t *testing.T, newBackend factory) {
	clk := clock.NewFake(t0)
	s := newBackend(t, scheduler.Options{Clock: clk, Concurrency: 1, BatchSize: 3}).open()
	for i := range 10 {
		schedule(t, s, scheduler.Item{ID: fmt.Sprintf("t%02d", i), Due: at(time.Second)})
	}
	rec := newRecorder(clk)
	run := startRun(t, s, rec.handler(nil))
	clk.Set(at(time.Second))
	rec.wait(t, 10)
	run.stop(t)
	var sizes []int
	for _, b := range rec.batches {
		sizes = append(sizes, len(b))
	}
	// One handler slot: each pop waits for the previous batch, so all ten are due and the batches are full.
	if want := []int{3, 3, 3, 1}; !slices.Equal(sizes, want) {
		t.Fatalf("batch sizes %v, want %v", sizes, want)
	}
	wantLen(t, s, 0, 0)
}

func testNotBeforeDue(t *testing.T, newBackend factory) {
	clk := clock.NewFake(t0)
	s := newBackend(t, scheduler.Options{Clock: clk}).open()
	due := at(10 * time.Second)
	// The probe falls due 1 ms before the target: once it is delivered, a pop has run at that time.
	schedule(t, s, scheduler.Item{ID: "target", Due: due}, scheduler.Item{ID: "probe", Due: due.Add(-time.Millisecond)})
	rec := newRecorder(clk)
	startRun(t, s, rec.handler(nil))
	clk.Set(due.Add(-time.Millisecond))
	if got := rec.wait(t, 1); got[0].ID != "probe" {
		t.Fatalf("first delivery %q, want probe", got[0].ID)
	}
	if n := rec.delivered("target"); n != 0 {
		t.Fatalf("target delivered %d times 1 ms before its due time", n)
	}
	if due, _, err := s.Len(context.Background()); err != nil || due != 1 {
		t.Fatalf("Len due = %d, %v; want the target still waiting", due, err)
	}
	clk.Set(due)
	got := rec.wait(t, 1)
	if got[0].ID != "target" || !got[0].Due.Equal(due) {
		t.Fatalf("delivery %+v, want target due %s", got[0], due)
	}
	rec.checkNoneEarly(t)
}

// testSubMillisecond schedules due times a nanosecond to a millisecond past whole milliseconds: each is rounded
// up, so none is delivered before the exact time it was scheduled for (the clock moves in sub-millisecond steps).
func testSubMillisecond(t *testing.T, newBackend factory) {
	clk := clock.NewFake(t0)
	s := newBackend(t, scheduler.Options{Clock: clk}).open()
	base := at(10 * time.Second)
	exact := map[string]time.Time{
		"ns":       base.Add(time.Nanosecond),
		"half":     base.Add(500 * time.Microsecond),
		"almost":   base.Add(999*time.Microsecond + 999*time.Nanosecond),
		"whole":    base.Add(time.Millisecond),
		"past-one": base.Add(time.Millisecond + time.Microsecond),
	}
	for id, due := range exact {
		schedule(t, s, scheduler.Item{ID: id, Due: due})
	}
	schedule(t, s, scheduler.Item{ID: "probe", Due: base}) // on the millisecond: delivered at base
	var mu sync.Mutex
	var early []string
	rec := newRecorder(clk)
	startRun(t, s, rec.handler(func(_ context.Context, d scheduler.Due) error {
		if want, ok := exact[d.ID]; ok {
			if now := clk.Now(); now.Before(want) {
				mu.Lock()
				early = append(early, fmt.Sprintf("%s due %s delivered at %s", d.ID, want.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)))
				mu.Unlock()
			}
			if !d.Due.Equal(want.Truncate(time.Millisecond)) && !d.Due.Equal(want.Truncate(time.Millisecond).Add(time.Millisecond)) {
				t.Errorf("%s delivered with due %s, want its time rounded to a millisecond", d.ID, d.Due)
			}
		}
		return nil
	}))
	clk.Set(base)
	if got := rec.wait(t, 1); got[0].ID != "probe" {
		t.Fatalf("delivered %v at %s, want the probe only", ids(got), base)
	}
	// Half a millisecond later the clock has passed "ns" and "half", but their rounded due time is base+1ms.
	clk.Set(base.Add(500 * time.Microsecond))
	schedule(t, s, scheduler.Item{ID: "probe2", Due: base.Add(-time.Millisecond)}) // due already: a pop runs now
	if got := rec.wait(t, 1); got[0].ID != "probe2" {
		t.Fatalf("delivered %s, want probe2 (nothing rounded up may be due yet)", got[0].ID)
	}
	for _, id := range []string{"ns", "half", "almost", "whole", "past-one"} {
		if rec.delivered(id) != 0 {
			t.Fatalf("%s delivered half a millisecond in", id)
		}
	}
	clk.Set(base.Add(time.Millisecond))
	got := rec.wait(t, 4)
	if want := []string{"almost", "half", "ns", "whole"}; !slices.Equal(sorted(ids(got)), want) {
		t.Fatalf("at base+1ms delivered %v, want %v", ids(got), want)
	}
	clk.Set(base.Add(1500 * time.Microsecond))
	schedule(t, s, scheduler.Item{ID: "probe3", Due: base})
	if got := rec.wait(t, 1); got[0].ID != "probe3" {
		t.Fatalf("delivered %s before its time", got[0].ID)
	}
	clk.Set(base.Add(2 * time.Millisecond))
	if got := rec.wait(t, 1); got[0].ID != "past-one" {
		t.Fatalf("delivered %s, want past-one", got[0].ID)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range early {
		t.Errorf("delivered early: %s", e)
	}
}

func sorted(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}

func testCancel(t *testing.T, newBackend factory) {
	clk := clock.NewFake(t0)
	s := newBackend(t, scheduler.Options{Clock: clk}).open()
	for _, id := range []string{"a", "b", "c"} {
		schedule(t, s, scheduler.Item{ID: id, Due: at(time.Second)})
	}
	if err := s.Cancel(context.Background(), "b", "never-scheduled"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	wantLen(t, s, 2, 0)
	rec := newRecorder(clk)
	run := startRun(t, s, rec.handler(nil))
	clk.Set(at(time.Second))
	rec.wait(t, 2)
	run.stop(t)
	if n := rec.delivered("b"); n != 0 {
		t.Fatalf("cancelled timer delivered %d times", n)
	}
	if rec.delivered("a") != 1 || rec.delivered("c") != 1 {
		t.Fatalf("deliveries %v, want a and c once each", ids(rec.all))
	}
	wantLen(t, s, 0, 0)
}

func testRearm(t *testing.T, newBackend factory) {
	clk := clock.NewFake(t0)
	s := newBackend(t, scheduler.Options{Clock: clk}).open()
	schedule(t, s, scheduler.Item{ID: "a", Due: at(time.Second)})
	schedule(t, s, scheduler.Item{ID: "a", Due: at(5 * time.Second)}, scheduler.Item{ID: "probe", Due: at(time.Second)})
	rec := newRecorder(clk)
	startRun(t, s, rec.handler(nil))
	clk.Set(at(time.Second))
	if got := rec.wait(t, 1); got[0].ID != "probe" {
		t.Fatalf("delivered %q at the old time, want only the probe", got[0].ID)
	}
	if n := rec.delivered("a"); n != 0 {
		t.Fatalf("re-armed timer delivered at its old time")
	}
	clk.Set(at(5 * time.Second))
	got := rec.wait(t, 1)
	if got[0].ID != "a" || !got[0].Due.Equal(at(5*time.Second)) || got[0].Attempt != 1 {
		t.Fatalf("delivery %+v, want a due %s attempt 1", got[0], at(5*time.Second))
	}
	rec.checkNoneEarly(t)
}

func testRearmLeased(t *testing.T, newBackend factory) {
	clk := clock.NewFake(t0)
	s := newBackend(t, scheduler.Options{Clock: clk}).open()
	release := make(chan struct{})
	rec := newRecorder(clk)
	run := startRun(t, s, rec.handler(func(ctx context.Context, d scheduler.Due) error {
		if d.Due.Equal(at(time.Second)) {
			<-release // hold the first delivery while the timer is re-armed
		}
		return nil
	}))
	schedule(t, s, scheduler.Item{ID: "a", Due: at(time.Second)})
	clk.Set(at(time.Second))
	rec.wait(t, 1)
	wantLen(t, s, 0, 1)
	schedule(t, s, scheduler.Item{ID: "a", Due: at(10 * time.Second)})
	wantLen(t, s, 1, 0)
	close(release) // the old handler acks: it must not touch the re-armed timer
	clk.Set(at(10 * time.Second))
	got := rec.wait(t, 1)
	if got[0].ID != "a" || !got[0].Due.Equal(at(10*time.Second)) || got[0].Attempt != 1 {
		t.Fatalf("re-armed delivery %+v, want a due %s attempt 1", got[0], at(10*time.Second))
	}
	run.stop(t)
	wantLen(t, s, 0, 0)
}

func testExactlyOnce(t *testing.T, newBackend factory) {
	const timers, loops = 2000, 4
	clk := clock.NewFake(t0)
	b := newBackend(t, scheduler.Options{Clock: clk, Concurrency: 4, BatchSize: 16, LeaseTimeout: time.Hour})
	items := make([]scheduler.Item, timers)
	for i := range items {
		items[i] = scheduler.Item{ID: fmt.Sprintf("timer-%05d", i), Due: at(time.Duration(i%500) * time.Millisecond)}
	}
	first := b.open()
	schedule(t, first, items...)
	rec := newRecorder(clk)
	runs := make([]*running, loops)
	for i := range runs {
		s := first
		if i > 0 {
			s = b.open()
		}
		runs[i] = startRun(t, s, rec.handler(nil))
	}
	clk.Set(at(time.Second))
	rec.wait(t, timers)
	for _, r := range runs {
		r.stop(t)
	}
	counts := map[string]int{}
	for _, d := range rec.all {
		counts[d.ID]++
	}
	for _, it := range items {
		if counts[it.ID] != 1 {
			t.Errorf("timer %s delivered %d times, want once", it.ID, counts[it.ID])
		}
	}
	if len(rec.all) != timers {
		t.Errorf("%d deliveries, want %d", len(rec.all), timers)
	}
	wantLen(t, first, 0, 0)
	rec.checkNoneEarly(t)
}

func testLeaseExpiry(t *testing.T, newBackend factory) {
	const lease = 10 * time.Second
	for _, tc := range []struct {
		name  string
		first func(release <-chan struct{}) error // the first delivery's outcome
	}{
		{"HandlerFails", func(<-chan struct{}) error { return errors.New("engine busy") }},
		{"HandlerNeverAcks", func(release <-chan struct{}) error { <-release; return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			s := newBackend(t, scheduler.Options{Clock: clk, LeaseTimeout: lease, Concurrency: 2}).open()
			release := make(chan struct{})
			rec := newRecorder(clk)
			run := startRun(t, s, rec.handler(func(ctx context.Context, d scheduler.Due) error {
				if d.Attempt == 1 {
					return tc.first(release)
				}
				return nil
			}))
			schedule(t, s, scheduler.Item{ID: "a", Due: at(time.Second)})
			clk.Set(at(time.Second))
			if got := rec.wait(t, 1); got[0].Attempt != 1 {
				t.Fatalf("first delivery %+v, want attempt 1", got[0])
			}
			wantLen(t, s, 0, 1)
			clk.Set(at(time.Second + lease))
			got := rec.wait(t, 1)
			if got[0].ID != "a" || got[0].Attempt != 2 || !got[0].Due.Equal(at(time.Second)) {
				t.Fatalf("re-delivery %+v, want a attempt 2 due %s", got[0], at(time.Second))
			}
			close(release)
			run.stop(t)
			if n := rec.delivered("a"); n != 2 {
				t.Fatalf("delivered %d times, want 2", n)
			}
			wantLen(t, s, 0, 0)
		})
	}
}

func testEnsure(t *testing.T, newBackend factory) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	b := newBackend(t, scheduler.Options{Clock: clk})
	s := b.open()
	release := make(chan struct{})
	rec := newRecorder(clk)
	run := startRun(t, s, rec.handler(func(ctx context.Context, d scheduler.Due) error {
		if d.ID == "a" {
			<-release
		}
		return nil
	}))
	schedule(t, s, scheduler.Item{ID: "a", Due: at(time.Second)}, scheduler.Item{ID: "b", Due: at(100 * time.Second)})
	clk.Set(at(time.Second))
	rec.wait(t, 1) // a is now leased to the blocked handler

	n, err := s.Ensure(ctx,
		scheduler.Item{ID: "a", Due: at(time.Second)},     // leased: not re-added
		scheduler.Item{ID: "b", Due: at(2 * time.Second)}, // due: left at its own time
		scheduler.Item{ID: "c", Due: at(3 * time.Second)}, // missing: added
	)
	if err != nil || n != 1 {
		t.Fatalf("Ensure = %d, %v; want 1 added", n, err)
	}
	wantLen(t, s, 2, 1)
	clk.Set(at(3 * time.Second))
	if got := rec.wait(t, 1); got[0].ID != "c" {
		t.Fatalf("delivered %q, want c (b was not moved to 2s)", got[0].ID)
	}
	close(release)
	run.stop(t)
	if rec.delivered("a") != 1 || rec.delivered("b") != 0 {
		t.Fatalf("deliveries %v: a must not be duplicated, b must wait for its own time", ids(rec.all))
	}
	wantLen(t, s, 1, 0)

	// The index loses everything; the engine re-arms the pending rows (b, and a new d).
	s = b.lose(s)
	wantLen(t, s, 0, 0)
	rearm := []scheduler.Item{{ID: "b", Due: at(100 * time.Second)}, {ID: "d", Due: at(4 * time.Second)}}
	if n, err := s.Ensure(ctx, rearm...); err != nil || n != 2 {
		t.Fatalf("Ensure after loss = %d, %v; want 2", n, err)
	}
	if n, err := s.Ensure(ctx, append(rearm, rearm...)...); err != nil || n != 0 {
		t.Fatalf("second Ensure = %d, %v; want 0 (idempotent)", n, err)
	}
	if n, err := s.Ensure(ctx, scheduler.Item{ID: "e", Due: at(time.Hour)}, scheduler.Item{ID: "e", Due: at(time.Hour)}); err != nil || n != 1 {
		t.Fatalf("Ensure of one new id twice in a call = %d, %v; want 1", n, err)
	}
	if err := s.Cancel(ctx, "e"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	wantLen(t, s, 2, 0)
	startRun(t, s, rec.handler(nil))
	clk.Set(at(4 * time.Second))
	if got := rec.wait(t, 1); got[0].ID != "d" || got[0].Attempt != 1 {
		t.Fatalf("after re-arm delivered %+v, want d attempt 1", got[0])
	}
	rec.checkNoneEarly(t)
}

func testLen(t *testing.T, newBackend factory) {
	ctx := context.Background()
	s := newBackend(t, scheduler.Options{Clock: clock.NewFake(t0)}).open()
	wantLen(t, s, 0, 0)
	for range 2 { // Schedule is idempotent
		for i := range 5 {
			schedule(t, s, scheduler.Item{ID: fmt.Sprintf("t%d", i), Due: at(time.Duration(i) * time.Minute)})
		}
	}
	wantLen(t, s, 5, 0)
	if err := s.Cancel(ctx, "t0", "t1", "nope"); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	wantLen(t, s, 3, 0)
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := s.Schedule(ctx, scheduler.Item{ID: ""}); err == nil {
		t.Fatalf("Schedule accepted an empty id")
	}
	wantLen(t, s, 3, 0)
}

func testSlowHandler(t *testing.T, newBackend factory) {
	clk := clock.NewFake(t0)
	s := newBackend(t, scheduler.Options{Clock: clk, Concurrency: 2, BatchSize: 1}).open()
	release := make(chan struct{})
	defer close(release)
	rec := newRecorder(clk)
	startRun(t, s, rec.handler(func(ctx context.Context, d scheduler.Due) error {
		if d.ID == "slow" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}))
	schedule(t, s, scheduler.Item{ID: "slow", Due: at(time.Second)}, scheduler.Item{ID: "fast", Due: at(2 * time.Second)})
	clk.Set(at(time.Second))
	rec.wait(t, 1)
	clk.Set(at(2 * time.Second))
	if got := rec.wait(t, 1); got[0].ID != "fast" {
		t.Fatalf("delivered %q while the slow handler runs, want fast", got[0].ID)
	}
}

func testWake(t *testing.T, newBackend factory) {
	clk := clock.NewFake(t0)
	b := newBackend(t, scheduler.Options{Clock: clk, MaxIdle: time.Hour, LeaseTimeout: 2 * time.Hour})
	s := b.open()
	schedule(t, s, scheduler.Item{ID: "far", Due: at(time.Hour)})
	rec := newRecorder(clk)
	startRun(t, s, rec.handler(nil))
	clk.BlockUntil(2) // Run is parked: its pop timer waits for "far", its recoverer for an hour
	// Scheduled through another scheduler on the same store (Redis: another client, as another process
	// would): only the wake-up can make Run look again before the hour is up.
	schedule(t, b.open(), scheduler.Item{ID: "near", Due: at(time.Second)})
	clk.Set(at(time.Second))
	if got := rec.wait(t, 1); got[0].ID != "near" {
		t.Fatalf("delivered %q, want near", got[0].ID)
	}
}

func testClose(t *testing.T, newBackend factory) {
	ctx := context.Background()
	s := newBackend(t, scheduler.Options{Clock: clock.NewFake(t0)}).open()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func(context.Context, []scheduler.Due) []error { return nil }) }()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, scheduler.ErrClosed) {
			t.Fatalf("Run after Close returned %v", err)
		}
	case <-time.After(waitGuard):
		t.Fatalf("Run did not return after Close")
	}
	if err := s.Schedule(ctx, scheduler.Item{ID: "x", Due: t0}); !errors.Is(err, scheduler.ErrClosed) {
		t.Fatalf("Schedule after Close = %v, want ErrClosed", err)
	}
	if err := s.Run(ctx, func(context.Context, []scheduler.Due) []error { return nil }); !errors.Is(err, scheduler.ErrClosed) {
		t.Fatalf("Run after Close = %v, want ErrClosed", err)
	}
}

// testLinger: after a pop that found fewer timers than a batch, the loop waits Linger before the next pop, so that
// timers falling due one after another are delivered together; a timer due after the linger is not delayed.
func testLinger(t *testing.T, newBackend factory) {
	clk := clock.NewFake(t0)
	const linger = 10 * time.Millisecond
	s := newBackend(t, scheduler.Options{Clock: clk, Linger: linger}).open()
	schedule(t, s, scheduler.Item{ID: "a", Due: at(time.Second)}, scheduler.Item{ID: "b", Due: at(time.Second + 2*time.Millisecond)},
		scheduler.Item{ID: "c", Due: at(time.Second + 5*time.Millisecond)}, scheduler.Item{ID: "d", Due: at(time.Second + 30*time.Millisecond)})
	rec := newRecorder(clk)
	startRun(t, s, rec.handler(nil))
	clk.BlockUntil(2) // the popper and the recoverer are parked
	parked := clk.Waiters()
	clk.Set(at(time.Second))
	if got := rec.wait(t, 1); got[0].ID != "a" {
		t.Fatalf("first delivery %q, want a", got[0].ID)
	}
	clk.BlockUntil(parked) // parked again, until a + linger
	clk.Set(at(time.Second + 5*time.Millisecond))
	if n := clk.Waiters(); n != parked {
		t.Fatalf("a timer fired at a+5ms (b and c due): the loop did not linger (%d of %d timers left)", n, parked)
	}
	clk.Set(at(time.Second + linger))
	rec.wait(t, 2)
	clk.Set(at(time.Second + 30*time.Millisecond))
	rec.wait(t, 1)
	rec.mu.Lock()
	batches := slices.Clone(rec.batches)
	rec.mu.Unlock()
	if len(batches) != 3 || !slices.Equal(ids(batches[1]), []string{"b", "c"}) || !slices.Equal(ids(batches[2]), []string{"d"}) {
		t.Fatalf("batches %v, want [a] [b c] [d]", batches)
	}
	rec.checkNoneEarly(t)
}
