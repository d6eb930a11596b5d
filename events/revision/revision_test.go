package revision_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/revision"
)

func part(rev int64, piece, pieces int, base bool) events.Part {
	return events.Part{Revision: rev, Piece: piece, Pieces: pieces, Base: base}
}

func TestNext(t *testing.T) {
	tests := []struct {
		name    string
		applied int64
		held    []events.Part
		want    []int64
	}{
		{"nothing held", 3, nil, nil},
		{"the next, whole", 3, []events.Part{part(4, 0, 1, false)}, []int64{4}},
		{"the next, one piece of two", 3, []events.Part{part(4, 1, 2, false)}, nil},
		{"the next, both pieces", 3, []events.Part{part(4, 1, 2, false), part(4, 0, 2, false)}, []int64{4}},
		{"a run", 3, []events.Part{part(6, 0, 1, false), part(4, 0, 1, false), part(5, 0, 1, false)}, []int64{4, 5, 6}},
		{"a run stops at a gap", 3, []events.Part{part(4, 0, 1, false), part(6, 0, 1, false)}, []int64{4}},
		{"a delta after a gap waits", 3, []events.Part{part(5, 0, 1, false)}, nil},
		{"a base skips the gap", 3, []events.Part{part(6, 0, 1, false), part(5, 0, 1, true)}, []int64{5, 6}},
		{"the newest complete base wins", 1, []events.Part{part(3, 0, 1, true), part(5, 0, 2, true), part(5, 1, 2, true), part(6, 0, 1, false)}, []int64{5, 6}},
		{"an incomplete base does not", 1, []events.Part{part(3, 0, 1, true), part(5, 0, 2, true), part(6, 0, 1, false)}, []int64{3}},
		{"stale parts are ignored", 5, []events.Part{part(4, 0, 1, true), part(5, 0, 1, false)}, nil},
		{"a piece held twice counts once", 0, []events.Part{part(1, 0, 2, true), part(1, 0, 2, true)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := revision.Next(tt.applied, tt.held); !slices.Equal(got, tt.want) {
				t.Errorf("Next(%d, %v) = %v, want %v", tt.applied, tt.held, got, tt.want)
			}
		})
	}
}

func TestWaitingReportsALostPiece(t *testing.T) {
	// Pieces out of order are no gap.
	if g, ok := revision.Waiting(3, []events.Part{part(4, 1, 3, false)}); ok {
		t.Errorf("a piece out of order reported as a gap: %v", g)
	}
	g, ok := revision.Waiting(3, []events.Part{part(4, 1, 3, false), part(5, 0, 1, false)})
	if !ok || g.Revision != 4 || !slices.Equal(g.Missing, []int{0, 2}) || g.Complete != 5 || g.Behind != 1 {
		t.Errorf("Waiting = %+v, %v; want revision 4 lacking pieces 0 and 2, 5 complete", g, ok)
	}
	g, ok = revision.Waiting(3, []events.Part{part(5, 0, 1, false)})
	if !ok || g.Revision != 4 || g.Missing != nil || !strings.Contains(g.String(), "revision 4 is missing") {
		t.Errorf("Waiting = %+v (%s), %v; want revision 4 missing", g, g, ok)
	}
}

// store is a Store in memory.
type store struct {
	kept map[events.Part][]byte
}

func (s *store) Held(context.Context) ([]events.Part, error) {
	var out []events.Part
	for p := range s.kept {
		out = append(out, p)
	}
	return out, nil
}

func (s *store) Hold(_ context.Context, p events.Part, payload []byte) error {
	if s.kept == nil {
		s.kept = map[events.Part][]byte{}
	}
	s.kept[p] = payload
	return nil
}

func (s *store) Take(_ context.Context, revs []int64) (map[int64][][]byte, error) {
	out := map[int64][][]byte{}
	for _, r := range revs {
		for i := 0; ; i++ {
			found := false
			for p, b := range s.kept {
				if p.Revision == r && p.Piece == i {
					out[r], found = append(out[r], b), true
				}
			}
			if !found {
				break
			}
		}
	}
	last := revs[len(revs)-1]
	for p := range s.kept {
		if p.Revision <= last {
			delete(s.kept, p)
		}
	}
	return out, nil
}

