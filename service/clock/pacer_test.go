package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/clock"
)

// TestPacer: a pass whose pages take 10 ms at a duty of 5 % waits 190 ms after each, counts only the pages as work,
// gives up its wait when its context ends, and refuses a duty outside (0, 1].
func TestPacer(t *testing.T) {
	for _, duty := range []float64{0, -0.5, 1.5} {
		if _, err := clock.NewPacer(nil, duty); err == nil {
			t.Errorf("duty %v accepted", duty)
		}
	}
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	p, err := clock.NewPacer(clk, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for page := 1; page <= 3; page++ {
		clk.Advance(10 * time.Millisecond) // the page's work
		done := make(chan error, 1)
		go func() { done <- p.Wait(ctx) }()
		clk.BlockUntil(1)
		clk.Advance(189 * time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("page %d: the wait ended after 189 ms (%v), want 190", page, err)
		default:
		}
		clk.Advance(time.Millisecond)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := p.Worked(); got != time.Duration(page)*10*time.Millisecond {
			t.Fatalf("page %d: worked %v, want %v", page, got, time.Duration(page)*10*time.Millisecond)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	clk.Advance(10 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- p.Wait(cctx) }()
	clk.BlockUntil(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a wait whose context ended: %v", err)
	}
	full, err := clock.NewPacer(clk, 1)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := full.Wait(ctx); err != nil { // returns at once: the test does not move the clock
		t.Fatal(err)
	}
}
