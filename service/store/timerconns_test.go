package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

// TestTimerConnsAreKeptForTimers: with a pool of 4 and 2 connections kept for timers, two step transactions
// hold all the steps may have; a third step waits, while a timer-firing transaction still runs and commits.
func TestTimerConnsAreKeptForTimers(t *testing.T) {
	s, err := store.Open(context.Background(), store.Config{URL: storetest.URL(t, store.MySQL), DataDir: t.TempDir(), Logger: testkit.Quiet(),
		MaxOpenConns: 4, TimerConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC)
	for _, id := range []string{"a", "b", "c", "timer"} {
		if err := s.CreateInstance(ctx, newWork(id, model.DefaultTenant, at)); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	inside := make(chan string, 3)
	done := make(chan error, 3)
	step := func(id string) {
		done <- s.UpdateInstance(ctx, model.DefaultTenant, id, func(w *model.Work) error {
			inside <- id
			<-release
			w.Instance.Title = "stepped"
			return nil
		})
	}
	go step("a")
	go step("b")
	for range 2 {
		<-inside
	}
	go step("c") // the steps' share is taken: it waits for a slot

	fired := make(chan error, 1)
	go func() {
		fired <- s.UpdateInstance(model.ForTimerFiring(ctx), model.DefaultTenant, "timer", func(w *model.Work) error {
			w.Instance.Title = "fired"
			return nil
		})
	}()
	select {
	case err := <-fired:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a timer transaction waited behind the steps")
	}
	if inst, _, err := s.GetInstance(ctx, model.DefaultTenant, "timer"); err != nil || inst.Title != "fired" {
		t.Fatalf("the timer's work: %+v, %v", inst, err)
	}
	select {
	case id := <-inside:
		t.Fatalf("step %s ran while two steps held the steps' share of the pool", id)
	default:
	}
	close(release)
	if id := <-inside; id != "c" {
		t.Fatalf("then %s ran, want c", id)
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"a", "b", "c"} {
		if inst, _, err := s.GetInstance(ctx, model.DefaultTenant, id); err != nil || inst.Title != "stepped" {
			t.Fatalf("step %s: %+v, %v", id, inst, err)
		}
	}
}
