package status

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
)

// failoverHistory lists a placement's failover steps (the scheduler writes
// failover_history), oldest first: the newest events.MaxFailoverRecords.
func (s *server) failoverHistory(ctx context.Context, placement string) ([]events.FailoverRecord, error) {
	rows, err := s.pool.Query(ctx, `
		select kind, from_cluster, to_cluster, message, at
		from (select * from failover_history where placement = $1 order by at desc, id desc limit $2) t
		order by at, id`, placement, events.MaxFailoverRecords)
	if err != nil {
		return nil, fmt.Errorf("failovers: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[events.FailoverRecord])
	if err != nil {
		return nil, fmt.Errorf("failovers: %w", err)
	}
	return out, nil
}
