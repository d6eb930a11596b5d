package fold_test

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/services/status/fold"
)

// Generations count as the scheduler counts them, so that decisions, rollout
// progress and reports compare with the placement's generation.
func TestGenerationCounting(t *testing.T) {
	var in fold.Inputs
	steps := []struct {
		name    string
		apply   func() (bool, error)
		wantGen int64
		wantStr int64
	}{
		{"created", func() (bool, error) { return in.Upsert(placement(api.WhenToTakeOverTypeNever), t0) }, 1, 1},
		{"same spec again", func() (bool, error) { return in.Upsert(placement(api.WhenToTakeOverTypeNever), t0) }, 1, 1},
		{"defaults written out change nothing", func() (bool, error) {
			crp := placement(api.WhenToTakeOverTypeNever)
			api.SetDefaults(&crp)
			return in.Upsert(crp, t0)
		}, 1, 1},
		{"labels only", func() (bool, error) {
			crp := placement(api.WhenToTakeOverTypeNever)
			crp.Labels = map[string]string{"team": "web"}
			return in.Upsert(crp, t0)
		}, 1, 1},
		{"apply strategy change", func() (bool, error) { return in.Upsert(placement(api.WhenToTakeOverTypeIfNoDiff), t0) }, 2, 2},
		{"history limit change", func() (bool, error) {
			crp := placement(api.WhenToTakeOverTypeIfNoDiff)
			crp.Spec.RevisionHistoryLimit = new(int32(2))
			return in.Upsert(crp, t0)
		}, 3, 2},
		{"rolling update budget change", func() (bool, error) {
			crp := placement(api.WhenToTakeOverTypeIfNoDiff)
			crp.Spec.RevisionHistoryLimit = new(int32(2))
			crp.Spec.Strategy.RollingUpdate = &api.RollingUpdateConfig{MaxUnavailable: new(intstr.FromString("100%"))}
			return in.Upsert(crp, t0)
		}, 4, 2},
		{"unavailable period change", func() (bool, error) {
			crp := placement(api.WhenToTakeOverTypeIfNoDiff)
			crp.Spec.RevisionHistoryLimit = new(int32(2))
			crp.Spec.Strategy.RollingUpdate = &api.RollingUpdateConfig{MaxUnavailable: new(intstr.FromString("100%")), UnavailablePeriodSeconds: new(1)}
			return in.Upsert(crp, t0)
		}, 5, 5},
		{"deleted", func() (bool, error) { return in.Delete(t0), nil }, 5, 5},
		{"re-created with the same spec", func() (bool, error) {
			crp := placement(api.WhenToTakeOverTypeIfNoDiff)
			crp.Spec.RevisionHistoryLimit = new(int32(2))
			crp.Spec.Strategy.RollingUpdate = &api.RollingUpdateConfig{MaxUnavailable: new(intstr.FromString("100%")), UnavailablePeriodSeconds: new(1)}
			return in.Upsert(crp, t0.Add(time.Hour))
		}, 6, 6},
	}
	for _, s := range steps {
		if _, err := s.apply(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if in.Generation() != s.wantGen || in.WorkGeneration != s.wantStr {
			t.Errorf("%s: generation %d, work generation %d; want %d, %d", s.name, in.Generation(), in.WorkGeneration, s.wantGen, s.wantStr)
		}
	}
	if !in.Placement.CreationTimestamp.Time.Equal(t0.Add(time.Hour)) || in.Placement.DeletionTimestamp != nil {
		t.Errorf("re-created placement: created %v, deleted %v", in.Placement.CreationTimestamp, in.Placement.DeletionTimestamp)
	}
	if in.Placement.APIVersion != fold.PlacementAPIVersion || in.Placement.Kind != fold.PlacementKind {
		t.Errorf("type meta = %+v", in.Placement.TypeMeta)
	}
	if in.Placement.Spec.Strategy.RollingUpdate == nil || in.Placement.Spec.RevisionHistoryLimit == nil {
		t.Errorf("spec not defaulted: %+v", in.Placement.Spec)
	}
}

func TestPlacementTypeIsImmutable(t *testing.T) {
	var in fold.Inputs
	if _, err := in.Upsert(placement(api.WhenToTakeOverTypeNever), t0); err != nil {
		t.Fatal(err)
	}
	crp := placement(api.WhenToTakeOverTypeNever)
	crp.Spec.Policy = &api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: new(int32(1))}
	if _, err := in.Upsert(crp, t0); !errors.Is(err, fold.ErrImmutable) {
		t.Fatalf("changing the placement type: err = %v, want ErrImmutable", err)
	}
	if in.Generation() != 1 || in.Placement.Spec.EffectivePlacementType() != api.PickAllPlacementType {
		t.Errorf("the refused update changed the placement: generation %d", in.Generation())
	}
	// After a delete the name may come back with another type.
	in.Delete(t0)
	if _, err := in.Upsert(crp, t0); err != nil {
		t.Fatalf("re-creating with another type: %v", err)
	}
}

