package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/scheduler"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// firer is a TimerHandler that records each call's timer ids and fails the ids it is told to.
type firer struct {
	mu    sync.Mutex
	calls [][]string
	fail  map[string]bool
}

func (f *firer) FireTimers(_ context.Context, ts []*model.Timer) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	errs := make([]error, len(ts))
	for i, t := range ts {
		ids = append(ids, t.ID)
		if f.fail[t.ID] {
			errs[i] = errors.New("refused " + t.ID)
		}
	}
	f.calls = append(f.calls, ids)
	return errs
}

// TestRouteHandsEachKindToItsHandler: one delivered batch reaches each handler in one call holding all its kinds'
// timers in due order; timers whose row is gone, already fired or cancelled, and a second copy of an id, are
// acknowledged without a call; a kind nobody handles fails alone; a handler's error stays with its timer.
func TestRouteHandsEachKindToItsHandler(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		due := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
		save := func(id, kind, status string) {
			t.Helper()
			if err := s.SaveTimer(ctx, &model.Timer{ID: id, TenantID: model.DefaultTenant, Kind: kind, DueAt: due, Status: status}); err != nil {
				t.Fatal(err)
			}
		}
		save("t1", model.TimerDelay, model.TimerPending)
		save("t2", model.TimerCrontab, model.TimerPending)
		save("t3", model.TimerApprovalTimeout, model.TimerPending)
		save("t4", model.TimerDelay, model.TimerFired)
		save("t5", model.TimerRetry, model.TimerCancelled)
		save("t6", "bogus", model.TimerPending)
		save("t7", model.TimerCallbackTimeout, model.TimerPending)
		engine, crontab := &firer{fail: map[string]bool{"t7": true}}, &firer{}
		route, err := scheduler.Route(s, scheduler.Handlers{model.TimerDelay: engine, model.TimerApprovalTimeout: engine, model.TimerRetry: engine,
			model.TimerCallbackTimeout: engine, model.TimerCrontab: crontab})
		if err != nil {
			t.Fatal(err)
		}
		var batch []scheduler.Due
		for _, id := range []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "gone", "t1"} {
			batch = append(batch, scheduler.Due{ID: id, Due: due, Attempt: 1})
		}
		errs := route(ctx, batch)
		if len(errs) != len(batch) {
			t.Fatalf("%d results for %d timers", len(errs), len(batch))
		}
		for i, err := range errs {
			want := batch[i].ID == "t6" || batch[i].ID == "t7"
			if (err != nil) != want {
				t.Errorf("timer %s (#%d): %v", batch[i].ID, i, err)
			}
		}
		if !strings.Contains(fmt.Sprint(errs[5]), `"bogus"`) {
			t.Errorf("the unknown kind's error %v does not name it", errs[5])
		}
		if fmt.Sprint(engine.calls) != "[[t1 t3 t7]]" || fmt.Sprint(crontab.calls) != "[[t2]]" {
			t.Fatalf("calls: engine %v, crontab %v; want one call each with its pending timers in due order", engine.calls, crontab.calls)
		}
	})
}

// wrongCount returns no result at all, as a broken handler might.
type wrongCount struct{}

func (*wrongCount) FireTimers(context.Context, []*model.Timer) []error { return nil }

// funcHandler is not comparable: Route refuses it rather than panic when grouping.
type funcHandler func(context.Context, []*model.Timer) []error

func (f funcHandler) FireTimers(ctx context.Context, ts []*model.Timer) []error { return f(ctx, ts) }

// TestRouteRefusesWhatItCannotUse: Route needs the rows and comparable, non-nil handlers; a handler that answers
// the wrong number of results fails its timers (they are retried) instead of acking them.
func TestRouteRefusesWhatItCannotUse(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	for name, hs := range map[string]scheduler.Handlers{
		"no handlers":    nil,
		"nil handler":    {model.TimerDelay: nil},
		"not comparable": {model.TimerDelay: funcHandler(nil)},
	} {
		if _, err := scheduler.Route(s, hs); err == nil {
			t.Errorf("%s: Route accepted it", name)
		}
	}
	if _, err := scheduler.Route(nil, scheduler.Handlers{model.TimerDelay: &firer{}}); err == nil {
		t.Error("Route accepted no rows")
	}
	ctx := context.Background()
	if err := s.SaveTimer(ctx, &model.Timer{ID: "w1", TenantID: model.DefaultTenant, Kind: model.TimerDelay, DueAt: time.Now(), Status: model.TimerPending}); err != nil {
		t.Fatal(err)
	}
	route, err := scheduler.Route(s, scheduler.Handlers{model.TimerDelay: &wrongCount{}})
	if err != nil {
		t.Fatal(err)
	}
	if errs := route(ctx, []scheduler.Due{{ID: "w1", Attempt: 1}}); len(errs) != 1 || errs[0] == nil {
		t.Fatalf("a handler with the wrong number of results: %v", errs)
	}
}

