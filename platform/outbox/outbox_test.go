package outbox_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/bustest"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/platform/outbox"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

// TestOutboxRelaysCommittedEventsOnce enqueues events in a transaction that
// commits and in one that rolls back: only the committed one reaches the bus,
// once, even when two relays run.
func TestOutboxRelaysCommittedEventsOnce(t *testing.T) {
	env := servicetest.New(t)
	js, pool := env.JS, env.Pool
	subj, _ := events.SchedulingSubject("web")
	mk := func(name string) cloudevents.Event {
		ev, err := events.New(events.TypePlacementScheduled, "/flotilla/test", "web", events.ID("decision", name),
			events.PlacementScheduled{Placement: "web", Fulfilled: true})
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	committed, rolledBack := mk("committed"), mk("rolled-back")
	if err := pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
		return outbox.Enqueue(t.Context(), tx, subj, committed)
	}); err != nil {
		t.Fatal(err)
	}
	_ = pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
		if err := outbox.Enqueue(t.Context(), tx, subj, rolledBack); err != nil {
			return err
		}
		return fmt.Errorf("the decision failed")
	})

	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { (&outbox.Relay{Pool: pool, JS: js, Sweep: 50 * time.Millisecond}).Run(ctx) })
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	var seen []string
	var mu sync.Mutex
	bustest.Consume(t, js, bus.StreamEvents, bus.ConsumerRollout, func(_ context.Context, ev cloudevents.Event, _ bus.Meta) error {
		mu.Lock()
		seen = append(seen, ev.ID())
		mu.Unlock()
		return nil
	})
	poll.Until(t, 20*time.Second, "outbox drained", func() error {
		var pending int
		if err := pool.QueryRow(t.Context(), `select count(*) from outbox where published_at is null`).Scan(&pending); err != nil {
			return err
		}
		if pending != 0 {
			return fmt.Errorf("%d outbox rows unpublished", pending)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return fmt.Errorf("nothing consumed yet")
		}
		return nil
	})
	// Every publish is acknowledged before its row is marked: a doubled one
	// would be in the stream by now.
	if n := streamMsgs(t, env, bus.StreamEvents); n != 1 {
		t.Fatalf("the stream holds %d messages, want the committed event once", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != committed.ID() {
		t.Fatalf("consumed %v, want only the committed event %s", seen, committed.ID())
	}
}
