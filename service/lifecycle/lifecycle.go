// Package lifecycle starts and stops Halley's background workers (the outbox dispatcher, the plugin executor,
// the timer loop, timer recovery, housekeeping, the HTTP server, ...). It is River's start/stop helper reduced to
// what Halley needs: a worker is a Service — a name and the function that does its work until its context is
// cancelled — and Run starts a list of them in order, waits until the process is asked to stop or one of them
// dies, and then stops them in reverse order within a deadline.
//
// Adding a worker is adding one entry to the list in `halley serve`: a Run function that returns nil once its
// context is cancelled, placed after everything it needs (it is stopped before them).
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// Service is one background worker. Set Name and Run (and Drain where the work does not end with its context
// alone); Start and Stop do the rest. A Service runs once: it cannot be started again after Stop.
type Service struct {
	// Name says which worker it is in logs and errors.
	Name string
	// Run does the work until ctx is cancelled, then returns nil. A Run that returns before Stop — with an error
	// or without — has died.
	Run func(ctx context.Context) error
	// Drain, when set, is called by Stop after Run's context is cancelled, with Stop's deadline, for work that
	// does not end with its context alone: http.Server.Shutdown drains the requests in flight, the plugin
	// executor waits for its runs and kills them at the deadline. Run returns once Drain has done its part.
	Drain func(ctx context.Context) error

	mu       sync.Mutex
	started  bool
	stopping bool
	cancel   context.CancelFunc
	done     chan struct{}
	err      error
}

// Errors of Start.
var (
	ErrAlreadyStarted = errors.New("lifecycle: already started")
	ErrNoRun          = errors.New("lifecycle: a service needs a name and a Run function")
)

// Start runs the service's Run in the background and returns at once. Run's context carries ctx's values but not
// its cancellation: only Stop ends it, so that services stop one after another, not all at once.
func (s *Service) Start(ctx context.Context) error {
	if s.Name == "" || s.Run == nil {
		return ErrNoRun
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("%s: %w", s.Name, ErrAlreadyStarted)
	}
	s.started = true
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	if s.done == nil {
		s.done = make(chan struct{})
	}
	go func() {
		defer close(s.done)
		err := s.run(rctx)
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
	}()
	return nil
}

// run calls Run, turning a panic into the service's error: a worker that panics has died like any other.
func (s *Service) run(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return s.Run(ctx)
}

// Stop asks the service to end (cancelling Run's context, then Drain) and waits until Run has returned, or until
// ctx is done. It returns Run's error (Drain's when that failed), or ctx's error when the service did not stop in
// time. Stopping a service that was never started does nothing.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	if !s.started {
		s.mu.Unlock()
		return nil
	}
	s.stopping = true
	s.mu.Unlock()
	s.cancel()
	var derr error
	if s.Drain != nil {
		derr = s.Drain(ctx)
	}
	select {
	case <-s.done: // checked first: a Run that has returned counts even when the deadline passed meanwhile
	default:
		select {
		case <-s.done:
		case <-ctx.Done():
			return fmt.Errorf("%s did not stop in time: %w", s.Name, ctx.Err())
		}
	}
	if derr != nil {
		return fmt.Errorf("%s: %w", s.Name, derr)
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	return nil
}

// Done is closed when Run has returned, whether Stop asked it to or not.
func (s *Service) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		s.done = make(chan struct{}) // never started: never done
	}
	return s.done
}

// Err is what Run returned (nil while it runs).
func (s *Service) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// died reports why the service ended by itself, or nil when Stop ended it.
func (s *Service) died() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil
	}
	if s.err != nil {
		return fmt.Errorf("%s died: %w", s.Name, s.err)
	}
	return fmt.Errorf("%s stopped by itself", s.Name)
}

// Run starts the services in order and keeps them running until ctx is done (the process was asked to stop) or
// one of them dies; then it stops the started ones in reverse order, all within stopTimeout (once it has passed,
// the remaining ones are still told to stop but not waited for). It returns nil after a stop that was asked for
// and went well; otherwise the first of: the error of a service that would not start, the error of the service
// that died, an error of a stop.
func Run(ctx context.Context, stopTimeout time.Duration, log *slog.Logger, services ...*Service) error {
	if log == nil {
		log = slog.Default()
	}
	// wctx ends with ctx, with the first service that dies, or when a service would not start.
	wctx, endWatch := context.WithCancel(ctx)
	defer endWatch()
	watch, wctx := errgroup.WithContext(wctx)
	var started []*Service
	var startErr error
	for _, s := range services {
		if err := s.Start(ctx); err != nil {
			startErr = fmt.Errorf("start %s: %w", s.Name, err)
			break
		}
		log.Debug("started", "worker", s.Name)
		started = append(started, s)
		watch.Go(func() error {
			select {
			case <-s.Done():
				return s.died()
			case <-wctx.Done():
				return nil
			}
		})
	}
	if startErr == nil {
		<-wctx.Done()
	}
	endWatch()
	deathErr := watch.Wait()
	if deathErr != nil {
		log.Error("a worker died; stopping the others", "err", deathErr)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	var stopErr error
	for i := len(started) - 1; i >= 0; i-- {
		s := started[i]
		if err := s.Stop(sctx); err != nil {
			log.Error("worker stop", "worker", s.Name, "err", err)
			if stopErr == nil {
				stopErr = err
			}
			continue
		}
		log.Debug("stopped", "worker", s.Name)
	}
	// A worker that died is reported as its death, not again as the error its Stop returns.
	for _, err := range []error{startErr, deathErr, stopErr} {
		if err != nil {
			return err
		}
	}
	return nil
}
