package status_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// TestDecisionsAndProgressInPieces folds a decision whose pieces arrive out
// of order and progress whose revisions do: the status shows only whole
// revisions, applied in order, and tells watchers which clusters changed.
func TestDecisionsAndProgressInPieces(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0.Add(time.Minute))
	pub := func(id, typ, subj string, payload any) {
		t.Helper()
		ev := f.event(typ, id, t0, payload)
		f.publish(subj, ev)
		f.handled(ev.ID())
	}
	placed := subject(events.PlacementSubject("web-2-crp"))
	scheduling := subject(events.SchedulingSubject("web-2-crp"))
	rolling := subject(events.RolloutSubject("web-2-crp"))
	pub("placement", events.TypePlacementUpserted, placed, events.PlacementUpserted{Placement: webPlacement(api.WhenToTakeOverTypeAlways)})

	add := func(c string) events.ClusterDecision {
		return events.ClusterDecision{Cluster: c, Action: events.ActionAdded}
	}
	first := decision("web-2-crp", 1, 1, add("member-1"), add("member-2"), add("member-3"))
	second := first
	first.Pieces, second.Pieces, second.Piece = 2, 2, 1
	first.Clusters, second.Clusters = first.Clusters[:2], first.Clusters[2:]
	pub("decision-1.1", events.TypePlacementScheduledV2, scheduling, second)
	if got := f.statusClusters(); len(got) != 0 {
		t.Fatalf("half a decision folded: %v", got)
	}
	pub("decision-1.0", events.TypePlacementScheduledV2, scheduling, first)
	if got := f.statusClusters(); !slices.Equal(got, []string{"member-1", "member-2", "member-3"}) {
		t.Fatalf("clusters %v after the whole decision", got)
	}

	started := func(c string) events.ClusterProgress { return events.ClusterProgress{Cluster: c, Started: true} }
	pub("progress-1", events.TypeRolloutProgressedV2, rolling, progress("web-2-crp", 1, 1, 0, started("member-1")))
	// Revision 3 (member-3 started) before 2 (member-2 started).
	p3 := progress("web-2-crp", 3, 1, 0, started("member-3"))
	p3.Base, p3.ClusterCount = false, 3
	pub("progress-3", events.TypeRolloutProgressedV2, rolling, p3)
	if got := f.rolloutStarted(); !slices.Equal(got, []string{"member-1"}) {
		t.Fatalf("started %v before revision 2", got)
	}
	p2 := progress("web-2-crp", 2, 1, 0, started("member-2"))
	p2.Base, p2.ClusterCount = false, 2
	pub("progress-2", events.TypeRolloutProgressedV2, rolling, p2)
	if got := f.rolloutStarted(); !slices.Equal(got, []string{"member-1", "member-2", "member-3"}) {
		t.Fatalf("started %v after revisions 2 and 3", got)
	}
	var kept int
	if err := f.Pool.QueryRow(t.Context(), `select count(*) from status_pieces`).Scan(&kept); err != nil || kept != 0 {
		t.Errorf("%d pieces still kept (%v)", kept, err)
	}

	// Watchers saw the clusters that changed, each time.
	poll.Until(t, time.Minute, "status changes", func() error {
		var seen []string
		for _, c := range f.statusChanges() {
			var names []string
			for _, cl := range c.Clusters {
				names = append(names, cl.Cluster)
			}
			seen = append(seen, fmt.Sprintf("%d:%v", c.Revision, names))
		}
		want := []string{"1:[]", "2:[member-1 member-2 member-3]", "3:[member-1]", "4:[member-2 member-3]"}
		if !slices.Equal(seen, want) {
			return fmt.Errorf("status changes %v, want %v", seen, want)
		}
		return nil
	})
}

// statusClusters lists the clusters in the placement's status.
func (f *fixture) statusClusters() []string {
	f.t.Helper()
	r, _ := query[api.ClusterResourcePlacement](f, events.QueryGetPlacement, events.NameQuery{Name: "web-2-crp"})
	var out []string
	for _, ps := range r.Result.Status.PlacementStatuses {
		out = append(out, ps.ClusterName)
	}
	return out
}

// rolloutStarted lists the clusters whose RolloutStarted is True in the
// placement's stored status.
func (f *fixture) rolloutStarted() []string {
	f.t.Helper()
	r, _ := query[api.ClusterResourcePlacement](f, events.QueryGetPlacement, events.NameQuery{Name: "web-2-crp"})
	var out []string
	for _, ps := range r.Result.Status.PlacementStatuses {
		if c := meta.FindStatusCondition(ps.Conditions, string(api.PerClusterRolloutStartedConditionType)); c != nil && c.Status == "True" {
			out = append(out, ps.ClusterName)
		}
	}
	return out
}
