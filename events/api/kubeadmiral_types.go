package api

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PropagationPolicy is KubeAdmiral's namespaced scheduling policy
// (core.kubeadmiral.io/v1alpha1). Hub objects select it with the label
// PropagationPolicyNameLabel; with the annotation ConflictResolutionAnnotation
// set to "adopt", existing member objects are adopted.
type PropagationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PropagationPolicySpec   `json:"spec"`
	Status PropagationPolicyStatus `json:"status,omitempty"`

	// Placeholders: see ClusterResourcePlacement.Placeholders.
	Placeholders []string `json:"-"`
}

// ClusterPropagationPolicy is the cluster-scoped PropagationPolicy, selected with
// ClusterPropagationPolicyNameLabel.
type ClusterPropagationPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PropagationPolicySpec   `json:"spec"`
	Status PropagationPolicyStatus `json:"status,omitempty"`

	// Placeholders: see ClusterResourcePlacement.Placeholders.
	Placeholders []string `json:"-"`
}

// SchedulingMode is how KubeAdmiral spreads a workload.
type SchedulingMode string

const (
	// SchedulingModeDuplicate places the whole object on every chosen cluster.
	SchedulingModeDuplicate SchedulingMode = "Duplicate"
	// SchedulingModeDivide divides the replicas between the chosen clusters.
	SchedulingModeDivide SchedulingMode = "Divide"
)

// PropagationPolicySpec mirrors KubeAdmiral's policy spec.
type PropagationPolicySpec struct {
	SchedulingProfile string         `json:"schedulingProfile,omitempty"`
	SchedulingMode    SchedulingMode `json:"schedulingMode"`
	// StickyCluster is deprecated upstream in favour of reschedulePolicy.
	StickyCluster bool `json:"stickyCluster,omitempty"`
	// ClusterSelector matches cluster labels exactly; empty selects all.
	ClusterSelector map[string]string `json:"clusterSelector,omitempty"`
	// ClusterAffinity is a list of ORed terms; empty selects all.
	ClusterAffinity []PropagationClusterSelectorTerm `json:"clusterAffinity,omitempty"`
	Tolerations     []PropagationToleration          `json:"tolerations,omitempty"`
	// MaxClusters bounds the number of clusters; nil is unbounded.
	MaxClusters *int64 `json:"maxClusters,omitempty"`
	// Placements lists the clusters explicitly, with per-cluster preferences.
	Placements                []DesiredPlacement   `json:"placement,omitempty"`
	DisableFollowerScheduling bool                 `json:"disableFollowerScheduling,omitempty"`
	AutoMigration             *AutoMigration       `json:"autoMigration,omitempty"`
	ReplicaRescheduling       *ReplicaRescheduling `json:"replicaRescheduling,omitempty"`
	ReschedulePolicy          *ReschedulePolicy    `json:"reschedulePolicy,omitempty"`
}

// PropagationClusterSelectorTerm is a KubeAdmiral cluster affinity term (its
// ClusterSelectorTerm); requirements are ANDed.
type PropagationClusterSelectorTerm struct {
	MatchExpressions []PropagationClusterSelectorRequirement `json:"matchExpressions,omitempty"`
	MatchFields      []PropagationClusterSelectorRequirement `json:"matchFields,omitempty"`
}

// PropagationClusterSelectorOperator is In, NotIn, Exists, DoesNotExist, Gt or Lt.
type PropagationClusterSelectorOperator string

const (
	PropagationClusterSelectorOpIn           PropagationClusterSelectorOperator = "In"
	PropagationClusterSelectorOpNotIn        PropagationClusterSelectorOperator = "NotIn"
	PropagationClusterSelectorOpExists       PropagationClusterSelectorOperator = "Exists"
	PropagationClusterSelectorOpDoesNotExist PropagationClusterSelectorOperator = "DoesNotExist"
	PropagationClusterSelectorOpGt           PropagationClusterSelectorOperator = "Gt"
	PropagationClusterSelectorOpLt           PropagationClusterSelectorOperator = "Lt"
)

// PropagationClusterSelectorRequirement relates a cluster label or field to values.
type PropagationClusterSelectorRequirement struct {
	Key      string                             `json:"key"`
	Operator PropagationClusterSelectorOperator `json:"operator"`
	Values   []string                           `json:"values"`
}

// PropagationToleration mirrors core/v1 Toleration, which KubeAdmiral uses.
type PropagationToleration struct {
	Key               string             `json:"key,omitempty"`
	Operator          TolerationOperator `json:"operator,omitempty"`
	Value             string             `json:"value,omitempty"`
	Effect            string             `json:"effect,omitempty"`
	TolerationSeconds *int64             `json:"tolerationSeconds,omitempty"`
}

// DesiredPlacement names one cluster the object may go to.
type DesiredPlacement struct {
	Cluster     string      `json:"cluster"`
	Preferences Preferences `json:"preferences,omitempty"`
}

// Preferences tune the replicas a cluster receives in Divide mode.
type Preferences struct {
	MinReplicas int64  `json:"minReplicas,omitempty"`
	MaxReplicas *int64 `json:"maxReplicas,omitempty"`
	Weight      *int64 `json:"weight,omitempty"`
}

// AutoMigration moves replicas that stay unschedulable.
type AutoMigration struct {
	Trigger                   AutoMigrationTrigger `json:"when"`
	KeepUnschedulableReplicas bool                 `json:"keepUnschedulableReplicas"`
}

// AutoMigrationTrigger says when a replica is migrated.
type AutoMigrationTrigger struct {
	PodUnschedulableDuration *metav1.Duration `json:"podUnschedulableFor,omitempty"`
}

// ReplicaRescheduling tunes replica rescheduling.
type ReplicaRescheduling struct {
	AvoidDisruption bool `json:"avoidDisruption"`
}

// ReschedulePolicy says when objects are rescheduled.
type ReschedulePolicy struct {
	DisableRescheduling bool                 `json:"disableRescheduling,omitempty"`
	Trigger             *RescheduleTrigger   `json:"rescheduleWhen,omitempty"`
	ReplicaRescheduling *ReplicaRescheduling `json:"replicaRescheduling,omitempty"`
}

// RescheduleTrigger lists the events that trigger rescheduling.
type RescheduleTrigger struct {
	PolicyContentChanged       bool `json:"policyContentChanged"`
	ClusterJoined              bool `json:"clusterJoined"`
	ClusterLabelsChanged       bool `json:"clusterLabelsChanged"`
	ClusterAPIResourcesChanged bool `json:"clusterAPIResourcesChanged"`
}

// PropagationPolicyStatus is KubeAdmiral's reference-count status.
type PropagationPolicyStatus struct {
	RefCount      int64           `json:"refCount,omitempty"`
	TypedRefCount []TypedRefCount `json:"typedRefCount,omitempty"`
}

// TypedRefCount counts the objects of one resource that use a policy.
type TypedRefCount struct {
	Group    string `json:"group,omitempty"`
	Resource string `json:"resource"`
	Count    int64  `json:"count"`
}