func decision(rev int64, piece, pieces int, base bool, clusters ...events.ClusterDecision) events.PlacementScheduledV2 {
	return events.PlacementScheduledV2{Placement: "web", Revision: rev, Base: base, Piece: piece, Pieces: pieces, Generation: 1,
		Clusters: clusters}
}

func chosen(name string) events.ClusterDecision {
	return events.ClusterDecision{Cluster: name, Action: events.ActionAdded}
}

func revisions(got [][]events.PlacementScheduledV2) []string {
	var out []string
	for _, pieces := range got {
		var s []string
		for _, p := range pieces {
			s = append(s, fmt.Sprintf("%d.%d", p.Revision, p.Piece))
		}
		out = append(out, strings.Join(s, "+"))
	}
	return out
}

func TestReceiveAppliesEachRevisionOnceWhole(t *testing.T) {
	ctx := context.Background()
	s := &store{}
	var applied int64
	receive := func(p events.PlacementScheduledV2) []string {
		t.Helper()
		got, err := revision.Receive(ctx, s, applied, p)
		if err != nil {
			t.Fatalf("Receive(%d.%d) at %d: %v", p.Revision, p.Piece, applied, err)
		}
		if len(got) > 0 {
			applied = got[len(got)-1][0].Revision
		}
		return revisions(got)
	}
	check := func(got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("applied %v, want %v", got, want)
		}
	}
	check(receive(decision(1, 0, 1, true, chosen("a"))), "1.0")
	// Pieces of revision 2 out of order, and one twice.
	check(receive(decision(2, 2, 3, false, chosen("e"))))
	check(receive(decision(2, 0, 3, false, chosen("c"))))
	check(receive(decision(2, 0, 3, false, chosen("c"))))
	check(receive(decision(2, 1, 3, false, chosen("d"))), "2.0+2.1+2.2")
	// A stale piece.
	check(receive(decision(1, 0, 1, true, chosen("a"))))
	// Revision 4 before 3.
	check(receive(decision(4, 0, 1, false)))
	check(receive(decision(3, 0, 1, false)), "3.0", "4.0")
	if len(s.kept) != 0 {
		t.Errorf("pieces still kept: %v", s.kept)
	}
	// A lost piece of 5 while later revisions are complete: the gap is
	// reported once LostAfter of them wait; a base ends the wait.
	check(receive(decision(5, 1, 2, false)))
	for r := int64(6); r < 6+revision.LostAfter-1; r++ {
		check(receive(decision(r, 0, 1, false)))
	}
	_, err := revision.Receive(ctx, s, applied, decision(6+revision.LostAfter-1, 0, 1, false))
	if !errors.Is(err, revision.ErrGap) || !strings.Contains(err.Error(), "revision 5 lacks piece(s) [0] while 16 later revision(s) up to 21 are complete") {
		t.Errorf("Receive = %v, want the gap of revision 5", err)
	}
	check(receive(decision(30, 0, 1, true)), "30.0")
	if len(s.kept) != 0 {
		t.Errorf("pieces still kept after the base: %v", s.kept)
	}
}

func TestAssemblerMatchesReceive(t *testing.T) {
	var a revision.Assembler[events.PlacementScheduledV2]
	var got []string
	for _, p := range []events.PlacementScheduledV2{
		decision(2, 0, 1, false), decision(1, 1, 2, true), decision(1, 0, 2, true), decision(1, 0, 2, true), decision(4, 0, 1, true), decision(3, 0, 1, false),
	} {
		got = append(got, revisions(a.Add(p))...)
	}
	if want := []string{"1.0+1.1", "2.0", "4.0"}; !slices.Equal(got, want) {
		t.Errorf("assembled %v, want %v", got, want)
	}
	if a.Applied() != 4 {
		t.Errorf("applied %d, want 4", a.Applied())
	}
	a.Add(decision(6, 0, 1, false))
	if g, ok := a.Gap(); !ok || g.Revision != 5 || g.Behind != 1 {
		t.Errorf("Gap = %+v, %v; want revision 5", g, ok)
	}
}

