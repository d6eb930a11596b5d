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
	ran := false
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			insert into inbox (consumer, event_id) values ($1, $2)
			on conflict do nothing`, consumer, ev.ID())
		if err != nil {
			return fmt.Errorf("claim inbox row: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		ran = true
		return fn(ctx, tx)
	})
	if err != nil {
		return false, fmt.Errorf("handle %s %s as %s: %w", ev.Type(), ev.ID(), consumer, err)
	}
	return ran, nil
}
