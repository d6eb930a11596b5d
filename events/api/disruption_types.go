package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Evictions and disruption budgets: Fleet's ClusterResourcePlacementEviction
// and ClusterResourcePlacementDisruptionBudget (placement.kubernetes-fleet.io
// v1beta1 and v1, the same fields in each), field for field.

// ClusterResourcePlacementEviction removes a placement from one cluster, once:
// its spec is immutable, and an eviction that was found invalid or has run is
// never evaluated again (delete and re-create it to try again). It is a
// voluntary disruption, subject to the placement's disruption budget. It does
// not keep the scheduler from picking the cluster again: taint the cluster
// first (fleetctl drain does). A PickFixed placement cannot be evicted from:
// remove the cluster from its clusterNames instead.
type ClusterResourcePlacementEviction struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PlacementEvictionSpec   `json:"spec"`
	Status PlacementEvictionStatus `json:"status,omitempty"`

	// Placeholders: see ClusterResourcePlacement.Placeholders.
	Placeholders []string `json:"-"`
}

// PlacementEvictionSpec names the placement and the cluster; both immutable.
type PlacementEvictionSpec struct {
	PlacementName string `json:"placementName"`
	ClusterName   string `json:"clusterName"`
}

// PlacementEvictionStatus holds the conditions Valid and Executed.
type PlacementEvictionStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterResourcePlacementDisruptionBudget bounds the voluntary disruptions
// (evictions) of the placement of the same name: at most maxUnavailable of its
// clusters unavailable, or at least minAvailable available, never both. For a
// PickAll placement only an integer minAvailable is allowed; for PickN a
// percentage counts against numberOfClusters, rounded up.
type ClusterResourcePlacementDisruptionBudget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec PlacementDisruptionBudgetSpec `json:"spec"`

	// Placeholders: see ClusterResourcePlacement.Placeholders.
	Placeholders []string `json:"-"`
}

// PlacementDisruptionBudgetSpec sets maxUnavailable or minAvailable: a number
// of at least 0 or a percentage (0%-100%).
type PlacementDisruptionBudgetSpec struct {
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	MinAvailable   *intstr.IntOrString `json:"minAvailable,omitempty"`
}

// Condition types, reasons and messages of an eviction (upstream's
// apis/placement/v1beta1/eviction_types.go and pkg/utils/condition).
const (
	EvictionConditionValid    = "Valid"
	EvictionConditionExecuted = "Executed"

	EvictionValidReason       = "ClusterResourcePlacementEvictionValid"
	EvictionInvalidReason     = "ClusterResourcePlacementEvictionInvalid"
	EvictionExecutedReason    = "ClusterResourcePlacementEvictionExecuted"
	EvictionNotExecutedReason = "ClusterResourcePlacementEvictionNotExecuted"

	EvictionInvalidMissingCRPMessage      = "Failed to find ClusterResourcePlacement targeted by eviction"
	EvictionInvalidDeletingCRPMessage     = "Found deleting ClusterResourcePlacement targeted by eviction"
	EvictionInvalidPickFixedCRPMessage    = "Found ClusterResourcePlacement with PickFixed placement type targeted by eviction"
	EvictionInvalidMissingCRBMessage      = "Failed to find scheduler decision for placement in cluster targeted by eviction"
	EvictionValidMessage                  = "Eviction is valid"
	EvictionAllowedNoPDBMessage           = "Eviction is allowed, no ClusterResourcePlacementDisruptionBudget specified"
	EvictionAllowedPlacementFailedMessage = "Eviction is allowed, placement has failed"
	// EvictionBlockedMisconfiguredPDBMessage: a budget with maxUnavailable, or
	// a percentage minAvailable, on a PickAll placement.
	EvictionBlockedMisconfiguredPDBMessage = "Eviction is blocked by misconfigured ClusterResourcePlacementDisruptionBudget, either MaxUnavailable is specified or MinAvailable is specified as a percentage for PickAll ClusterResourcePlacement"
	EvictionBlockedMissingPlacementMessage = "Eviction is blocked, placement has not propagated resources to target cluster yet"
	// EvictionAllowedPDBMessageFmt and EvictionBlockedPDBMessageFmt take the
	// available and the total placements (clusters) of the placement.
	EvictionAllowedPDBMessageFmt = "Eviction is allowed by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: %d, totalPlacements: %d"
	EvictionBlockedPDBMessageFmt = "Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: %d, totalPlacements: %d"
)

// CordonTaint is the taint fleetctl drain puts on a member (upstream's
// kubectl fleet draincluster: tools/utils.CordonTaint) and uncordon removes.
var CordonTaint = Taint{Key: "cordon-key", Value: "cordon-value", Effect: TaintEffectNoSchedule}
