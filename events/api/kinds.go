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
)
