// Package eviction judges a ClusterResourcePlacementEviction as upstream
// Fleet's eviction controller does: whether it is valid (its placement exists,
// is not PickFixed and holds the cluster), and whether it may run now (the
// placement has reached the cluster, and the disruption budget allows it, or
// the placement failed there). It is pure: the scheduler gathers the facts
// under the placement's row lock and carries out the verdict.
package eviction

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Facts are what the scheduler knows when an eviction arrives.
type Facts struct {
	// PlacementFound is false when no placement has the eviction's
	// placementName, or it was deleted.
	PlacementFound bool
	PlacementType  api.PlacementType
	// NumberOfClusters is a PickN placement's numberOfClusters.
	NumberOfClusters int
	// Scheduled says the placement's decision holds the cluster.
	Scheduled bool
	// Placed says the rollout has sent the placement's work to the cluster.
	Placed bool
	// Failed says the placement failed on the cluster (apply or availability
	// False), or it only reports diffs there: no budget protects it.
	Failed bool
	// Budget is the disruption budget of the placement's name, nil when none.
	Budget *api.PlacementDisruptionBudgetSpec
	// Available and Total count the clusters the decision holds, and of
	// them those where the placement is available.
	Available, Total int
}

// Verdict is the outcome: the condition Valid and, for a valid eviction, the
// condition Executed (status and message; the reasons follow from them).
type Verdict struct {
	Valid        bool
	ValidMessage string
	// Executed is set for a valid eviction; Evict says to remove the cluster
	// from the placement's decision (Executed True).
	Executed        bool
	ExecutedMessage string
}

// Judge decides an eviction from the facts.
func Judge(f Facts) Verdict {
	switch {
	case !f.PlacementFound:
		return Verdict{ValidMessage: api.EvictionInvalidMissingCRPMessage}
	case f.PlacementType == api.PickFixedPlacementType:
		return Verdict{ValidMessage: api.EvictionInvalidPickFixedCRPMessage}
	case !f.Scheduled:
		return Verdict{ValidMessage: api.EvictionInvalidMissingCRBMessage}
	}
	v := Verdict{Valid: true, ValidMessage: api.EvictionValidMessage}
	switch {
	case !f.Placed:
		v.ExecutedMessage = api.EvictionBlockedMissingPlacementMessage
	case f.Failed:
		v.Executed, v.ExecutedMessage = true, api.EvictionAllowedPlacementFailedMessage
	case f.Budget == nil:
		v.Executed, v.ExecutedMessage = true, api.EvictionAllowedNoPDBMessage
	case Misconfigured(*f.Budget, f.PlacementType):
		v.ExecutedMessage = api.EvictionBlockedMisconfiguredPDBMessage
	case DisruptionsAllowed(*f.Budget, f.PlacementType, f.NumberOfClusters, f.Available, f.Total) > 0:
		v.Executed, v.ExecutedMessage = true, fmt.Sprintf(api.EvictionAllowedPDBMessageFmt, f.Available, f.Total)
	default:
		v.ExecutedMessage = fmt.Sprintf(api.EvictionBlockedPDBMessageFmt, f.Available, f.Total)
	}
	return v
}

// Misconfigured reports a budget a PickAll placement cannot use: one with
// maxUnavailable, or with minAvailable as a percentage (the number of clusters
// a PickAll placement selects is not known in advance).
func Misconfigured(b api.PlacementDisruptionBudgetSpec, typ api.PlacementType) bool {
	if typ != api.PickAllPlacementType && typ != "" {
		return false
	}
	return b.MaxUnavailable != nil || b.MinAvailable != nil && b.MinAvailable.Type == intstr.String
}

// DisruptionsAllowed is how many more clusters may be disrupted, never below
// zero: maxUnavailable minus the clusters unavailable, or the clusters
// available minus minAvailable. A percentage counts against a PickN
// placement's numberOfClusters (against none for the others), rounded up. A
// budget with neither field allows none.
func DisruptionsAllowed(b api.PlacementDisruptionBudgetSpec, typ api.PlacementType, numberOfClusters, available, total int) int {
	desired := 0
	if typ == api.PickNPlacementType {
		desired = numberOfClusters
	}
	allowed := 0
	switch {
	case b.MaxUnavailable != nil:
		maxUnavailable, _ := intstr.GetScaledValueFromIntOrPercent(b.MaxUnavailable, desired, true)
		allowed = maxUnavailable - (total - available)
	case b.MinAvailable != nil:
		minAvailable := b.MinAvailable.IntValue()
		if typ != api.PickAllPlacementType && typ != "" {
			minAvailable, _ = intstr.GetScaledValueFromIntOrPercent(b.MinAvailable, desired, true)
		}
		allowed = available - minAvailable
	}
	return max(allowed, 0)
}
