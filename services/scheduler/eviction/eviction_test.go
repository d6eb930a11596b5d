package eviction

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events/api"
)

func num(i int) *intstr.IntOrString    { v := intstr.FromInt32(int32(i)); return &v }
func pct(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }

func TestDisruptionsAllowed(t *testing.T) {
	for _, tc := range []struct {
		name             string
		budget           api.PlacementDisruptionBudgetSpec
		typ              api.PlacementType
		n                int
		available, total int
		want             int
	}{
		// PickAll: minAvailable as a number only.
		{"PickAll minAvailable 1 of 3 available", api.PlacementDisruptionBudgetSpec{MinAvailable: num(1)}, api.PickAllPlacementType, 0, 3, 3, 2},
		{"PickAll minAvailable 2, 2 available", api.PlacementDisruptionBudgetSpec{MinAvailable: num(2)}, api.PickAllPlacementType, 0, 2, 2, 0},
		{"PickAll minAvailable 0", api.PlacementDisruptionBudgetSpec{MinAvailable: num(0)}, api.PickAllPlacementType, 0, 0, 3, 0},
		// PickN: percentages of numberOfClusters, rounded up.
		{"PickN maxUnavailable 1, all available", api.PlacementDisruptionBudgetSpec{MaxUnavailable: num(1)}, api.PickNPlacementType, 3, 3, 3, 1},
		{"PickN maxUnavailable 1, one unavailable", api.PlacementDisruptionBudgetSpec{MaxUnavailable: num(1)}, api.PickNPlacementType, 3, 2, 3, 0},
		{"PickN maxUnavailable 0", api.PlacementDisruptionBudgetSpec{MaxUnavailable: num(0)}, api.PickNPlacementType, 3, 3, 3, 0},
		{"PickN maxUnavailable 50% of 3 is 2", api.PlacementDisruptionBudgetSpec{MaxUnavailable: pct("50%")}, api.PickNPlacementType, 3, 3, 3, 2},
		{"PickN minAvailable 50% of 3 is 2", api.PlacementDisruptionBudgetSpec{MinAvailable: pct("50%")}, api.PickNPlacementType, 3, 3, 3, 1},
		{"PickN minAvailable 100%", api.PlacementDisruptionBudgetSpec{MinAvailable: pct("100%")}, api.PickNPlacementType, 3, 3, 3, 0},
		{"neither field", api.PlacementDisruptionBudgetSpec{}, api.PickNPlacementType, 3, 3, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := DisruptionsAllowed(tc.budget, tc.typ, tc.n, tc.available, tc.total); got != tc.want {
				t.Errorf("DisruptionsAllowed = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	placed := Facts{PlacementFound: true, PlacementType: api.PickAllPlacementType, Scheduled: true, Placed: true, Available: 3, Total: 3}
	with := func(f Facts, edit func(*Facts)) Facts { edit(&f); return f }
	for _, tc := range []struct {
		name     string
		facts    Facts
		valid    bool
		executed bool
		message  string
	}{
		{"no placement", Facts{}, false, false, api.EvictionInvalidMissingCRPMessage},
		{"PickFixed", with(placed, func(f *Facts) { f.PlacementType = api.PickFixedPlacementType }), false, false, api.EvictionInvalidPickFixedCRPMessage},
		{"cluster not scheduled", with(placed, func(f *Facts) { f.Scheduled = false }), false, false, api.EvictionInvalidMissingCRBMessage},
		{"not placed yet", with(placed, func(f *Facts) { f.Placed = false }), true, false, api.EvictionBlockedMissingPlacementMessage},
		{"no budget", placed, true, true, api.EvictionAllowedNoPDBMessage},
		{"failed placement ignores the budget", with(placed, func(f *Facts) {
			f.Failed, f.Budget = true, &api.PlacementDisruptionBudgetSpec{MinAvailable: num(3)}
		}), true, true, api.EvictionAllowedPlacementFailedMessage},
		{"PickAll with maxUnavailable", with(placed, func(f *Facts) {
			f.Budget = &api.PlacementDisruptionBudgetSpec{MaxUnavailable: num(1)}
		}), true, false, api.EvictionBlockedMisconfiguredPDBMessage},
		{"PickAll with a percentage", with(placed, func(f *Facts) {
			f.Budget = &api.PlacementDisruptionBudgetSpec{MinAvailable: pct("10%")}
		}), true, false, api.EvictionBlockedMisconfiguredPDBMessage},
		{"budget allows", with(placed, func(f *Facts) {
			f.Budget = &api.PlacementDisruptionBudgetSpec{MinAvailable: num(2)}
		}), true, true, "Eviction is allowed by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 3, totalPlacements: 3"},
		{"budget blocks", with(placed, func(f *Facts) {
			f.Budget, f.Available, f.Total = &api.PlacementDisruptionBudgetSpec{MinAvailable: num(2)}, 2, 2
		}), true, false, "Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 2, totalPlacements: 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.facts)
			msg := v.ValidMessage
			if v.Valid {
				msg = v.ExecutedMessage
			}
			if v.Valid != tc.valid || v.Executed != tc.executed || msg != tc.message {
				t.Errorf("Judge = %+v, want valid %v executed %v message %q", v, tc.valid, tc.executed, tc.message)
			}
		})
	}
}
