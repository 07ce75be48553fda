// Package clock gives the services an injectable notion of time: Real for production, Fake for tests, so that
// no test waits on time.Sleep for a timer.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock is what time-dependent code asks for the time and for wake-ups.
type Clock interface {
	Now() time.Time
	// After returns a channel that receives once d has passed on this clock.
	After(d time.Duration) <-chan time.Time
	// NewTimer returns a resettable timer on this clock.
	NewTimer(d time.Duration) Timer
}

// Timer is the resettable part of time.Timer that the scheduler needs.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After is time.After.
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Fake is a manually advanced clock for tests. Timers fire when Advance or Set moves the clock past their
// deadline; waiters can be observed with BlockUntil so a test knows a loop is parked before advancing.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	cond   *sync.Cond
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake {
	f := &Fake{now: t}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that receives once Advance or Set moves the clock d past the time of the call.
func (f *Fake) After(d time.Duration) <-chan time.Time { return f.NewTimer(d).C() }

// NewTimer returns a timer that fires once Advance or Set moves the clock d past the time of the call.
func (f *Fake) NewTimer(d time.Duration) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	t.arm(f.now.Add(d))
	return t
}

// Advance moves the clock forward by d and fires every timer that falls due.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the clock to t (never backwards) and fires every timer that falls due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.now) {
		f.now = t
	}
	sort.Slice(f.timers, func(i, j int) bool { return f.timers[i].at.Before(f.timers[j].at) })
	keep := f.timers[:0]
	for _, tm := range f.timers {
		if !tm.at.After(f.now) {
			tm.active = false
			select {
			case tm.c <- f.now:
			default:
			}
			continue
		}
		keep = append(keep, tm)
	}
	f.timers = keep
}

// Waiters returns how many timers are armed and not yet fired.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// BlockUntil waits until at least n timers are armed on the clock.
func (f *Fake) BlockUntil(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.timers) < n {
		f.cond.Wait()
	}
}

type fakeTimer struct {
	f      *Fake
	c      chan time.Time
	at     time.Time
	active bool
}

// arm must be called with f.mu held.
func (t *fakeTimer) arm(at time.Time) {
	t.at = at
	if !at.After(t.f.now) {
		select {
		case t.c <- t.f.now:
		default:
		}
		return
	}
	t.active = true
	t.f.timers = append(t.f.timers, t)
	t.f.cond.Broadcast()
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.remove()
}

func (t *fakeTimer) remove() bool {
	was := t.active
	for i, x := range t.f.timers {
		if x == t {
			t.f.timers = append(t.f.timers[:i], t.f.timers[i+1:]...)
			break
		}
	}
	t.active = false
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.remove()
	t.arm(t.f.now.Add(d))
	return was
}
