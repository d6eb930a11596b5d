package status

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
)

// pieceStore keeps, in status_pieces, the pieces of a placement's
// revisions (of one kind) that cannot be applied yet: a revision.Store in
// the transaction that consumes them, which holds the placement's row lock.
type pieceStore struct {
	tx        pgx.Tx
	placement string
	kind      string
}

func (s pieceStore) Held(ctx context.Context) ([]events.Part, error) {
	rows, err := s.tx.Query(ctx, `select revision, base, piece, pieces from status_pieces where placement = $1 and kind = $2`,
		s.placement, s.kind)
	if err != nil {
		return nil, fmt.Errorf("pieces held of %s: %w", s.placement, err)
	}
	parts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[events.Part])
	if err != nil {
		return nil, fmt.Errorf("pieces held of %s: %w", s.placement, err)
	}
	return parts, nil
}

func (s pieceStore) Hold(ctx context.Context, p events.Part, payload []byte) error {
	_, err := s.tx.Exec(ctx, `
		insert into status_pieces (placement, kind, revision, piece, pieces, base, payload)
		values ($1, $2, $3, $4, $5, $6, $7)
		on conflict do nothing`, s.placement, s.kind, p.Revision, p.Piece, p.Pieces, p.Base, payload)
	if err != nil {
		return fmt.Errorf("hold piece %d of revision %d of %s: %w", p.Piece, p.Revision, s.placement, err)
	}
	return nil
}

func (s pieceStore) Take(ctx context.Context, revisions []int64) (map[int64][][]byte, error) {
	rows, err := s.tx.Query(ctx, `
		select revision, payload from status_pieces
		where placement = $1 and kind = $2 and revision = any($3)
		order by revision, piece`, s.placement, s.kind, revisions)
	if err != nil {
		return nil, fmt.Errorf("take pieces of %s: %w", s.placement, err)
	}
	out := map[int64][][]byte{}
	var (
		rev     int64
		payload []byte
	)
	if _, err := pgx.ForEachRow(rows, []any{&rev, &payload}, func() error {
		out[rev] = append(out[rev], append([]byte(nil), payload...))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("take pieces of %s: %w", s.placement, err)
	}
	if _, err := s.tx.Exec(ctx, `delete from status_pieces where placement = $1 and kind = $2 and revision <= $3`,
		s.placement, s.kind, revisions[len(revisions)-1]); err != nil {
		return nil, fmt.Errorf("take pieces of %s: %w", s.placement, err)
	}
	return out, nil
}
