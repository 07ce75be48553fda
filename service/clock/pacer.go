package clock

import (
	"context"
	"fmt"
	"time"
)

// Pacer spreads a long pass of pages (a re-arm of every pending timer, a count over every instance) over time, so
// that it runs beside the work that cannot wait instead of ahead of it: after each page, Wait waits until the
// pages so far took at most duty of the time since the pass began. The time a pass works is the time between the
// end of one Wait (or NewPacer) and the next call of Wait.
type Pacer struct {
	clk       Clock
	duty      float64
	began     time.Time
	pageBegan time.Time
	worked    time.Duration
}

// NewPacer starts a pass on clk (nil: the wall clock) that works at most duty of the time; duty is in (0, 1], and
// 1 never waits.
func NewPacer(clk Clock, duty float64) (*Pacer, error) {
	if duty <= 0 || duty > 1 {
		return nil, fmt.Errorf("clock: pacer duty %v is not in (0, 1]", duty)
	}
	if clk == nil {
		clk = Real{}
	}
	now := clk.Now()
	return &Pacer{clk: clk, duty: duty, began: now, pageBegan: now}, nil
}

// Wait ends a page: it waits until the pass has worked at most duty of its time, or until ctx is done (its error).
func (p *Pacer) Wait(ctx context.Context) error {
	now := p.clk.Now()
	p.worked += now.Sub(p.pageBegan)
	if wait := p.began.Add(time.Duration(float64(p.worked) / p.duty)).Sub(now); wait > 0 {
		select {
		case <-p.clk.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.pageBegan = p.clk.Now()
	return nil
}

// Worked is the time the pass has worked so far: its pages up to the last Wait, and the one under way.
func (p *Pacer) Worked() time.Duration { return p.worked + p.clk.Now().Sub(p.pageBegan) }
