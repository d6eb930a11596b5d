package fold_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// Tolerations can be added, not removed.
	tolerant := placement(api.WhenToTakeOverTypeNever)
	tolerant.Spec.Policy = &api.PlacementPolicy{Tolerations: []api.Toleration{{Key: "gpu", Operator: api.TolerationOpExists}}}
	if _, err := in.Upsert(tolerant, t0); err != nil {
		t.Fatalf("adding a toleration: %v", err)
	}
	_, err := in.Upsert(placement(api.WhenToTakeOverTypeNever), t0)
	if !errors.Is(err, fold.ErrImmutable) || !strings.Contains(err.Error(), "spec.policy.tolerations") {
		t.Errorf("removing a toleration: err = %v, want ErrImmutable naming spec.policy.tolerations", err)
	}
	if len(in.Placement.Spec.Tolerations()) != 1 {
		t.Error("the refused update removed the toleration")
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

	in.ApplyReport(&events.WorkReported{Cluster: "m1", ObservedAt: t0.Add(time.Minute)}, 5)
	if in.ApplyReport(&events.WorkReported{Cluster: "m1", ObservedAt: t0}, 4) {
		t.Error("an older report replaced a newer one")
	}
	if in.ApplyReport(&events.WorkReported{Cluster: "m1", Deleted: true, ObservedAt: t0}, 3) {
		t.Error("an older tombstone report removed a newer report")
	}
	// The bus orders reports, not the worker's clock: one stamped earlier but
	// published later (the clock was set back) is newer.
	if !in.ApplyReport(&events.WorkReported{Cluster: "m1", Generation: 2, ObservedAt: t0.Add(-time.Hour)}, 6) || in.Reports["m1"].Generation != 2 {
		t.Error("a newer report stamped by a clock set back was ignored")
	}
	if !in.ApplyReport(&events.WorkReported{Cluster: "m1", Deleted: true, ObservedAt: t0.Add(2 * time.Minute)}, 7) || in.Reports["m1"] != nil {
		t.Error("a tombstone report did not remove the cluster's report")
	}
}

func TestApplyDispatchesPayloads(t *testing.T) {
	var in fold.Inputs
	crp := placement(api.WhenToTakeOverTypeNever)
	for i, p := range []any{
		&events.PlacementUpserted{Placement: crp},
		&events.SnapshotCreated{Placement: "web-2-crp", Index: 1, Hash: "h"},
		&events.WorkReported{Cluster: "m1", Placement: "web-2-crp", ObservedAt: t0},
		&events.PlacementDeleted{Name: "web-2-crp"},
	} {
		changed, err := in.Apply(p, int64(i+1), t0)
		if err != nil || !changed {
			t.Errorf("Apply(%T) = %v, %v; want a change", p, changed, err)
		}
	}
	if changed, _ := in.Apply(&events.HubResourceDeleted{}, 5, t0); changed {
		t.Error("a hub resource event changed a placement's inputs")
	}
	if changed, _ := in.Apply(&events.PlacementUpserted{Placement: crp}, 6, t0); !changed || in.Deleted || in.Generation() != 2 {
		t.Errorf("re-creation: changed %v, deleted %v, generation %d", changed, in.Deleted, in.Generation())
	}
	// The same placement again is taken (its sequence is recorded) without a new generation.
	if changed, _ := in.Apply(&events.PlacementUpserted{Placement: crp}, 7, t0); !changed || in.Generation() != 2 || in.SpecSeq != 7 {
		t.Errorf("the same placement again: changed %v, generation %d, sequence %d", changed, in.Generation(), in.SpecSeq)
	}
	if changed, _ := in.Apply(&events.PlacementUpserted{Placement: crp}, 7, t0); changed {
		t.Error("the same event again counts as a change")
	}
}

// Placement events delivered out of order: the older one loses, whatever it is.
func TestLatePlacementEventsLose(t *testing.T) {
	pickN := func(n int32) *events.PlacementUpserted {
		crp := placement(api.WhenToTakeOverTypeNever)
		crp.Spec.Policy = &api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: &n}
		return &events.PlacementUpserted{Placement: crp}
	}
	deleted := &events.PlacementDeleted{Name: "web-2-crp"}
	tests := []struct {
		name           string
		newer, older   any
		wantDeleted    bool
		wantClusters   int32
		wantGeneration int64
	}{
		{"an upsert after an upsert", pickN(3), pickN(2), false, 3, 2},
		{"an upsert after the deletion", deleted, pickN(2), true, 1, 1},
		{"a deletion after an upsert", pickN(3), deleted, false, 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in fold.Inputs
			if _, err := in.Apply(pickN(1), 1, t0); err != nil {
				t.Fatal(err)
			}
			if changed, err := in.Apply(tt.newer, 5, t0); err != nil || !changed {
				t.Fatalf("the newer event: %v, %v", changed, err)
			}
			if changed, err := in.Apply(tt.older, 3, t0); err != nil || changed {
				t.Errorf("the older event: changed %v, err %v; want neither", changed, err)
			}
			if in.Deleted != tt.wantDeleted || *in.Placement.Spec.Policy.NumberOfClusters != tt.wantClusters || in.Generation() != tt.wantGeneration {
				t.Errorf("deleted %v, numberOfClusters %d, generation %d; want %v, %d, %d", in.Deleted,
					*in.Placement.Spec.Policy.NumberOfClusters, in.Generation(), tt.wantDeleted, tt.wantClusters, tt.wantGeneration)
			}
		})
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
		if changed, err := in.Apply(p, 9, t0); changed || err != nil {
			t.Errorf("Apply(%T) = %v, %v; want it left to the revision's whole", p, changed, err)
		}
	}
}

// A placement and a member keep the version they were written in (v1beta1 or v1), which
// changes neither's generation; another version shows as v1beta1.
func TestTheVersionWrittenIsShown(t *testing.T) {
	var in fold.Inputs
	crp := placement(api.WhenToTakeOverTypeNever)
	crp.APIVersion = "placement.kubernetes-fleet.io/v1"
	if _, err := in.Upsert(crp, t0); err != nil {
		t.Fatal(err)
	}
	if got := in.Placement.APIVersion; got != "placement.kubernetes-fleet.io/v1" {
		t.Errorf("apiVersion = %s, want v1 as written", got)
	}
	crp.APIVersion = "placement.kubernetes-fleet.io/v1beta1"
	if changed, _ := in.Upsert(crp, t0); changed || in.Placement.APIVersion != crp.APIVersion || in.Generation() != 1 {
		t.Errorf("the same spec in v1beta1: changed %v, apiVersion %s, generation %d", changed, in.Placement.APIVersion, in.Generation())
	}
	crp.APIVersion = ""
	if _, _ = in.Upsert(crp, t0); in.Placement.APIVersion != fold.PlacementAPIVersion {
		t.Errorf("no apiVersion shows as %s", in.Placement.APIVersion)
	}

	var m fold.MemberInputs
	m.Upsert(api.MemberCluster{TypeMeta: metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1"}, ObjectMeta: metav1.ObjectMeta{Name: "member-1"}}, true, t0)
	if got := fold.Member(&m, t0).APIVersion; got != "cluster.kubernetes-fleet.io/v1" {
		t.Errorf("member apiVersion = %s, want v1 as written", got)
	}
}
