// Package inbox makes a consumer's effects happen once per event: the
// consumer's writes and a row keyed by (consumer, event id) commit in one
// transaction, so a redelivered event finds its row and changes nothing.
package inbox

import (
	"context"
	"fmt"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Handle runs fn in a transaction together with the inbox row for
// (consumer, ev.ID()). It reports whether fn ran: false means the event was
// handled before, and nothing was done. An error from fn rolls everything
// back, so a retry starts clean.
func Handle(ctx context.Context, pool *pgxpool.Pool, consumer string, ev cloudevents.Event, fn func(ctx context.Context, tx pgx.Tx) error) (bool, error) {
	ran, err := HandleBatchThen(ctx, pool, consumer, []cloudevents.Event{ev},
		func(ctx context.Context, tx pgx.Tx, _ int) error { return fn(ctx, tx) }, nil)
	if err != nil {
		return false, err
	}
	return ran[0], nil
}

// HandleBatch is Handle for several events in one transaction: each event's inbox row
// and effects (fn(ctx, tx, i) for evs[i], in order) commit together, and events handled
// before are skipped. It reports which events ran. An error from any fn rolls the whole
// batch back.
func HandleBatch(ctx context.Context, pool *pgxpool.Pool, consumer string, evs []cloudevents.Event, fn func(ctx context.Context, tx pgx.Tx, i int) error) ([]bool, error) {
	return HandleBatchThen(ctx, pool, consumer, evs, fn, nil)
}

// HandleBatchThen is HandleBatch with a last step in the same transaction, after every
// event ran: a consumer that gathers the batch's effects (one status per placement, say)
// writes them there. then may be nil.
func HandleBatchThen(ctx context.Context, pool *pgxpool.Pool, consumer string, evs []cloudevents.Event,
	fn func(ctx context.Context, tx pgx.Tx, i int) error, then func(ctx context.Context, tx pgx.Tx) error) ([]bool, error) {
	ran := make([]bool, len(evs))
	err := func() error {
		ids := make([]string, len(evs))
		for i, ev := range evs {
			ids[i] = ev.ID()
		}
		tx, claimed, err := beginClaim(ctx, pool, consumer, ids)
		if err != nil {
			return err
		}
		defer tx.end(ctx)
		fresh := make(map[string]bool, len(claimed))
		for _, id := range claimed {
			fresh[id] = true
		}
		for i, ev := range evs {
			// An id twice in one batch (a redelivery racing the first) runs once.
			if !fresh[ev.ID()] {
				continue
			}
			delete(fresh, ev.ID())
			ran[i] = true
			if err := fn(ctx, tx, i); err != nil {
				return fmt.Errorf("%s %s: %w", ev.Type(), ev.ID(), err)
			}
		}
		if then != nil {
			if err := then(ctx, tx); err != nil {
				return err
			}
		}
		return tx.Commit(ctx)
	}()
	if err != nil {
		return nil, fmt.Errorf("handle a batch of %d events as %s: %w", len(evs), consumer, err)
	}
	return ran, nil
}