// Events redelivered out of order do not undo newer ones.
func TestOlderEventsAreIgnored(t *testing.T) {
	var in fold.Inputs
	in.ApplySnapshot(&events.SnapshotCreated{Index: 3})
	if in.ApplySnapshot(&events.SnapshotCreated{Index: 2}) || in.Snapshot.Index != 3 {
		t.Error("an older snapshot replaced a newer one")
	}

	in.ApplyReport(&events.WorkReported{Cluster: "m1", ObservedAt: t0.Add(time.Minute)})
	if in.ApplyReport(&events.WorkReported{Cluster: "m1", ObservedAt: t0}) {
		t.Error("an older report replaced a newer one")
	}
	if in.ApplyReport(&events.WorkReported{Cluster: "m1", Deleted: true, ObservedAt: t0}) {
		t.Error("an older tombstone report removed a newer report")
	}
	if !in.ApplyReport(&events.WorkReported{Cluster: "m1", Deleted: true, ObservedAt: t0.Add(2 * time.Minute)}) || in.Reports["m1"] != nil {
		t.Error("a tombstone report did not remove the cluster's report")
	}
}

func TestApplyDispatchesPayloads(t *testing.T) {
	var in fold.Inputs
	crp := placement(api.WhenToTakeOverTypeNever)
	for _, p := range []any{
		&events.PlacementUpserted{Placement: crp},
		&events.SnapshotCreated{Placement: "web-2-crp", Index: 1, Hash: "h"},
		&events.WorkReported{Cluster: "m1", Placement: "web-2-crp", ObservedAt: t0},
		&events.PlacementDeleted{Name: "web-2-crp"},
	} {
		changed, err := in.Apply(p, t0)
		if err != nil || !changed {
			t.Errorf("Apply(%T) = %v, %v; want a change", p, changed, err)
		}
	}
	if changed, _ := in.Apply(&events.HubResourceDeleted{}, t0); changed {
		t.Error("a hub resource event changed a placement's inputs")
	}
	if changed, _ := in.Apply(&events.PlacementUpserted{Placement: crp}, t0); !changed || in.Deleted || in.Generation() != 2 {
		t.Errorf("re-creation: changed %v, deleted %v, generation %d", changed, in.Deleted, in.Generation())
	}
	if changed, _ := in.Apply(&events.PlacementUpserted{Placement: crp}, t0); changed {
		t.Error("the same placement again counts as a change")
	}
}

// Decisions and progress are applied a whole revision at a time: half a
// revision changes nothing, a revision that does not add up is applied and
// reported, and Apply leaves their pieces to ApplyDecision and ApplyRollout.
func TestRevisionsApplyWhole(t *testing.T) {
	var in fold.Inputs
	half := events.PlacementScheduledV2{Placement: "p", Revision: 1, Base: true, Pieces: 2, ChosenCount: 1,
		Clusters: []events.ClusterDecision{{Cluster: "m1", Action: events.ActionAdded}}}
	if err := in.ApplyDecision([]events.PlacementScheduledV2{half}); err == nil || in.Decision != nil {
		t.Errorf("half a revision: %v, decision %+v", err, in.Decision)
	}
	wrong := half
	wrong.Pieces, wrong.ChosenCount = 1, 2
	if err := in.ApplyDecision([]events.PlacementScheduledV2{wrong}); !errors.Is(err, revision.ErrMismatch) || in.Decision == nil || len(in.Decision.Chosen) != 1 {
		t.Errorf("a revision that does not add up: %v, decision %+v", err, in.Decision)
	}
	progress := events.RolloutProgressedV2{Placement: "p", Revision: 1, Base: true, Pieces: 1, ResourceIndex: 2}
	if err := in.ApplyRollout([]events.RolloutProgressedV2{progress}); err != nil || in.Rollout.ResourceIndex != 2 {
		t.Errorf("progress: %v, %+v", err, in.Rollout)
	}
	for _, p := range []any{&half, &progress} {
		if changed, err := in.Apply(p, t0); changed || err != nil {
			t.Errorf("Apply(%T) = %v, %v; want it left to the revision's whole", p, changed, err)
		}
	}
}
