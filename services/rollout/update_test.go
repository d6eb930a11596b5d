package rollout_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/rollout"
)

// Updates the Fleet rules refuse (a new placement type, a removed toleration) leave the
// rollout's placement as it was, as in the scheduler and the status service; the update
// after them is judged against the spec in force.
func TestRefusedUpdatesLeaveThePlacement(t *testing.T) {
	f := newFixture(t, rollout.Config{})
	f.start()
	subj, _ := events.PlacementSubject("web")
	upsert := func(policy *api.PlacementPolicy) {
		p := crp("web", namespace("web"))
		p.Spec.Policy = policy
		f.publish(events.TypePlacementUpserted, subj, events.PlacementUpserted{Placement: p})
	}
	gpu := api.Toleration{Key: "gpu", Operator: api.TolerationOpExists}
	spot := api.Toleration{Key: "spot", Operator: api.TolerationOpExists}
	two := int32(2)
	upsert(&api.PlacementPolicy{Tolerations: []api.Toleration{gpu}})
	upsert(&api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: &two})
	upsert(&api.PlacementPolicy{})
	upsert(&api.PlacementPolicy{Tolerations: []api.Toleration{gpu, spot}})
	// The last is taken once every one before it was handled.
	poll.Until(t, patience, "the allowed update taken", func() error {
		var (
			generation int64
			raw        []byte
		)
		if err := f.Pool.QueryRow(t.Context(), `select generation, spec from rollout_placements where name = 'web'`).Scan(&generation, &raw); err != nil {
			return err
		}
		var spec api.PlacementSpec
		if err := json.Unmarshal(raw, &spec); err != nil {
			return err
		}
		if len(spec.Tolerations()) != 2 {
			return errors.New("not yet")
		}
		if generation != 2 || spec.EffectivePlacementType() != api.PickAllPlacementType {
			t.Fatalf("generation %d, type %s: a refused update was taken", generation, spec.EffectivePlacementType())
		}
		return nil
	})
}
