// Package outbox moves the side effects the engine committed (outbox rows: timers to arm or cancel, plugin runs,
// events) to the components that carry them out. Rows are deleted only after their handler succeeded, so a crash
// between the engine's commit and the dispatch loses nothing: the rows are dispatched again after a restart, and a
// transaction retried after a deadlock hands its items over again. Delivery is at least once, so handlers must be
// idempotent (arming a timer twice, waking the executor twice and inserting a delivery under its unique key are).
package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/halley-bpm/halley/model"
)

// Handler carries out a batch of outbox items of one kind.
type Handler func(ctx context.Context, items []model.OutboxItem) error

// All is a handler calling each of hs in order with the same items (several consumers of one kind: event rows
// go to the subscriptions and to the notifications). The first error stops it, and the batch is dispatched again
// later to all of them, so each must be idempotent, as every handler is.
func All(hs ...Handler) Handler {
	return func(ctx context.Context, items []model.OutboxItem) error {
		for _, h := range hs {
			if err := h(ctx, items); err != nil {
				return err
			}
		}
		return nil
	}
}

// Handlers says who carries out the items of each kind (model.OutboxEvent, model.OutboxTimerArm, ...).
type Handlers map[string]Handler

// Options configure a Dispatcher.
type Options struct {
	BatchSize int           // rows per transaction; default 200
	Interval  time.Duration // poll interval when nothing wakes the loop (other replicas' commits); default 1s
	Logger    *slog.Logger
	// OnDispatched is called after each dispatched batch (test signal).
	OnDispatched func(n int)
}

// Dispatcher is the loop that drains the outbox.
type Dispatcher struct {
	store    model.OutboxStore
	handlers Handlers
	opts     Options
	wake     chan struct{}
}

// New returns a dispatcher of the handlers' kinds; items of other kinds are dropped, loudly.
func New(store model.OutboxStore, handlers Handlers, opts Options) (*Dispatcher, error) {
	if store == nil || len(handlers) == 0 {
		return nil, fmt.Errorf("outbox: a dispatcher needs a store and at least one handler")
	}
	for kind, h := range handlers {
		if h == nil {
			return nil, fmt.Errorf("outbox: the handler of %q is nil", kind)
		}
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 200
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Dispatcher{store: store, handlers: maps.Clone(handlers), opts: opts, wake: make(chan struct{}, 1)}, nil
}

// Notify wakes the loop: a commit wrote outbox rows.
func (d *Dispatcher) Notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run drains the outbox until ctx is done.
func (d *Dispatcher) Run(ctx context.Context) error {
	backoff := time.Duration(0)
	for {
		n, err := d.DispatchOnce(ctx)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			backoff = min(max(backoff*2, 100*time.Millisecond), 30*time.Second)
			d.opts.Logger.Error("outbox: dispatch failed; will retry", "err", err, "retry_in", backoff)
		case n == d.opts.BatchSize:
			backoff = 0
			continue // more is waiting
		default:
			backoff = 0
		}
		wait := d.opts.Interval
		if backoff > 0 {
			wait = backoff
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-d.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// DispatchOnce dispatches one batch and returns its size.
func (d *Dispatcher) DispatchOnce(ctx context.Context) (int, error) {
	n, err := d.store.DispatchOutbox(ctx, d.opts.BatchSize, func(ctx context.Context, items []model.OutboxItem) error {
		byKind := map[string][]model.OutboxItem{}
		var order []string
		for _, it := range items {
			if _, ok := byKind[it.Kind]; !ok {
				order = append(order, it.Kind)
			}
			byKind[it.Kind] = append(byKind[it.Kind], it)
		}
		for _, k := range order {
			h, ok := d.handlers[k]
			if !ok {
				// Nobody handles this kind in this build: drop it loudly rather than block the outbox forever.
				d.opts.Logger.Error("outbox: no handler; dropping items", "kind", k, "count", len(byKind[k]))
				continue
			}
			if err := h(ctx, byKind[k]); err != nil {
				return err
			}
		}
		return nil
	})
	if n > 0 && d.opts.OnDispatched != nil {
		d.opts.OnDispatched(n)
	}
	return n, err
}
