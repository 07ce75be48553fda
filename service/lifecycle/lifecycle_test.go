package lifecycle_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/service/lifecycle"
)

// journal records what the workers did, in order.
type journal struct {
	mu  sync.Mutex
	out []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	j.out = append(j.out, s)
	j.mu.Unlock()
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.out)
}

// worker runs until its context is cancelled, noting its start and its end; running is closed once it runs.
func worker(j *journal, name string) (*lifecycle.Service, chan struct{}) {
	running := make(chan struct{})
	return &lifecycle.Service{Name: name, Run: func(ctx context.Context) error {
		j.add("start " + name)
		close(running)
		<-ctx.Done()
		j.add("stop " + name)
		return nil
	}}, running
}

// TestRunStartsInOrderAndStopsInReverse: workers start in the listed order (each running before the next starts
// matters only for their Run, so the test waits on each), and a stop asked for by the context stops them in
// reverse order, returning nil.
func TestRunStartsInOrderAndStopsInReverse(t *testing.T) {
	j := &journal{}
	var ws []*lifecycle.Service
	var runs []chan struct{}
	for _, n := range []string{"a", "b", "c"} {
		w, r := worker(j, n)
		ws, runs = append(ws, w), append(runs, r)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.Run(ctx, 5*time.Second, testkit.Quiet(), ws...) }()
	for _, r := range runs {
		<-r
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run after a requested stop: %v", err)
	}
	got := j.get()
	if want := []string{"stop c", "stop b", "stop a"}; !slices.Equal(got[3:], want) {
		t.Fatalf("journal %v, want the stops %v", got, want)
	}
	if !slices.Contains(got[:3], "start a") || !slices.Contains(got[:3], "start c") {
		t.Fatalf("journal %v", got)
	}
}

// TestRunStopsWhenAWorkerDies: a worker that returns an error takes the others down (in reverse order) and Run
// returns that error; one that returns nil by itself counts as dead too, and so does one that panics.
func TestRunStopsWhenAWorkerDies(t *testing.T) {
	boom := errors.New("disk on fire")
	for name, run := range map[string]func(ctx context.Context) error{
		"error": func(context.Context) error { return boom },
		"nil":   func(context.Context) error { return nil },
		"panic": func(context.Context) error { panic("nil map") },
	} {
		t.Run(name, func(t *testing.T) {
			j := &journal{}
			a, ra := worker(j, "a")
			c, rc := worker(j, "c")
			release := make(chan struct{})
			b := &lifecycle.Service{Name: "b", Run: func(ctx context.Context) error {
				<-release
				return run(ctx)
			}}
			done := make(chan error, 1)
			go func() { done <- lifecycle.Run(context.Background(), 5*time.Second, testkit.Quiet(), a, b, c) }()
			<-ra
			<-rc
			close(release)
			err := <-done
			if err == nil || !strings.Contains(err.Error(), "b ") {
				t.Fatalf("Run = %v, want b's death", err)
			}
			if name == "error" && !errors.Is(err, boom) {
				t.Fatalf("Run = %v, want it to wrap %v", err, boom)
			}
			if name == "panic" && !strings.Contains(err.Error(), "nil map") {
				t.Fatalf("Run = %v, want the panic", err)
			}
			if got := j.get(); !slices.Equal(got[2:], []string{"stop c", "stop a"}) {
				t.Fatalf("journal %v", got)
			}
		})
	}
}

// TestRunBoundsTheStop: a worker that does not stop within the timeout makes Run return an error naming it,
// after the workers before it were still stopped.
func TestRunBoundsTheStop(t *testing.T) {
	j := &journal{}
	a, ra := worker(j, "a")
	stuck := make(chan struct{})
	defer close(stuck)
	running := make(chan struct{})
	b := &lifecycle.Service{Name: "stubborn", Run: func(ctx context.Context) error {
		close(running)
		<-stuck
		return nil
	}}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.Run(ctx, 50*time.Millisecond, testkit.Quiet(), a, b) }()
	<-ra
	<-running
	stop()
	err := <-done
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "stubborn") {
		t.Fatalf("Run = %v, want stubborn's stop to time out", err)
	}
	// Past the deadline the workers before it are still told to stop (not waited for).
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a was not told to stop after the deadline passed")
	}
	if got := j.get(); !slices.Equal(got, []string{"start a", "stop a"}) {
		t.Fatalf("journal %v", got)
	}
}

// TestDrainRunsWithTheDeadline: Drain is called after Run's context is cancelled, with the stop's deadline.
func TestDrainRunsWithTheDeadline(t *testing.T) {
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	drained := make(chan struct{})
	s := &lifecycle.Service{Name: "http",
		Run: func(ctx context.Context) error {
			<-ctx.Done()
			note("cancelled")
			<-drained
			return nil
		},
		Drain: func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("Drain got no deadline")
			}
			note("drain")
			close(drained)
			return nil
		}}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); !errors.Is(err, lifecycle.ErrAlreadyStarted) {
		t.Fatalf("second Start = %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// Run waits for the drain, so Stop returning means both happened ("cancelled" and "drain" may interleave).
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(order, "drain") || !slices.Contains(order, "cancelled") {
		t.Fatalf("order %v", order)
	}
}

// TestStartFailureStopsTheStarted: a service that cannot start (no Run) fails Run with its name, after the ones
// started before it were stopped.
func TestStartFailureStopsTheStarted(t *testing.T) {
	j := &journal{}
	a, ra := worker(j, "a")
	done := make(chan error, 1)
	go func() {
		done <- lifecycle.Run(context.Background(), time.Second, testkit.Quiet(), a, &lifecycle.Service{Name: "broken"})
	}()
	err := <-done
	<-ra
	if !errors.Is(err, lifecycle.ErrNoRun) || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("Run = %v", err)
	}
	if got := j.get(); !slices.Equal(got, []string{"start a", "stop a"}) {
		t.Fatalf("journal %v", got)
	}
}
