// Package pieces keeps, in a consumer's PostgreSQL table, the pieces of a
// placement's revisions that it cannot apply yet: the revision.Store of the
// consumers of events that travel as revisions in pieces (the rollout's
// rollout_pieces, the status service's status_pieces; migration 008).
//
// A Store works in the transaction that consumes the piece, which holds the
// placement's row lock, so the pieces of a placement are never written by two
// transactions at once.
package pieces

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
)

// Store keeps the pieces of one placement's revisions of one kind
// ("decision" or "progress") in a table with the columns of rollout_pieces.
// It implements revision.Store.
type Store struct {
	tx        pgx.Tx
	table     string // quoted
	placement string
	kind      string
}

// In is the Store of the placement's revisions of the kind in table, within tx.
func In(tx pgx.Tx, table, placement, kind string) Store {
	return Store{tx: tx, table: pgx.Identifier{table}.Sanitize(), placement: placement, kind: kind}
}

// Held lists the parts of the pieces kept.
func (s Store) Held(ctx context.Context) ([]events.Part, error) {
	rows, err := s.tx.Query(ctx, `select revision, base, piece, pieces from `+s.table+` where placement = $1 and kind = $2`,
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

// Hold keeps a piece; keeping one twice is a no-op.
func (s Store) Hold(ctx context.Context, p events.Part, payload []byte) error {
	_, err := s.tx.Exec(ctx, `
		insert into `+s.table+` (placement, kind, revision, piece, pieces, base, payload)
		values ($1, $2, $3, $4, $5, $6, $7)
		on conflict do nothing`, s.placement, s.kind, p.Revision, p.Piece, p.Pieces, p.Base, payload)
	if err != nil {
		return fmt.Errorf("hold piece %d of revision %d of %s: %w", p.Piece, p.Revision, s.placement, err)
	}
	return nil
}

// Take returns the payloads kept for the revisions (in ascending order), each
// revision's in piece order, and drops every piece of a revision up to the
// last one.
func (s Store) Take(ctx context.Context, revisions []int64) (map[int64][][]byte, error) {
	rows, err := s.tx.Query(ctx, `
		select revision, payload from `+s.table+`
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
	if _, err := s.tx.Exec(ctx, `delete from `+s.table+` where placement = $1 and kind = $2 and revision <= $3`,
		s.placement, s.kind, revisions[len(revisions)-1]); err != nil {
		return nil, fmt.Errorf("take pieces of %s: %w", s.placement, err)
	}
	return out, nil
}
