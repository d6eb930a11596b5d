package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/platform/inbox"
)

// TestBatchTakesEffectOncePerEvent handles a batch that repeats an event and holds one
// handled before: each event's effect exists once, and HandleBatch says which ran.
func TestBatchTakesEffectOncePerEvent(t *testing.T) {
	pool := servicetest.New(t).Pool
	a, b, c := placementDeleted(t, "a"), placementDeleted(t, "b"), placementDeleted(t, "c")
	if _, err := inbox.HandleBatch(t.Context(), pool, "status", []cloudevents.Event{a}, record(pool, []cloudevents.Event{a})); err != nil {
		t.Fatal(err)
	}
	batch := []cloudevents.Event{a, b, b, c}
	ran, err := inbox.HandleBatch(t.Context(), pool, "status", batch, record(pool, batch))
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, true, false, true}; !slices.Equal(ran, want) {
		t.Errorf("ran %v, want %v", ran, want)
	}
	for _, ev := range []cloudevents.Event{a, b, c} {
		if n := audited(t, pool, ev.ID()); n != 1 {
			t.Errorf("event %s took effect %d times, want once", ev.ID(), n)
		}
	}
}

// TestFailedBatchLeavesNothing fails on the last event of a batch: no effect and no
// inbox row of any of its events remains, so each can be handled again.
func TestFailedBatchLeavesNothing(t *testing.T) {
	pool := servicetest.New(t).Pool
	batch := []cloudevents.Event{placementDeleted(t, "x"), placementDeleted(t, "y")}
	_, err := inbox.HandleBatch(t.Context(), pool, "status", batch, func(ctx context.Context, tx pgx.Tx, i int) error {
		if i == 1 {
			return errors.New("the database said no")
		}
		return record(pool, batch)(ctx, tx, i)
	})
	if err == nil {
		t.Fatal("a failing batch succeeded")
	}
	for _, ev := range batch {
		if n := audited(t, pool, ev.ID()); n != 0 {
			t.Errorf("event %s of a failed batch left %d effects", ev.ID(), n)
		}
	}
	ran, err := inbox.HandleBatch(t.Context(), pool, "status", batch, record(pool, batch))
	if err != nil || !slices.Equal(ran, []bool{true, true}) {
		t.Errorf("handling the batch again: ran %v, %v; want both to run", ran, err)
	}
}

func placementDeleted(t *testing.T, name string) cloudevents.Event {
	t.Helper()
	ev, err := events.New(events.TypePlacementDeleted, "/flotilla/test", name, "", events.PlacementDeleted{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// record writes an audit row for the i-th event: an effect the test can count.
func record(_ *pgxpool.Pool, evs []cloudevents.Event) func(context.Context, pgx.Tx, int) error {
	return func(ctx context.Context, tx pgx.Tx, i int) error {
		ev := evs[i]
		_, err := tx.Exec(ctx, `insert into audit_log (event_id, type, source, subject, time, payload)
			values ($1, $2, $3, $4, $5, $6)`, ev.ID(), ev.Type(), ev.Source(), ev.Subject(), ev.Time(), ev.Data())
		return err
	}
}

func audited(t *testing.T, pool *pgxpool.Pool, id string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), `select count(*) from audit_log where event_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(fmt.Errorf("count effects: %w", err))
	}
	return n
}

// TestFailedBatchLeavesItsConnectionClean fails a batch on a statement PostgreSQL refuses
// (which aborts the transaction) and then on the context ending mid-batch, with a pool of
// one connection: the next batch runs on a connection outside any transaction and commits.
func TestFailedBatchLeavesItsConnectionClean(t *testing.T) {
	cfg := servicetest.New(t).Pool.Config()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()

	refused := []cloudevents.Event{placementDeleted(t, "refused")}
	if _, err := inbox.HandleBatch(t.Context(), pool, "status", refused, func(ctx context.Context, tx pgx.Tx, _ int) error {
		_, err := tx.Exec(ctx, "insert into no_such_table values (1)")
		return err
	}); err == nil {
		t.Fatal("a batch whose statement was refused succeeded")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancelled := []cloudevents.Event{placementDeleted(t, "cancelled")}
	if _, err := inbox.HandleBatch(ctx, pool, "status", cancelled, func(ctx context.Context, tx pgx.Tx, _ int) error {
		cancel()
		_, err := tx.Exec(ctx, "select 1")
		return err
	}); err == nil {
		t.Fatal("a batch whose context ended succeeded")
	}

	batch := []cloudevents.Event{placementDeleted(t, "after"), refused[0], cancelled[0]}
	ran, err := inbox.HandleBatch(t.Context(), pool, "status", batch, record(pool, batch))
	if err != nil || !slices.Equal(ran, []bool{true, true, true}) {
		t.Fatalf("the batch after the failures: ran %v, %v; want all three to run", ran, err)
	}
	for _, ev := range batch {
		if n := audited(t, pool, ev.ID()); n != 1 {
			t.Errorf("event %s took effect %d times, want once", ev.ID(), n)
		}
	}
}