func TestDecisionAppliesBasesAndChanges(t *testing.T) {
	var d revision.Decision
	base := decision(1, 0, 1, true, chosen("a"), chosen("b"),
		events.ClusterDecision{Cluster: "x", Reason: "tainted"})
	base.ChosenCount = 2
	if err := d.Apply([]events.PlacementScheduledV2{base}); err != nil {
		t.Fatal(err)
	}
	delta := decision(2, 0, 1, false,
		events.ClusterDecision{Cluster: "a", Action: events.ActionRemoved, Reason: "the cluster left"},
		chosen("c"),
		events.ClusterDecision{Cluster: "x", Action: events.ActionRemoved})
	delta.ChosenCount, delta.Generation = 2, 2
	if err := d.Apply([]events.PlacementScheduledV2{delta}); err != nil {
		t.Fatal(err)
	}
	if got := names(d.Chosen); !slices.Equal(got, []string{"b", "c"}) || d.Revision != 2 || d.Generation != 2 {
		t.Errorf("chosen %v at revision %d generation %d", got, d.Revision, d.Generation)
	}
	if d.RemovalReason("a") != "the cluster left" || len(d.Removed) != 1 || len(d.NotChosen) != 0 {
		t.Errorf("removed %+v, not chosen %+v: want a removed with its reason, x dropped", d.Removed, d.NotChosen)
	}
	// Chosen again: no longer removed.
	again := decision(3, 0, 1, false, chosen("a"))
	again.ChosenCount = 3
	if err := d.Apply([]events.PlacementScheduledV2{again}); err != nil || len(d.Removed) != 0 {
		t.Errorf("after a is chosen again: removed %+v, err %v", d.Removed, err)
	}
	// A count that does not match is reported, and applied.
	wrong := decision(4, 0, 1, false, chosen("z"))
	wrong.ChosenCount = 9
	if err := d.Apply([]events.PlacementScheduledV2{wrong}); !errors.Is(err, revision.ErrMismatch) || len(d.Chosen) != 4 {
		t.Errorf("Apply with a wrong count = %v, chosen %v", err, names(d.Chosen))
	}
	// Not all pieces: refused.
	if err := d.Apply([]events.PlacementScheduledV2{decision(5, 0, 2, false)}); err == nil {
		t.Error("a revision of 1 of its 2 pieces applied")
	}
	// A base replaces everything.
	if err := d.Apply([]events.PlacementScheduledV2{decision(9, 0, 1, true)}); err != nil || len(d.Chosen) != 0 || d.Chosen == nil {
		t.Errorf("after an empty base: chosen %#v, err %v", d.Chosen, err)
	}
}

// A decision stored from v1 reads as revision 0 with its clusters.
func TestDecisionReadsV1(t *testing.T) {
	v1 := events.PlacementScheduled{Placement: "web", Generation: 3, Chosen: []events.ClusterDecision{chosen("a")}, Fulfilled: true}
	b, _ := json.Marshal(v1)
	var d revision.Decision
	if err := json.Unmarshal(b, &d); err != nil || d.Revision != 0 || len(d.Chosen) != 1 || !d.Fulfilled {
		t.Errorf("v1 decision read as %+v (%v)", d, err)
	}
}

func TestProgressAppliesChanges(t *testing.T) {
	pr := func(rev int64, base bool, count int, cs ...events.ClusterProgress) []events.RolloutProgressedV2 {
		return []events.RolloutProgressedV2{{Placement: "web", Revision: rev, Base: base, Pieces: 1, ClusterCount: count, Clusters: cs}}
	}
	var p revision.Progress
	if err := p.Apply(pr(1, true, 2, events.ClusterProgress{Cluster: "a", Started: true}, events.ClusterProgress{Cluster: "b"})); err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(pr(2, false, 2, events.ClusterProgress{Cluster: "a", Removed: true}, events.ClusterProgress{Cluster: "c", Stuck: true})); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range p.Clusters {
		got = append(got, c.Cluster)
	}
	if !slices.Equal(got, []string{"b", "c"}) || p.Cluster("c") == nil || !p.Cluster("c").Stuck || p.Cluster("a") != nil {
		t.Errorf("progress %+v", p)
	}
}

func names(cs []events.ClusterDecision) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Cluster)
	}
	return out
}
