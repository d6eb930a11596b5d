package api

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PlacementStatus is the observed state of a ClusterResourcePlacement.
type PlacementStatus struct {
	// SelectedResources lists the selected hub objects; an envelope is listed,
	// not its contents.
	SelectedResources []ResourceIdentifier `json:"selectedResources,omitempty"`
	// ObservedResourceIndex names the resource snapshot being rolled out.
	ObservedResourceIndex string `json:"observedResourceIndex,omitempty"`
	// PlacementStatuses has one entry per scheduled cluster.
	PlacementStatuses []ResourcePlacementStatus `json:"placementStatuses,omitempty"`
	// Conditions are the placement-level conditions (ClusterResourcePlacement*).
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MaxReportedPlacements caps failedPlacements, driftedPlacements and
// diffedPlacements per cluster.
const MaxReportedPlacements = 100

// ResourcePlacementStatus is the placement's state on one cluster.
type ResourcePlacementStatus struct {
	ClusterName           string `json:"clusterName,omitempty"`
	ObservedResourceIndex string `json:"observedResourceIndex,omitempty"`
	// ApplicableResourceOverrides and ApplicableClusterResourceOverrides are
	// upstream's override snapshots; Flotilla reads them but has no overrides.
	ApplicableResourceOverrides        []NamespacedName `json:"applicableResourceOverrides,omitempty"`
	ApplicableClusterResourceOverrides []string         `json:"applicableClusterResourceOverrides,omitempty"`
	// FailedPlacements lists objects that failed to apply or are not available (at most 100).
	FailedPlacements []FailedResourcePlacement `json:"failedPlacements,omitempty"`
	// DriftedPlacements lists objects whose member copy drifted (at most 100).
	DriftedPlacements []DriftedResourcePlacement `json:"driftedPlacements,omitempty"`
	// DiffedPlacements lists objects that differ from the hub (at most 100).
	DiffedPlacements []DiffedResourcePlacement `json:"diffedPlacements,omitempty"`
	// Conditions are the per-cluster conditions (Scheduled, RolloutStarted, ...).
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NamespacedName names a namespaced object.
type NamespacedName struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

// ResourceIdentifier identifies one Kubernetes object, and the envelope that
// carried it if any.
type ResourceIdentifier struct {
	Group     string              `json:"group,omitempty"`
	Version   string              `json:"version"`
	Kind      string              `json:"kind"`
	Name      string              `json:"name"`
	Namespace string              `json:"namespace,omitempty"`
	Envelope  *EnvelopeIdentifier `json:"envelope,omitempty"`
}

// EnvelopeType is the kind of envelope that wrapped an object.
type EnvelopeType string

const (
	ConfigMapEnvelopeType       EnvelopeType = "ConfigMap"
	ClusterResourceEnvelopeType EnvelopeType = "ClusterResourceEnvelope"
	ResourceEnvelopeType        EnvelopeType = "ResourceEnvelope"
)

// EnvelopeIdentifier identifies the envelope that carried an object.
type EnvelopeIdentifier struct {
	Name      string       `json:"name"`
	Namespace string       `json:"namespace,omitempty"`
	Type      EnvelopeType `json:"type"`
}

// FailedResourcePlacement is one object that failed to apply or is not available.
type FailedResourcePlacement struct {
	ResourceIdentifier `json:",inline"`
	// Condition is the failing Applied or Available condition of the object.
	Condition metav1.Condition `json:"condition"`
}

// PatchDetail is one differing field, as a JSON pointer path and the two values.
type PatchDetail struct {
	Path          string `json:"path"`
	ValueInMember string `json:"valueInMember,omitempty"`
	ValueInHub    string `json:"valueInHub,omitempty"`
}

// DriftedResourcePlacement is an object whose member copy drifted from the hub.
type DriftedResourcePlacement struct {
	ResourceIdentifier              `json:",inline"`
	ObservationTime                 metav1.Time   `json:"observationTime"`
	TargetClusterObservedGeneration int64         `json:"targetClusterObservedGeneration"`
	FirstDriftedObservedTime        metav1.Time   `json:"firstDriftedObservedTime"`
	ObservedDrifts                  []PatchDetail `json:"observedDrifts,omitempty"`
}

// DiffedResourcePlacement is an object that differs from its hub manifest. An
// object missing on the member is one diff at path "/".
type DiffedResourcePlacement struct {
	ResourceIdentifier `json:",inline"`
	ObservationTime    metav1.Time `json:"observationTime"`
	// TargetClusterObservedGeneration is nil when the object does not exist on the member.
	TargetClusterObservedGeneration *int64        `json:"targetClusterObservedGeneration"`
	FirstDiffedObservedTime         metav1.Time   `json:"firstDiffedObservedTime"`
	ObservedDiffs                   []PatchDetail `json:"observedDiffs,omitempty"`
}
