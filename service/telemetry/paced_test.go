package telemetry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/halley-bpm/halley/service/clock"
	"github.com/halley-bpm/halley/service/telemetry"
)

// TestPacedBoundsTheQuerysShare runs a count that takes longer as "the table grows" every 30 s (the refresh job's
// period) and checks that it runs at every refresh while cheap and at most 5 % of the time once it is dear, giving
// the last result in between, and that a failure is not remembered.
func TestPacedBoundsTheQuerysShare(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC))
	took, runs, fail := 100*time.Millisecond, 0, false
	count := telemetry.Paced(func(context.Context) (int, error) {
		clk.Advance(took)
		if fail {
			return 0, errors.New("database gone")
		}
		runs++
		return runs, nil
	}, 0.05, clk)
	refresh := func() int {
		t.Helper()
		n, err := count(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(30 * time.Second)
		return n
	}
	// 0.1 s: 20 × 0.1 = 2 s < 30 s, so every refresh counts.
	for i := 1; i <= 3; i++ {
		if n := refresh(); n != i {
			t.Fatalf("cheap count, refresh %d: got result %d", i, n)
		}
	}
	// 4 s: the next count is due 80 s after this one ended — every third refresh (the clock moves 34 s a counted
	// refresh, 30 s a skipped one).
	took = 4 * time.Second
	var got []int
	for range 7 {
		got = append(got, refresh())
	}
	want := []int{4, 4, 4, 5, 5, 5, 6}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("dear count: results %v, want %v", got, want)
		}
	}
	busy := time.Duration(3) * took // the three counts of the seven refreshes
	if share := busy.Seconds() / (7*30 + busy.Seconds()); share > 0.06 {
		t.Fatalf("the count took %.1f %% of the time", 100*share)
	}
	// A failure is returned and not remembered: the next call counts again.
	clk.Advance(2 * time.Minute)
	fail = true
	if _, err := count(context.Background()); err == nil {
		t.Fatal("a failed count gave no error")
	}
	fail = false
	if n, err := count(context.Background()); err != nil || n != 7 {
		t.Fatalf("after a failure: %d, %v; want a new count (7)", n, err)
	}
}