// TestRecoverRearmsAtStart: the timer-recovery worker puts every pending row into an empty scheduler when it
// starts (the in-process heap after a restart) and returns once its context ends. The Redis loss watch it then
// runs is tested with the Redis backend (loss_test.go).
func TestRecoverRearmsAtStart(t *testing.T) {
	s := storetest.Open(t, store.SQLite)
	ctx := context.Background()
	var want []string
	for i := range 3 {
		id := fmt.Sprintf("r%d", i)
		want = append(want, id)
		if err := s.SaveTimer(ctx, &model.Timer{ID: id, TenantID: model.DefaultTenant, Kind: model.TimerCrontab, DueAt: time.Now().Add(time.Hour),
			Status: model.TimerPending}); err != nil {
			t.Fatal(err)
		}
	}
	sched := scheduler.NewMemory(scheduler.Options{})
	defer sched.Close()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- scheduler.Recover(rctx, s, sched, time.Hour, slog.New(slog.DiscardHandler)) }()
	deadline := time.Now().Add(10 * time.Second) // a guard against a hung test, not a wait for time to pass
	for {
		if n, _, _ := sched.Len(ctx); n == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Recover did not arm the pending timers")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n, err := sched.Ensure(ctx, scheduler.Item{ID: "r0", Due: time.Now().Add(time.Hour)}); err != nil || n != 0 {
		t.Fatalf("r0 is not in the scheduler: Ensure added %d (%v)", n, err)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Recover did not return after its context ended")
	}
}

