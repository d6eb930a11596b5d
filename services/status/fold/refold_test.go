package fold_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/status/fold"
)

// Refold, which folds again only the clusters whose report changed, gives what
// Status gives from every report, step by step through a rollout: reports
// applied, refused, unavailable, stale and withdrawn, with overrides on a
// cluster, a stuck one, a failover replacement and the ReportDiff strategy.
func TestRefoldIsStatus(t *testing.T) {
	for _, reportDiff := range []bool{false, true} {
		t.Run(fmt.Sprintf("reportDiff=%v", reportDiff), func(t *testing.T) {
			crp := placement(api.WhenToTakeOverTypeAlways)
			if reportDiff {
				crp.Spec.Strategy.ApplyStrategy.Type = api.ApplyStrategyTypeReportDiff
			}
			w := newWorld(t, crp)
			w.decide(events.PlacementScheduledV2{Placement: "web-2-crp", Generation: w.gen(), PlacementType: api.PickAllPlacementType,
				Fulfilled: true, ChosenCount: 4, Clusters: []events.ClusterDecision{
					{Cluster: "member-1", Action: events.ActionAdded},
					{Cluster: "member-2", Action: events.ActionAdded},
					{Cluster: "member-3", Action: events.ActionAdded, FailoverReason: api.FailoverReplacementScheduledReason,
						FailoverMessage: "replaces member-9"},
					{Cluster: "member-4", Action: events.ActionAdded},
				}})
			m1 := started("member-1", 1)
			m1.Overrides = &events.ClusterOverrides{ClusterResourceOverrides: []string{"web-labels-2"}}
			m4 := started("member-4", 1)
			m4.Stuck = true
			w.snapshot(1).rollout(1, m1, started("member-2", 1), started("member-3", 1), m4)

			unavailable := func(cluster string) *events.WorkReported {
				r := applied(cluster, 1)
				r.Available = cond("False", api.NotAvailableYetReason, "1 manifest not available")
				r.Manifests[0].Available = cond("False", api.ManifestNotAvailableYetReason, "not ready")
				return r
			}
			diffed := func(cluster string) *events.WorkReported {
				r := applied(cluster, 1)
				r.DiffReported = &events.Condition{Status: "True"}
				r.Manifests[0].Diffs = []api.PatchDetail{{Path: "/metadata/labels/x", ValueInMember: "1"}}
				return r
			}
			steps := []struct {
				cluster string
				report  *events.WorkReported
			}{
				{"member-1", applied("member-1", 1)},
				{"member-2", refused("member-2", 1, api.ManifestNotTakenOverReason, "web-2")},
				{"member-3", unavailable("member-3")},
				{"member-4", applied("member-4", 0)}, // stale: an older snapshot
				{"member-2", applied("member-2", 1)},
				{"member-3", applied("member-3", 1)},
				{"member-4", diffed("member-4")},
				{"member-1", &events.WorkReported{Cluster: "member-1", Placement: "web-2-crp", Deleted: true}},
				{"member-1", diffed("member-1")},
				{"member-9", applied("member-9", 1)}, // not chosen
			}
			at := t0
			prev := w.status(api.PlacementStatus{}, at)
			for i, s := range steps {
				at = at.Add(time.Minute)
				w.report(s.report)
				want := w.status(prev, at)
				got, ok := fold.Refold(&w.in, prev, map[string]bool{s.cluster: true}, at)
				if !ok {
					t.Fatalf("step %d (%s): Refold could not keep the other clusters' entries", i, s.cluster)
				}
				if g, wt := mustJSON(t, got), mustJSON(t, want); g != wt {
					t.Fatalf("step %d (%s): Refold gave\n%s\nStatus gave\n%s", i, s.cluster, g, wt)
				}
				prev = want
			}
		})
	}
}

// Refold refuses to keep entries prev does not hold, or holds for another generation.
func TestRefoldNeedsPrevEntries(t *testing.T) {
	w := newWorld(t, placement(api.WhenToTakeOverTypeAlways))
	w.schedule("member-1", "member-2").snapshot(1).rollout(1, started("member-1", 1), started("member-2", 1))
	w.report(applied("member-1", 1))
	if _, ok := fold.Refold(&w.in, api.PlacementStatus{}, map[string]bool{"member-1": true}, t0); ok {
		t.Error("Refold kept member-2's entry from an empty status")
	}
	prev := w.status(api.PlacementStatus{}, t0)
	crp := placement(api.WhenToTakeOverTypeAlways)
	crp.Spec.RevisionHistoryLimit = new(int32(3)) // a new generation
	if _, err := w.in.Upsert(crp, t0); err != nil {
		t.Fatal(err)
	}
	w.schedule("member-1", "member-2")
	if _, ok := fold.Refold(&w.in, prev, map[string]bool{"member-1": true}, t0); ok {
		t.Error("Refold kept member-2's entry of the previous generation")
	}
}
