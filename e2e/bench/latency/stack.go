package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/flotilla-dev/flotilla/services/standalone"
)

// stack is the standalone stack the benchmark runs against, in the
// background until stop.
type stack struct {
	cancel  context.CancelFunc
	ready   chan standalone.Endpoints
	errc    chan error // standalone.Run's result
	stopped bool
}

// startStack starts the standalone stack. It outlives ctx: stop ends it and
// waits for it to shut down, so members, PostgreSQL and NATS are stopped
// before the benchmark returns, whatever happened.
func startStack(ctx context.Context, cfg standalone.Config) *stack {
	stackCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &stack{cancel: cancel, ready: make(chan standalone.Endpoints, 1), errc: make(chan error, 1)}
	cfg.Ready = func(e standalone.Endpoints) { s.ready <- e }
	go func() {
		s.errc <- standalone.Run(stackCtx, cfg)
	}()
	return s
}

// waitReady waits until the stack serves.
func (s *stack) waitReady(ctx context.Context) (standalone.Endpoints, error) {
	select {
	case ep := <-s.ready:
		return ep, nil
	case err := <-s.errc:
		s.stopped = true
		if err == nil {
			err = errors.New("it stopped")
		}
		return standalone.Endpoints{}, fmt.Errorf("standalone did not start: %w", err)
	case <-ctx.Done():
		return standalone.Endpoints{}, ctx.Err()
	}
}

// endOnFailure returns a context that ends when the stack fails: a stack
// that fails mid-run ends the benchmark.
func (s *stack) endOnFailure(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case err := <-s.errc:
			// Put it back for stop.
			s.errc <- err
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// stop ends the stack and returns its error, once.
func (s *stack) stop() error {
	if s.stopped {
		return nil
	}
	s.stopped = true
	s.cancel()
	return <-s.errc
}
