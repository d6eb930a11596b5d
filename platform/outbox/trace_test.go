package outbox_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/platform/outbox"
)

// The outbox publishes an event long after the transaction that emitted it
// ended: the trace it was emitted in is stored with it, and the backlog says
// how many events wait and for how long.
func TestAnEventLeavesTheOutboxInTheTraceItWasEmittedIn(t *testing.T) {
	env := servicetest.New(t)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traced := trace.ContextWithSpanContext(t.Context(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	if err := pgx.BeginFunc(t.Context(), env.Pool, func(tx pgx.Tx) error {
		if err := outbox.Enqueue(traced, tx, subjectOf(1), scheduled(t, placementOf(1), 1)); err != nil {
			return err
		}
		return outbox.Enqueue(t.Context(), tx, subjectOf(2), scheduled(t, placementOf(2), 1))
	}); err != nil {
		t.Fatal(err)
	}
	backlog, err := outbox.ReadBacklog(t.Context(), env.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if backlog.Rows != 2 || backlog.Oldest <= 0 {
		t.Errorf("backlog before relaying = %+v, want 2 rows, waiting", backlog)
	}

	var (
		mu        sync.Mutex
		published []string
	)
	runRelay(t, &outbox.Relay{Pool: env.Pool, JS: env.JS, Sweep: 50 * time.Millisecond, Published: func(typ string) {
		mu.Lock()
		published = append(published, typ)
		mu.Unlock()
	}})
	waitDrained(t, env)

	if got := traceparentOn(t, env, subjectOf(1)); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("the event emitted in a trace left the outbox with traceparent %q", got)
	}
	if got := traceparentOn(t, env, subjectOf(2)); got != "" {
		t.Errorf("the event emitted outside any trace left the outbox with traceparent %q", got)
	}
	mu.Lock()
	if want := []string{events.TypePlacementScheduled, events.TypePlacementScheduled}; !slices.Equal(published, want) {
		t.Errorf("the relay counted %v published, want %v", published, want)
	}
	mu.Unlock()
	if backlog, err := outbox.ReadBacklog(t.Context(), env.Pool); err != nil || backlog != (outbox.Backlog{}) {
		t.Errorf("backlog after relaying = %+v, %v; want none", backlog, err)
	}
}

// traceparentOn is the ce-traceparent header of the last message on subject.
func traceparentOn(t *testing.T, env *servicetest.Env, subject string) string {
	t.Helper()
	s, err := env.JS.Stream(context.Background(), bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(t.Context(), subject)
	if err != nil {
		t.Fatalf("nothing on %s: %v", subject, err)
	}
	return m.Header.Get(bus.HeaderTraceparent)
}
