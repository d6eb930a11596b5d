package api

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemberCluster represents a member cluster on the hub.
type MemberCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MemberClusterSpec   `json:"spec"`
	Status MemberClusterStatus `json:"status,omitempty"`

	// Placeholders lists the field paths at which the decoded document held a
	// documentation placeholder ("..."); see ClusterResourcePlacement.Placeholders.
	Placeholders []string `json:"-"`
}

// DefaultHeartbeatPeriodSeconds is the heartbeat period when none is given.
const DefaultHeartbeatPeriodSeconds = int32(60)

// MemberClusterSpec is the desired state of a member cluster.
type MemberClusterSpec struct {
	// Identity is the subject the member's agent uses on an upstream Fleet hub.
	// Flotilla accepts it for compatibility and does not use it.
	Identity *Subject `json:"identity,omitempty"`
	// HeartbeatPeriodSeconds is how often the member reports (1-600, default 60).
	// A member whose last heartbeat is several periods old gets no new placements.
	HeartbeatPeriodSeconds int32 `json:"heartbeatPeriodSeconds,omitempty"`
	// Taints keep placements off the cluster unless they tolerate them (at most 100).
	Taints []Taint `json:"taints,omitempty"`
}

// Subject mirrors rbac/v1 Subject, kept here so the contract needs no k8s.io/api.
type Subject struct {
	Kind      string `json:"kind"`
	APIGroup  string `json:"apiGroup,omitempty"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// Taint repels placements that do not tolerate it.
type Taint struct {
	Key    string      `json:"key"`
	Value  string      `json:"value,omitempty"`
	Effect TaintEffect `json:"effect"`
}

// MemberClusterStatus is the observed state of a member cluster.
type MemberClusterStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Properties are the member's reported properties (node count, cpu, memory),
	// keyed by names such as NodeCountProperty.
	Properties map[PropertyName]PropertyValue `json:"properties,omitempty"`
	// ResourceUsage is the member's total, allocatable and available resources.
	ResourceUsage ResourceUsage `json:"resourceUsage,omitempty"`
	// Namespaces are the member's namespaces, as upstream's property provider
	// reports them: each name maps to the placement that created it on the
	// member ("" for one Flotilla did not create). At most MaxMemberNamespaces;
	// a ResourcePlacement is scheduled only onto members that report its
	// namespace here.
	Namespaces map[string]string `json:"namespaces,omitempty"`
	// AgentStatus is upstream's per-agent status; accepted, not produced.
	AgentStatus []AgentStatus `json:"agentStatus,omitempty"`
}

// MaxMemberNamespaces bounds the namespaces a member reports (upstream tracks
// 200): a member with more reports the first ones by name, and a
// ResourcePlacement is not scheduled onto it for a namespace left out.
const MaxMemberNamespaces = 1000

// PropertyName names a cluster property, e.g. kubernetes-fleet.io/node-count.
type PropertyName string

// PropertyValue is one observed property value, a Kubernetes quantity.
type PropertyValue struct {
	Value           string      `json:"value"`
	ObservationTime metav1.Time `json:"observationTime"`
}

// ResourceList maps resource names (cpu, memory, ...) to quantities, like
// core/v1 ResourceList.
type ResourceList map[string]resource.Quantity

// ResourceUsage is a member's resources summed over its nodes.
type ResourceUsage struct {
	Capacity        ResourceList `json:"capacity,omitempty"`
	Allocatable     ResourceList `json:"allocatable,omitempty"`
	Available       ResourceList `json:"available,omitempty"`
	ObservationTime metav1.Time  `json:"observationTime,omitempty"`
}

// AgentType names a member-side agent in upstream Fleet.
type AgentType string

// AgentStatus is upstream's status of one member-side agent.
type AgentStatus struct {
	Type                  AgentType          `json:"type"`
	Conditions            []metav1.Condition `json:"conditions,omitempty"`
	LastReceivedHeartbeat metav1.Time        `json:"lastReceivedHeartbeat,omitempty"`
}

// MemberClusterConditionType is a condition type of a MemberCluster.
type MemberClusterConditionType string

// Member cluster condition types, as upstream.
const (
	ConditionTypeMemberClusterReadyToJoin MemberClusterConditionType = "ReadyToJoin"
	ConditionTypeMemberClusterJoined      MemberClusterConditionType = "Joined"
	ConditionTypeMemberClusterHealthy     MemberClusterConditionType = "Healthy"
)
