package api

import "k8s.io/apimachinery/pkg/runtime/schema"

// API groups and versions Flotilla understands.
var (
	PlacementGroupVersion   = schema.GroupVersion{Group: "placement.kubernetes-fleet.io", Version: "v1beta1"}
	ClusterGroupVersion     = schema.GroupVersion{Group: "cluster.kubernetes-fleet.io", Version: "v1beta1"}
	KubeAdmiralGroupVersion = schema.GroupVersion{Group: "core.kubeadmiral.io", Version: "v1alpha1"}
)

// Kinds of the typed objects.
const (
	ClusterResourcePlacementKind = "ClusterResourcePlacement"
	MemberClusterKind            = "MemberCluster"
	ClusterResourceEnvelopeKind  = "ClusterResourceEnvelope"
	ResourceEnvelopeKind         = "ResourceEnvelope"
	PropagationPolicyKind        = "PropagationPolicy"
	ClusterPropagationPolicyKind = "ClusterPropagationPolicy"
	ClusterResourceOverrideKind  = "ClusterResourceOverride"
	ResourceOverrideKind         = "ResourceOverride"

	ClusterStagedUpdateStrategyKind = "ClusterStagedUpdateStrategy"
	ClusterStagedUpdateRunKind      = "ClusterStagedUpdateRun"
	ClusterApprovalRequestKind      = "ClusterApprovalRequest"

	ClusterResourcePlacementEvictionKind         = "ClusterResourcePlacementEviction"
	ClusterResourcePlacementDisruptionBudgetKind = "ClusterResourcePlacementDisruptionBudget"
)

// Versions in which Flotilla reads Fleet's kinds other than the overrides:
// v1beta1 and v1 of placement.kubernetes-fleet.io (ClusterResourcePlacement
// and the envelopes) and of cluster.kubernetes-fleet.io (MemberCluster). v1
// has the fields Flotilla knows of v1beta1 (but deleteStrategy, which
// Flotilla accepts in either). An object keeps the version it was written in.
var FleetVersions = []string{"v1beta1", "v1"}

// OverrideVersions are the versions of placement.kubernetes-fleet.io in which
// Flotilla reads ClusterResourceOverride and ResourceOverride: upstream's
// documentation uses all three, and the kinds have the same fields in each. An
// override keeps the version it was written in.
var OverrideVersions = []string{"v1alpha1", "v1beta1", "v1"}

// IsFleetAPIVersion reports whether apiVersion is group in one of FleetVersions,
// such as placement.kubernetes-fleet.io/v1.
func IsFleetAPIVersion(apiVersion, group string) bool {
	for _, v := range FleetVersions {
		if apiVersion == group+"/"+v {
			return true
		}
	}
	return false
}
