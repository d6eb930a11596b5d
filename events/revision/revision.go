// Package revision puts the v2 events that travel as revisions in pieces
// (events.PlacementScheduledV2, events.RolloutProgressedV2,
// events.PlacementStatusChangedV2; see "Revisions in pieces" in package
// events) back together, and cuts them up.
//
// Next says which revisions a consumer can apply given the pieces it holds;
// Receive runs a consumer's side over a Store of its own (a table in its
// database, written in the transaction that consumes the piece); Assembler
// does the same in memory. Decision and Progress are the states a consumer
// assembles from decisions and rollout progress. Split is the producer's
// side: it cuts a revision's clusters into bounded pieces.
package revision

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/flotilla-dev/flotilla/events"
)

// Piece is a payload that travels as one piece of a revision.
type Piece interface {
	Part() events.Part
}

// Next returns the revisions a consumer whose state is at revision applied
// can apply now, in order, given the parts it holds of later revisions: the
// newest base all of whose pieces it holds (the revisions before it no
// longer matter), then each following revision whose pieces it all holds.
// It returns nil when nothing can be applied.
func Next(applied int64, held []events.Part) []int64 {
	complete := completeRevisions(applied, held)
	var out []int64
	at := applied
	for r, base := range complete {
		if base && r > at {
			at = r
		}
	}
	if at > applied {
		out = append(out, at)
	}
	for {
		if _, ok := complete[at+1]; !ok {
			return out
		}
		at++
		out = append(out, at)
	}
}

// completeRevisions maps each revision after applied of which every piece
// is held to whether it is a base.
func completeRevisions(applied int64, held []events.Part) map[int64]bool {
	type tally struct {
		pieces int
		base   bool
		seen   map[int]bool
		// mixed: pieces disagree on the revision's number of pieces or
		// whether it is a base. Such a revision never completes: which of
		// its pieces counted would depend on the order they are held in.
		mixed bool
	}
	by := map[int64]*tally{}
	for _, p := range held {
		if p.Revision <= applied {
			continue
		}
		t := by[p.Revision]
		if t == nil {
			t = &tally{pieces: p.Pieces, base: p.Base, seen: map[int]bool{}}
			by[p.Revision] = t
		}
		t.mixed = t.mixed || p.Pieces != t.pieces || p.Base != t.base
		if p.Piece >= 0 && p.Piece < t.pieces {
			t.seen[p.Piece] = true
		}
	}
	out := map[int64]bool{}
	for r, t := range by {
		if len(t.seen) == t.pieces && !t.mixed {
			out[r] = t.base
		}
	}
	return out
}

// Gap describes a revision a consumer waits for while later ones are
// complete: a piece was lost, or is late (a redelivery after a failure, a
// replica that took longer).
type Gap struct {
	// Revision is the first revision after the applied one that is not
	// complete; Missing lists its pieces not held, the first maxMissing of
	// them (nil when none is held: their number is unknown).
	Revision int64
	Missing  []int
	// Complete is the newest complete revision held, and Behind how many
	// complete revisions wait behind the gap.
	Complete int64
	Behind   int
}

func (g Gap) String() string {
	what := fmt.Sprintf("revision %d is missing", g.Revision)
	if g.Missing != nil {
		what = fmt.Sprintf("revision %d lacks piece(s) %v", g.Revision, g.Missing)
	}
	return fmt.Sprintf("%s while %d later revision(s) up to %d are complete", what, g.Behind, g.Complete)
}

// maxMissing bounds Gap.Missing: a piece may claim any number of pieces.
const maxMissing = 16

// LostAfter is how many complete revisions may wait behind an incomplete one
// before Receive reports the gap: fewer are pieces arriving out of order.
const LostAfter = 16

// Waiting reports a gap: after Next returned nil, the first revision after
// applied that is incomplete while later revisions are complete.
func Waiting(applied int64, held []events.Part) (Gap, bool) {
	complete := completeRevisions(applied, held)
	var newest int64
	for r := range complete {
		newest = max(newest, r)
	}
	if newest == 0 {
		return Gap{}, false
	}
	g := Gap{Complete: newest, Behind: len(complete)}
	for r := applied + 1; r < newest; r++ {
		if _, ok := complete[r]; ok {
			continue
		}
		g.Revision = r
		seen, pieces := map[int]bool{}, 0
		for _, p := range held {
			if p.Revision == r {
				seen[p.Piece], pieces = true, p.Pieces
			}
		}
		for i := 0; i < pieces && len(g.Missing) < maxMissing; i++ {
			if !seen[i] {
				g.Missing = append(g.Missing, i)
			}
		}
		return g, true
	}
	return Gap{}, false
}

// Store keeps, for one consumer and one placement's revisions of one kind,
// the pieces that could not be applied yet. A consumer implements it over a
// table, in the transaction that consumes the piece.
type Store interface {
	// Held lists the parts of the pieces kept.
	Held(ctx context.Context) ([]events.Part, error)
	// Hold keeps a piece (keeping one twice is a no-op).
	Hold(ctx context.Context, p events.Part, payload []byte) error
	// Take returns the payloads kept for the revisions, each revision's in
	// piece order, and drops every piece of a revision up to the last one.
	Take(ctx context.Context, revisions []int64) (map[int64][][]byte, error)
}

