package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Backlog is the outbox's publish queue: the rows waiting to be published
// (quarantined rows left out), and how long the oldest has waited.
type Backlog struct {
	Rows   int64
	Oldest time.Duration
}

// Querier is what ReadBacklog needs of a pool or connection.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// ReadBacklog reads the backlog of the outbox; it walks the publish queue's
// index (outbox_queue), not the table.
func ReadBacklog(ctx context.Context, q Querier) (Backlog, error) {
	var (
		b      Backlog
		oldest float64
	)
	err := q.QueryRow(ctx, `
		select count(*), coalesce(extract(epoch from now() - min(created_at)), 0)::float8
		from outbox where published_at is null and quarantined_at is null`).Scan(&b.Rows, &oldest)
	if err != nil {
		return Backlog{}, fmt.Errorf("read the outbox backlog: %w", err)
	}
	b.Oldest = time.Duration(max(oldest, 0) * float64(time.Second))
	return b, nil
}
