package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
)

// countingWriter records what reaches the log's file and in how many writes.
type countingWriter struct {
	mu     sync.Mutex
	b      strings.Builder
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.b.Write(p)
}

func (w *countingWriter) state() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String(), w.writes
}

// TestLogBuffer: a line of a quiet log goes out at once; a burst goes out in a few writes, whole lines in order,
// within the interval; Close writes what is kept, and later lines go out at once.
func TestLogBuffer(t *testing.T) {
	w := &countingWriter{}
	b := newLogBuffer(w, 50*time.Millisecond)
	fmt.Fprintln(b, "first")
	if got, n := w.state(); got != "first\n" || n != 1 {
		t.Fatalf("a line of a quiet log: %q in %d writes; want it at once", got, n)
	}

	// A burst from many goroutines: every line whole, each goroutine's in order, in a few writes.
	const writers, lines = 16, 500
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range lines {
				fmt.Fprintf(b, "g%02d line %04d %s\n", g, i, strings.Repeat("x", i%97))
			}
		})
	}
	wg.Wait()
	if !testkit.Eventually(5*time.Second, 5*time.Millisecond, func() bool {
		got, _ := w.state()
		return strings.Count(got, "\n") == writers*lines+1
	}) {
		got, _ := w.state()
		t.Fatalf("%d of %d lines written after 5 s", strings.Count(got, "\n"), writers*lines+1)
	}
	got, n := w.state()
	if n > 100 {
		t.Errorf("%d lines went out in %d writes; the buffer does not gather them", writers*lines, n)
	}
	next := make([]int, writers)
	for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n")[1:] {
		var g int
		if _, err := fmt.Sscanf(l, "g%02d", &g); err != nil || g < 0 || g >= writers {
			t.Fatalf("a broken line %q", l)
		}
		if want := fmt.Sprintf("g%02d line %04d %s", g, next[g], strings.Repeat("x", next[g]%97)); l != want {
			t.Fatalf("line %q out of order or cut; want %q", l, want)
		}
		next[g]++
	}

	// Kept lines are written by Close, not lost; after it every line goes out at once.
	fmt.Fprintln(b, "quiet again")          // may go out at once: the log was quiet for a while
	fmt.Fprintln(b, "kept until the flush") // within the interval of the one before: kept
	b.Close()
	if got, _ := w.state(); !strings.HasSuffix(got, "quiet again\nkept until the flush\n") {
		t.Fatalf("Close did not write the kept lines: ...%q", got[max(0, len(got)-80):])
	}
	_, before := w.state()
	fmt.Fprintln(b, "after close")
	if got, n := w.state(); n != before+1 || !strings.HasSuffix(got, "after close\n") {
		t.Fatalf("a line after Close did not go out at once")
	}
	b.Close() // twice is harmless
}
