package api

// FleetPrefix prefixes Fleet's own labels and annotations. Labels and annotations
// with this prefix, kubernetes.io/ or k8s.io/ are ignored when comparing objects.
const FleetPrefix = "kubernetes-fleet.io/"

// Well-known labels and annotations.
const (
	// MemberNameLabel is set on every member cluster to its own name.
	MemberNameLabel = FleetPrefix + "member-name"

	// Labels a member may carry from joining an Azure fleet.
	AzureLocationLabel       = "fleet.azure.com/location"
	AzureResourceGroupLabel  = "fleet.azure.com/resource-group"
	AzureSubscriptionIDLabel = "fleet.azure.com/subscription-id"

	// EnvelopeConfigMapAnnotation, set to "true" on a ConfigMap, makes it an
	// envelope: each data value is a manifest applied on the member, not the hub.
	EnvelopeConfigMapAnnotation = FleetPrefix + "envelope-configmap"

	// LastAppliedConfigAnnotation is kubectl's client-side apply record.
	LastAppliedConfigAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

	// ConflictResolutionAnnotation with value ConflictResolutionAdopt on a hub
	// object lets KubeAdmiral-style federalization adopt the existing member object.
	ConflictResolutionAnnotation = "kubeadmiral.io/conflict-resolution"
	ConflictResolutionAdopt      = "adopt"

	// PropagationPolicyNameLabel on a hub object names its PropagationPolicy
	// (in the object's namespace).
	PropagationPolicyNameLabel = "kubeadmiral.io/propagation-policy-name"
	// ClusterPropagationPolicyNameLabel names a ClusterPropagationPolicy.
	ClusterPropagationPolicyNameLabel = "kubeadmiral.io/cluster-propagation-policy-name"
)

// Cluster properties reported by the member side. Values are Kubernetes quantities.
const (
	// NodeCountProperty is the number of nodes.
	NodeCountProperty PropertyName = FleetPrefix + "node-count"

	// ResourcePropertyPrefix prefixes the resource properties, named
	// <prefix><total|allocatable|available>-<resource>.
	ResourcePropertyPrefix = "resources.kubernetes-fleet.io/"

	TotalCPUProperty          PropertyName = ResourcePropertyPrefix + "total-cpu"
	AllocatableCPUProperty    PropertyName = ResourcePropertyPrefix + "allocatable-cpu"
	AvailableCPUProperty      PropertyName = ResourcePropertyPrefix + "available-cpu"
	TotalMemoryProperty       PropertyName = ResourcePropertyPrefix + "total-memory"
	AllocatableMemoryProperty PropertyName = ResourcePropertyPrefix + "allocatable-memory"
	AvailableMemoryProperty   PropertyName = ResourcePropertyPrefix + "available-memory"
)

// Capacity types that may follow ResourcePropertyPrefix.
const (
	TotalCapacityName       = "total"
	AllocatableCapacityName = "allocatable"
	AvailableCapacityName   = "available"
)

// NamespaceSelectionLabel is a label every hub object carries for selection
// only (never stored or placed): its value is the object's namespace, empty
// for a cluster-scoped object. A resource selector whose labelSelector names
// it may select namespaced kinds directly, within the namespaces it matches;
// this is how KubeAdmiral's PropagationPolicy is carried (fleetctl converts
// one into placements selecting NamespaceSelectionLabel=<its namespace>).
const NamespaceSelectionLabel = "flotilla.dev/namespace"
