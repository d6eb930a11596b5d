package pieces_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/platform/pieces"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

var _ revision.Store = pieces.Store{}

// inTx runs f in a transaction on a fresh migrated database and commits it.
func inTx(t *testing.T, f func(ctx context.Context, tx pgx.Tx)) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, postgres.NewTestDB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f(ctx, tx)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

func payload(p events.Part) []byte { return fmt.Appendf(nil, `"r%dp%d"`, p.Revision, p.Piece) }

func held(t *testing.T, ctx context.Context, s pieces.Store) []events.Part {
	t.Helper()
	parts, err := s.Held(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(parts, func(a, b events.Part) int {
		if a.Revision != b.Revision {
			return int(a.Revision - b.Revision)
		}
		return a.Piece - b.Piece
	})
	return parts
}

// take is s.Take(revisions), the payloads as strings.
func take(t *testing.T, ctx context.Context, s pieces.Store, revisions ...int64) map[int64][]string {
	t.Helper()
	taken, err := s.Take(ctx, revisions)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][]string{}
	for rev, payloads := range taken {
		for _, p := range payloads {
			out[rev] = append(out[rev], string(p))
		}
	}
	return out
}

// TestStore holds pieces of several revisions in each consumer's table and
// takes some: each revision's payloads come in piece order, and every piece
// up to the last revision taken is gone, of this placement and kind only.
func TestStore(t *testing.T) {
	for _, table := range []string{"rollout_pieces", "status_pieces"} {
		t.Run(table, func(t *testing.T) {
			inTx(t, func(ctx context.Context, tx pgx.Tx) {
				s := pieces.In(tx, table, "web", "decision")
				other := pieces.In(tx, table, "db", "decision")
				kept := []events.Part{
					{Revision: 1, Base: true, Piece: 0, Pieces: 1},
					{Revision: 2, Piece: 1, Pieces: 2},
					{Revision: 2, Piece: 0, Pieces: 2},
					{Revision: 3, Piece: 0, Pieces: 1},
					{Revision: 4, Piece: 0, Pieces: 2},
				}
				for _, p := range kept {
					if err := s.Hold(ctx, p, payload(p)); err != nil {
						t.Fatal(err)
					}
				}
				// Holding a piece again is a no-op.
				if err := s.Hold(ctx, kept[1], []byte(`"again"`)); err != nil {
					t.Fatal(err)
				}
				if err := other.Hold(ctx, kept[0], payload(kept[0])); err != nil {
					t.Fatal(err)
				}

				want := []events.Part{kept[0], kept[2], kept[1], kept[3], kept[4]}
				if got := held(t, ctx, s); !reflect.DeepEqual(got, want) {
					t.Fatalf("Held = %+v, want %+v", got, want)
				}
				wantTaken := map[int64][]string{2: {`"r2p0"`, `"r2p1"`}, 3: {`"r3p0"`}}
				if got := take(t, ctx, s, 2, 3); !reflect.DeepEqual(got, wantTaken) {
					t.Fatalf("Take = %v, want %v", got, wantTaken)
				}
				if got := held(t, ctx, s); !reflect.DeepEqual(got, []events.Part{kept[4]}) {
					t.Errorf("held after Take = %+v, want revision 4 alone", got)
				}
				if got := held(t, ctx, other); !reflect.DeepEqual(got, []events.Part{kept[0]}) {
					t.Errorf("another placement's pieces after Take = %+v, want its own", got)
				}
			})
		})
	}
}

// TestStoreKinds keeps a placement's decision and progress pieces apart
// (status_pieces holds both).
func TestStoreKinds(t *testing.T) {
	inTx(t, func(ctx context.Context, tx pgx.Tx) {
		decisions := pieces.In(tx, "status_pieces", "web", "decision")
		progress := pieces.In(tx, "status_pieces", "web", "progress")
		p := events.Part{Revision: 1, Base: true, Piece: 0, Pieces: 1}
		if err := decisions.Hold(ctx, p, payload(p)); err != nil {
			t.Fatal(err)
		}
		if got := held(t, ctx, progress); len(got) != 0 {
			t.Fatalf("progress pieces = %+v, want none", got)
		}
		if got := take(t, ctx, progress, 1); len(got) != 0 {
			t.Errorf("Take of progress = %v, want nothing", got)
		}
		if got := held(t, ctx, decisions); !reflect.DeepEqual(got, []events.Part{p}) {
			t.Errorf("decision pieces after taking progress = %+v, want %+v", got, []events.Part{p})
		}
	})
}