// TestRearmCreated: the periodic re-arm adds the pending timers armed in its window that the scheduler lacks — not
// those armed before or after it, nor fired ones, nor ones it holds — and pages through a window of more rows than
// a page, ties of created_at across the page's end included; the full Rearm adds the rest. On SQLite and MySQL.
func TestRearmCreated(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		base := time.Now().Add(-time.Hour).Truncate(time.Second)
		save := func(id string, at time.Time) {
			t.Helper()
			s.SetNow(func() time.Time { return at })
			if err := s.SaveTimer(ctx, &model.Timer{ID: id, TenantID: model.DefaultTenant, Kind: model.TimerCrontab,
				DueAt: base.Add(2 * time.Hour), Status: model.TimerPending}); err != nil {
				t.Fatal(err)
			}
		}
		from, to := base.Add(10*time.Minute), base.Add(20*time.Minute)
		var inWindow []string
		for i := range 2100 { // more than a page (2,000); 300 rows share each created_at
			id := fmt.Sprintf("w%05d", i)
			save(id, from.Add(time.Duration(i/300)*time.Second))
			inWindow = append(inWindow, id)
		}
		save("before", from.Add(-time.Microsecond))
		save("at-to", to)
		save("fired", from.Add(time.Minute))
		if ok, err := s.MarkTimerFired(ctx, "fired", base); err != nil || !ok {
			t.Fatalf("mark fired: %v %v", ok, err)
		}
		sched := scheduler.NewMemory(scheduler.Options{})
		defer sched.Close()
		if err := sched.Schedule(ctx, scheduler.Item{ID: "w00007", Due: base.Add(3 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		n, err := scheduler.RearmCreated(ctx, s, sched, from, to)
		if err != nil || n != len(inWindow)-1 {
			t.Fatalf("RearmCreated added %d (%v), want %d: the window's pending timers but the one held", n, err, len(inWindow)-1)
		}
		for _, id := range []string{"before", "at-to", "fired"} {
			if added, err := sched.Ensure(ctx, scheduler.Item{ID: id, Due: base}); err != nil || added != 1 {
				t.Fatalf("%s: RearmCreated armed it (Ensure added %d, %v)", id, added, err)
			}
			if err := sched.Cancel(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range inWindow {
			if added, err := sched.Ensure(ctx, scheduler.Item{ID: id, Due: base}); err != nil || added != 0 {
				t.Fatalf("%s: not armed by RearmCreated (Ensure added %d, %v)", id, added, err)
			}
		}
		if n, err := scheduler.Rearm(ctx, s, sched, 0); err != nil || n != 2 {
			t.Fatalf("Rearm added %d (%v), want 2: before and at-to", n, err)
		}
	})
}

// pagedRows serves pending timers from memory and advances a fake clock by took for each page read: the time a
// page of the database would take.
type pagedRows struct {
	clk    *clock.Fake
	took   time.Duration
	timers []*model.Timer // in id order
	mu     sync.Mutex
	reads  int
}

func (p *pagedRows) PendingTimers(_ context.Context, after string, limit int) ([]*model.Timer, error) {
	p.mu.Lock()
	p.reads++
	p.mu.Unlock()
	p.clk.Advance(p.took)
	var out []*model.Timer
	for _, t := range p.timers {
		if t.ID > after && len(out) < limit {
			out = append(out, t)
		}
	}
	return out, nil
}

func (p *pagedRows) PendingTimersCreated(context.Context, time.Time, time.Time, time.Time, string, int) ([]*model.Timer, error) {
	return nil, errors.New("not read by RearmPaced")
}

func (p *pagedRows) pagesRead() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reads
}

// TestRearmPaced: the hourly pass over every pending timer waits after each page until its pages took at most the
// duty of the time since it began (pages of 100 ms at a quarter: 300 ms after each), re-arms every timer, and does
// not wait at a duty of 1.
func TestRearmPaced(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	rows := &pagedRows{clk: clk, took: 100 * time.Millisecond}
	for i := range 4500 { // three pages of at most 2,000
		rows.timers = append(rows.timers, &model.Timer{ID: fmt.Sprintf("p%05d", i), DueAt: t0.Add(time.Hour)})
	}
	sched := scheduler.NewMemory(scheduler.Options{})
	defer sched.Close()
	if _, err := scheduler.RearmPaced(ctx, rows, sched, 0, 0, clk); err == nil {
		t.Fatal("a duty of 0 was accepted")
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := scheduler.RearmPaced(ctx, rows, sched, 0, 0.25, clk)
		done <- result{n, err}
	}()
	for page := 1; page <= 3; page++ {
		parked := make(chan struct{})
		go func() { clk.BlockUntil(1); close(parked) }()
		select {
		case <-parked:
		case r := <-done:
			t.Fatalf("the pass ended after page %d without waiting (added %d, %v)", page, r.n, r.err)
		case <-time.After(10 * time.Second): // a guard against a hung test, not a wait for time to pass
			t.Fatalf("the pass neither waited nor ended after page %d", page)
		}
		if got := rows.pagesRead(); got != page {
			t.Fatalf("waiting after page %d: %d pages read", page, got)
		}
		clk.Advance(299 * time.Millisecond)
		if got := rows.pagesRead(); got != page || clk.Waiters() != 1 {
			t.Fatalf("page %d: the pass went on %v before its wait was over (%d pages read)", page, 299*time.Millisecond, got)
		}
		clk.Advance(time.Millisecond)
	}
	r := <-done
	if r.err != nil || r.n != len(rows.timers) {
		t.Fatalf("RearmPaced added %d (%v), want %d", r.n, r.err, len(rows.timers))
	}
	if d := clk.Now().Sub(t0); d != 4*100*time.Millisecond+3*300*time.Millisecond {
		t.Fatalf("the pass took %v of the fake clock, want 1.3 s (4 reads, 3 waits)", d)
	}
	// At a duty of 1 nothing waits: the pass returns without the clock being moved by the test.
	if n, err := scheduler.RearmPaced(ctx, rows, sched, 0, 1, clk); err != nil || n != 0 {
		t.Fatalf("a second pass at duty 1: %d, %v; want 0 (all held)", n, err)
	}
}
