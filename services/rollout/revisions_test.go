package rollout_test

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/rollout"
)

// TestDecisionsInPiecesAndChanges feeds the rollout a decision in pieces out
// of order, a stale piece and a revision of changes arriving before the one
// it follows; the rollout acts only on whole revisions, in order, and
// reports its progress as changes.
func TestDecisionsInPiecesAndChanges(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	f.hub(namespaceManifest("shop"))
	one := intstr.FromInt32(100)
	f.place(rolling(crp("shop", namespace("shop")), one, one, 0))

	decision := func(rev int64, base bool, piece, pieces, count int, clusters ...events.ClusterDecision) events.PlacementScheduledV2 {
		if clusters == nil {
			clusters = []events.ClusterDecision{}
		}
		return events.PlacementScheduledV2{Placement: "shop", Revision: rev, Base: base, Piece: piece, Pieces: pieces, Generation: 1,
			PlacementType: api.PickAllPlacementType, ChosenCount: count, Fulfilled: true, Clusters: clusters}
	}
	add := func(c string) events.ClusterDecision {
		return events.ClusterDecision{Cluster: c, Action: events.ActionAdded}
	}

	// Revision 1, a base in two pieces: the second first.
	f.publishDecision(decision(1, true, 1, 2, 3, add("m3")))
	f.sentinel()
	if ps := f.progress("shop"); len(f.works("m3", "shop")) != 0 || len(ps) > 0 && len(ps[len(ps)-1].Clusters) > 0 {
		t.Fatal("the rollout acted on half a decision")
	}
	f.publishDecision(decision(1, true, 0, 2, 3, add("m1"), add("m2")))
	for _, c := range []string{"m1", "m2", "m3"} {
		f.waitWork(c, "shop", 0)
	}
	f.waitProgress("shop", "three clusters started", func(p revision.Progress) error {
		if got := started(p); !slices.Equal(got, []string{"m1", "m2", "m3"}) {
			return fmt.Errorf("started %v", got)
		}
		return nil
	})

	// Revision 3 (m4 added) before revision 2 (m1 removed), and a stale
	// piece of revision 1 once more.
	f.publishDecision(decision(3, false, 0, 1, 3, add("m4")))
	f.publishDecision(decision(1, true, 0, 2, 3, add("m1"), add("m2")))
	f.sentinel()
	if len(f.works("m4", "shop")) != 0 || len(f.tombstones("shop")) != 0 {
		t.Fatal("the rollout applied revision 3 before revision 2")
	}
	f.publishDecision(decision(2, false, 0, 1, 2, events.ClusterDecision{Cluster: "m1", Action: events.ActionRemoved, Reason: "m1 is tainted now"}))
	f.waitWork("m4", "shop", 0)
	poll.Until(t, patience, "m1 tombstoned with the decision's reason", func() error {
		ts := f.tombstones("shop")
		if len(ts) != 1 || ts[0].Cluster != "m1" || ts[0].Reason != "m1 is tainted now" {
			return fmt.Errorf("tombstones %+v", ts)
		}
		return nil
	})
	f.waitProgress("shop", "m2, m3, m4 started", func(p revision.Progress) error {
		if got := started(p); !slices.Equal(got, []string{"m2", "m3", "m4"}) || len(p.Clusters) != 3 {
			return fmt.Errorf("started %v of %d", got, len(p.Clusters))
		}
		return nil
	})

	// The progress travelled as a base first, then as changes only.
	var pieces []events.RolloutProgressedV2
	for _, e := range f.emitted() {
		if e.typ == events.TypeRolloutProgressedV2 {
			pieces = append(pieces, decode[events.RolloutProgressedV2](t, e))
		}
	}
	if !pieces[0].Base || pieces[0].Revision != 1 {
		t.Errorf("first progress %s, want a base at revision 1", mustJSON(pieces[0]))
	}
	for i, p := range pieces[1:] {
		if p.Revision != int64(i+2) {
			t.Errorf("progress revisions %d after %d", p.Revision, p.Revision-1)
		}
		if !p.Base && len(p.Clusters) >= p.ClusterCount && p.ClusterCount > 0 {
			t.Errorf("a progress of changes lists all %d clusters: %s", p.ClusterCount, mustJSON(p))
		}
	}
	var kept int
	if err := f.Pool.QueryRow(t.Context(), `select count(*) from rollout_pieces`).Scan(&kept); err != nil || kept != 0 {
		t.Errorf("%d pieces still kept (%v), want none", kept, err)
	}
}

// sentinel publishes a member event the rollout handles after everything
// published before it, waits until it was handled, and returns its id.
func (f *fixture) sentinel() string {
	f.t.Helper()
	f.sentinels++
	name := fmt.Sprintf("sentinel-%d", f.sentinels)
	subj, _ := events.MemberSubject(name)
	ev, err := events.New(events.TypeMemberLeft, "/flotilla/test", "", events.ID("sentinel", name), events.MemberLeft{Name: name})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.Publisher.Publish(f.t.Context(), subj, ev); err != nil {
		f.t.Fatal(err)
	}
	poll.Until(f.t, patience, name+" handled", func() error {
		var n int
		if err := f.Pool.QueryRow(f.t.Context(), `select count(*) from inbox where consumer = 'rollout' and event_id = $1`, ev.ID()).Scan(&n); err != nil || n == 0 {
			return fmt.Errorf("not yet (%v)", err)
		}
		return nil
	})
	return ev.ID()
}
