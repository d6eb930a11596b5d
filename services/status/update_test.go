package status_test

import (
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// Updates the Fleet rules refuse (a new placement type, a removed toleration) leave the
// placement as it was, as the scheduler and the rollout leave it; an allowed one is taken.
func TestRefusedUpdatesLeaveThePlacement(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0.Add(time.Minute))
	subj := subject(events.PlacementSubject("web-2-crp"))
	upsert := func(id string, policy *api.PlacementPolicy) {
		crp := webPlacement(api.WhenToTakeOverTypeAlways)
		crp.Spec.Policy = policy
		ev := f.event(events.TypePlacementUpserted, id, t0, events.PlacementUpserted{Placement: crp})
		f.publish(subj, ev)
		f.handled(ev.ID())
	}
	gpu := api.Toleration{Key: "gpu", Operator: api.TolerationOpExists}
	spot := api.Toleration{Key: "spot", Operator: api.TolerationOpExists}
	upsert("created", &api.PlacementPolicy{PlacementType: api.PickAllPlacementType, Tolerations: []api.Toleration{gpu}})
	two := int32(2)
	upsert("new-type", &api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: &two})
	upsert("toleration-removed", &api.PlacementPolicy{PlacementType: api.PickAllPlacementType})

	get := func() api.ClusterResourcePlacement {
		t.Helper()
		r, _ := query[api.ClusterResourcePlacement](f, events.QueryGetPlacement, events.NameQuery{Name: "web-2-crp"})
		if r.Error != "" {
			t.Fatal(r.Error)
		}
		return r.Result
	}
	if got := get(); got.Generation != 1 || got.Spec.EffectivePlacementType() != api.PickAllPlacementType || len(got.Spec.Tolerations()) != 1 {
		t.Errorf("after two refused updates: generation %d, type %s, tolerations %v; want the placement as created",
			got.Generation, got.Spec.EffectivePlacementType(), got.Spec.Tolerations())
	}
	upsert("toleration-added", &api.PlacementPolicy{PlacementType: api.PickAllPlacementType, Tolerations: []api.Toleration{gpu, spot}})
	if got := get(); got.Generation != 2 || len(got.Spec.Tolerations()) != 2 {
		t.Errorf("after adding a toleration: generation %d, tolerations %v", got.Generation, got.Spec.Tolerations())
	}
}
