package revision_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/revision"
)

// fuzzPieces reads fuzz input as decision pieces arriving in that order:
// per piece, varints of the revision, base, piece and pieces and one byte of
// cluster. Only pieces that events.Decode accepts are kept: the rest never
// reach a consumer.
func fuzzPieces(data []byte) []events.PlacementScheduledV2 {
	next := func() int64 {
		v, n := binary.Varint(data)
		if n <= 0 {
			data = nil
			return 0
		}
		data = data[n:]
		return v
	}
	var out []events.PlacementScheduledV2
	for len(data) > 0 && len(out) < 64 {
		p := events.PlacementScheduledV2{Placement: "web", Revision: next(), Base: next()&1 == 1,
			Piece: int(next()), Pieces: int(next()), Clusters: []events.ClusterDecision{}}
		if len(data) > 0 {
			c := data[0]
			data = data[1:]
			action := []events.DecisionAction{events.ActionAdded, events.ActionKept, events.ActionRemoved, ""}[c%4]
			p.Clusters = append(p.Clusters, events.ClusterDecision{Cluster: fmt.Sprintf("member-%d", c/4), Action: action})
		}
		if _, err := events.New(events.TypePlacementScheduledV2, "/fuzz", "", "fuzz", p); err != nil {
			continue
		}
		out = append(out, p)
	}
	return out
}

// pieceEncoding writes pieces as fuzz input, for seeds.
func pieceEncoding(parts ...events.Part) []byte {
	var b []byte
	for i, p := range parts {
		base := int64(0)
		if p.Base {
			base = 1
		}
		for _, v := range []int64{p.Revision, base, int64(p.Piece), int64(p.Pieces)} {
			b = binary.AppendVarint(b, v)
		}
		b = append(b, byte(i))
	}
	return b
}

// memStore is a revision.Store in memory that keeps the first copy of each
// piece of a revision, as the services' tables do (their key is the
// revision and the piece).
type memStore map[[2]int64]heldPiece

type heldPiece struct {
	part    events.Part
	payload []byte
}

func (s memStore) Held(context.Context) ([]events.Part, error) {
	var out []events.Part
	for _, h := range s {
		out = append(out, h.part)
	}
	return out, nil
}

func (s memStore) Hold(_ context.Context, p events.Part, payload []byte) error {
	k := [2]int64{p.Revision, int64(p.Piece)}
	if _, ok := s[k]; !ok {
		s[k] = heldPiece{p, payload}
	}
	return nil
}

func (s memStore) Take(_ context.Context, revs []int64) (map[int64][][]byte, error) {
	out := map[int64][][]byte{}
	for _, r := range revs {
		for i := int64(0); ; i++ {
			h, ok := s[[2]int64{r, i}]
			if !ok {
				break
			}
			out[r] = append(out[r], h.payload)
		}
	}
	last := revs[len(revs)-1]
	for k := range s {
		if k[0] <= last {
			delete(s, k)
		}
	}
	return out, nil
}

// FuzzAssembler feeds valid decision pieces in any order, repeated or
// missing, to an Assembler and to Receive over a store. Both hand over the
// same revisions, each once, in increasing order, whole (every piece, in
// piece order), starting with the next revision or a base; a gap lists at
// most 16 missing pieces; and each revision applies to a Decision.
func FuzzAssembler(f *testing.F) {
	p := func(rev int64, piece, pieces int, base bool) events.Part {
		return events.Part{Revision: rev, Piece: piece, Pieces: pieces, Base: base}
	}
	f.Add(pieceEncoding(p(1, 0, 1, true), p(2, 0, 1, false), p(3, 1, 2, false), p(3, 0, 2, false)))
	f.Add(pieceEncoding(p(2, 0, 1, false), p(1, 0, 1, true), p(1, 0, 1, true)))
	f.Add(pieceEncoding(p(1, 0, 2, true), p(2, 0, 1, false), p(4, 0, 3, true), p(4, 2, 3, true), p(4, 1, 3, true)))
	f.Fuzz(func(t *testing.T, data []byte) {
		pieces := fuzzPieces(data)
		var a revision.Assembler[events.PlacementScheduledV2]
		store := memStore{}
		var applied int64
		var d revision.Decision
		for _, piece := range pieces {
			got := a.Add(piece)
			if g, ok := a.Gap(); ok && len(g.Missing) > 16 {
				t.Fatalf("gap lists %d missing pieces, over 16", len(g.Missing))
			}
			received, err := revision.Receive(context.Background(), store, applied, piece)
			if err != nil && !errors.Is(err, revision.ErrGap) {
				t.Fatalf("receive: %v", err)
			}
			if a, b := revs(got), revs(received); a != b {
				t.Fatalf("Assembler hands over %s, Receive %s", a, b)
			}
			for i, rev := range got {
				r := rev[0].Revision
				if r <= applied || i == 0 && r != applied+1 && !rev[0].Base {
					t.Fatalf("revision %d handed over at revision %d (base %v)", r, applied, rev[0].Base)
				}
				if len(rev) != rev[0].Pieces {
					t.Fatalf("revision %d handed over with %d of %d pieces", r, len(rev), rev[0].Pieces)
				}
				for j, q := range rev {
					if q.Revision != r || q.Piece != j || q.Pieces != rev[0].Pieces {
						t.Fatalf("revision %d: piece %d is %+v", r, j, q.Part())
					}
				}
				if err := d.Apply(rev); err != nil && !errors.Is(err, revision.ErrMismatch) {
					t.Fatalf("apply revision %d: %v", r, err)
				}
				applied = r
			}
			if a.Applied() != applied {
				t.Fatalf("Applied() = %d after handing over up to %d", a.Applied(), applied)
			}
		}
	})
}

func revs(got [][]events.PlacementScheduledV2) string {
	out, _ := json.Marshal(got)
	return string(out)
}

// Found by FuzzAssembler: a revision whose pieces disagree on their number
// (or on being a base) completed or not depending on which piece was held
// first, so Receive and the Assembler differed and Apply refused what they
// handed over; and a piece claiming 2^50 pieces made Waiting list each of
// them (a consumer hung on one valid event). Such a revision now never
// completes, and a gap lists at most 16 missing pieces.
func TestMixedAndHugeRevisions(t *testing.T) {
	mixed := []events.Part{{Revision: 1, Base: true, Piece: 0, Pieces: 2}, {Revision: 1, Piece: 1, Pieces: 24}}
	for range 2 {
		if got := revision.Next(0, mixed); got != nil {
			t.Errorf("Next(%v) = %v, want nothing: the pieces disagree", mixed, got)
		}
		slices.Reverse(mixed)
	}
	huge := []events.Part{{Revision: 1, Base: true, Piece: 0, Pieces: 1 << 50}, {Revision: 2, Piece: 0, Pieces: 1}}
	g, ok := revision.Waiting(0, huge)
	if !ok || g.Revision != 1 || len(g.Missing) != 16 || g.Missing[0] != 1 {
		t.Errorf("Waiting = %+v, %v; want revision 1 missing pieces 1 to 16", g, ok)
	}
}