// ErrGap wraps the Gap Receive found: the piece is kept, nothing applies.
var ErrGap = errors.New("a revision waits for a missing piece")

// Receive takes in one piece for a consumer at revision applied and returns
// the revisions to apply now, in order, each as its pieces in piece order;
// nil when the piece is stale (at or below applied) or had to be kept for
// later. When LostAfter complete revisions or more wait behind an incomplete
// one it returns nil and an error wrapping ErrGap, after keeping the piece:
// log it and carry on (the consumer stays at its revision until the piece
// comes or a base supersedes it).
func Receive[P Piece](ctx context.Context, store Store, applied int64, p P) ([][]P, error) {
	part := p.Part()
	if part.Revision <= applied {
		return nil, nil
	}
	held, err := store.Held(ctx)
	if err != nil {
		return nil, err
	}
	if len(held) == 0 && part.Pieces == 1 && (part.Revision == applied+1 || part.Base) {
		return [][]P{{p}}, nil // the usual case: the next revision, whole
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("keep piece %d of revision %d: %w", part.Piece, part.Revision, err)
	}
	if err := store.Hold(ctx, part, raw); err != nil {
		return nil, err
	}
	// A store keeps the first copy of a piece; so does held.
	if !slices.ContainsFunc(held, func(h events.Part) bool { return h.Revision == part.Revision && h.Piece == part.Piece }) {
		held = append(held, part)
	}
	revs := Next(applied, held)
	if len(revs) == 0 {
		if g, ok := Waiting(applied, held); ok && g.Behind >= LostAfter {
			return nil, fmt.Errorf("%w: %s", ErrGap, g)
		}
		return nil, nil
	}
	payloads, err := store.Take(ctx, revs)
	if err != nil {
		return nil, err
	}
	out := make([][]P, 0, len(revs))
	for _, r := range revs {
		var pieces []P
		for _, b := range payloads[r] {
			var q P
			if err := json.Unmarshal(b, &q); err != nil {
				return nil, fmt.Errorf("read kept piece of revision %d: %w", r, err)
			}
			pieces = append(pieces, q)
		}
		out = append(out, pieces)
	}
	return out, nil
}

// Assembler is Receive in memory, for one placement's revisions of one kind:
// a watcher that reads the events from the start (a test, a benchmark).
type Assembler[P Piece] struct {
	applied int64
	held    map[int64]map[int]P
}

// Applied is the revision applied last.
func (a *Assembler[P]) Applied() int64 { return a.applied }

// Add takes in one piece and returns the revisions to apply now, in order,
// each as its pieces in piece order.
func (a *Assembler[P]) Add(p P) [][]P {
	part := p.Part()
	if part.Revision <= a.applied {
		return nil
	}
	if a.held == nil {
		a.held = map[int64]map[int]P{}
	}
	if a.held[part.Revision] == nil {
		a.held[part.Revision] = map[int]P{}
	}
	if _, dup := a.held[part.Revision][part.Piece]; !dup {
		a.held[part.Revision][part.Piece] = p // the first copy, as a Store keeps it
	}
	var parts []events.Part
	for _, pieces := range a.held {
		for _, q := range pieces {
			parts = append(parts, q.Part())
		}
	}
	revs := Next(a.applied, parts)
	if len(revs) == 0 {
		return nil
	}
	out := make([][]P, 0, len(revs))
	for _, r := range revs {
		pieces := a.held[r]
		idx := make([]int, 0, len(pieces))
		for i := range pieces {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		var list []P
		for _, i := range idx {
			list = append(list, pieces[i])
		}
		out = append(out, list)
	}
	a.applied = revs[len(revs)-1]
	for r := range a.held {
		if r <= a.applied {
			delete(a.held, r)
		}
	}
	return out
}

// Gap reports what the assembler waits for while later revisions are
// complete, as Waiting does.
func (a *Assembler[P]) Gap() (Gap, bool) {
	var parts []events.Part
	for _, pieces := range a.held {
		for _, q := range pieces {
			parts = append(parts, q.Part())
		}
	}
	return Waiting(a.applied, parts)
}

// checkRevision checks that pieces are all the pieces of one revision, in
// order.
func checkRevision[P Piece](pieces []P) error {
	if len(pieces) == 0 {
		return errors.New("a revision of no pieces")
	}
	first := pieces[0].Part()
	if len(pieces) != first.Pieces {
		return fmt.Errorf("revision %d: %d of %d pieces", first.Revision, len(pieces), first.Pieces)
	}
	for i, p := range pieces {
		part := p.Part()
		if part.Revision != first.Revision || part.Pieces != first.Pieces || part.Piece != i || part.Base != first.Base {
			return fmt.Errorf("revision %d: piece %d is %+v", first.Revision, i, part)
		}
	}
	return nil
}
