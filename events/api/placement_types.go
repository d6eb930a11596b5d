package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ClusterResourcePlacement selects cluster-scoped resources on the hub (a selected
// Namespace brings everything in it) and places them onto member clusters.
type ClusterResourcePlacement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec PlacementSpec `json:"spec"`

	// Status is the observed state, as the status service reports it.
	Status PlacementStatus `json:"status,omitempty"`

	// Placeholders lists the field paths at which the decoded document held a
	// documentation placeholder ("...") instead of a value. Decode fills it and
	// Validate reports each entry; it is never serialised.
	Placeholders []string `json:"-"`
}

// PlacementSpec is the desired state of a ClusterResourcePlacement.
type PlacementSpec struct {
	// ResourceSelectors select hub resources; they are ORed. 1-100 selectors.
	ResourceSelectors []ClusterResourceSelector `json:"resourceSelectors"`

	// Policy chooses the member clusters. Nil means PickAll.
	Policy *PlacementPolicy `json:"policy,omitempty"`

	// Strategy controls how changes roll out and how they are applied.
	Strategy RolloutStrategy `json:"strategy,omitempty"`

	// RevisionHistoryLimit is the number of old snapshots to keep (1-1000, default 10).
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
}

// EffectivePlacementType is the placement type in force: PickAll when no policy or
// no type is given.
func (s *PlacementSpec) EffectivePlacementType() PlacementType {
	if s.Policy == nil || s.Policy.PlacementType == "" {
		return PickAllPlacementType
	}
	return s.Policy.PlacementType
}

// Tolerations returns the policy's tolerations, nil without a policy.
func (s *PlacementSpec) Tolerations() []Toleration {
	if s.Policy == nil {
		return nil
	}
	return s.Policy.Tolerations
}

// ClusterResourceSelector selects hub resources by group, version and kind, and
// optionally by name or by labels (not both). All given fields are ANDed.
type ClusterResourceSelector struct {
	// Group is the API group; "" is the core group (for example Namespace).
	Group string `json:"group"`
	// Version is the API version, for example v1.
	Version string `json:"version"`
	// Kind is the resource kind. A selected Namespace brings all objects in it.
	Kind string `json:"kind"`
	// Name selects one resource by name.
	Name string `json:"name,omitempty"`
	// LabelSelector selects resources by their labels.
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// SelectionScope says what a Namespace selector brings besides the
	// Namespace: NamespaceWithResources (the default, empty), everything in
	// it; NamespaceOnly, nothing; NamespaceWithResourceSelectors, what the
	// placement's other selectors select in it. Ignored for other kinds.
	SelectionScope SelectionScope `json:"selectionScope,omitempty"`
}

// SelectionScope is what a Namespace selector selects.
type SelectionScope string

const (
	// NamespaceOnly selects the Namespace object only.
	NamespaceOnly SelectionScope = "NamespaceOnly"
	// NamespaceWithResources selects the Namespace and every object in it (the default).
	NamespaceWithResources SelectionScope = "NamespaceWithResources"
	// NamespaceWithResourceSelectors selects the Namespace, and the placement's
	// other selectors select namespaced objects within it (cluster-scoped ones
	// as usual). One such selector at most, by name, and no other Namespace
	// selector with it.
	NamespaceWithResourceSelectors SelectionScope = "NamespaceWithResourceSelectors"
)

// IsNamespace reports whether the selector selects core/v1 Namespaces.
func (s ClusterResourceSelector) IsNamespace() bool {
	return s.Group == "" && s.Kind == "Namespace"
}

// EffectiveSelectionScope is the selection scope in force: NamespaceWithResources
// when none is given.
func (s ClusterResourceSelector) EffectiveSelectionScope() SelectionScope {
	if s.SelectionScope == "" {
		return NamespaceWithResources
	}
	return s.SelectionScope
}

// PlacementType is how the scheduler picks clusters.
type PlacementType string

const (
	// PickAllPlacementType picks every cluster that satisfies the policy.
	PickAllPlacementType PlacementType = "PickAll"
	// PickNPlacementType picks numberOfClusters clusters, best scored first.
	PickNPlacementType PlacementType = "PickN"
	// PickFixedPlacementType picks exactly the clusters named in clusterNames.
	PickFixedPlacementType PlacementType = "PickFixed"
)

// PlacementPolicy holds the rules that choose member clusters.
type PlacementPolicy struct {
	// PlacementType is PickAll (default), PickN or PickFixed. Immutable once set.
	PlacementType PlacementType `json:"placementType,omitempty"`
	// ClusterNames are the member clusters for PickFixed (at most 100).
	ClusterNames []string `json:"clusterNames,omitempty"`
	// NumberOfClusters is N for PickN; required there and forbidden otherwise.
	NumberOfClusters *int32 `json:"numberOfClusters,omitempty"`
	// Affinity filters (required) and scores (preferred) clusters; not with PickFixed.
	Affinity *Affinity `json:"affinity,omitempty"`
	// TopologySpreadConstraints spread the placement across topology domains;
	// PickN only. They are ANDed.
	TopologySpreadConstraints []TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// Tolerations let the placement land on tainted clusters (at most 100).
	// They can be added to but not changed or removed.
	Tolerations []Toleration `json:"tolerations,omitempty"`
}

// Affinity groups the cluster affinity rules.
type Affinity struct {
	ClusterAffinity *ClusterAffinity `json:"clusterAffinity,omitempty"`
}

// ClusterAffinity holds required (filtering) and preferred (scoring) cluster rules.
type ClusterAffinity struct {
	// RequiredDuringSchedulingIgnoredDuringExecution filters clusters.
	RequiredDuringSchedulingIgnoredDuringExecution *ClusterSelector `json:"requiredDuringSchedulingIgnoredDuringExecution,omitempty"`
	// PreferredDuringSchedulingIgnoredDuringExecution scores clusters: a matching
	// term adds its weight. Ignored for PickAll.
	PreferredDuringSchedulingIgnoredDuringExecution []PreferredClusterSelector `json:"preferredDuringSchedulingIgnoredDuringExecution,omitempty"`
}

// ClusterSelector is a set of ORed cluster selector terms (at most 10).
type ClusterSelector struct {
	ClusterSelectorTerms []ClusterSelectorTerm `json:"clusterSelectorTerms"`
}

// ClusterSelectorTerm matches clusters by labels and/or properties (ANDed).
type ClusterSelectorTerm struct {
	// LabelSelector matches cluster labels.
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// PropertySelector matches cluster properties; required terms only.
	PropertySelector *PropertySelector `json:"propertySelector,omitempty"`
	// PropertySorter scores clusters linearly by a property; preferred terms only.
	PropertySorter *PropertySorter `json:"propertySorter,omitempty"`
}

// PreferredClusterSelector adds Weight to the score of every cluster matching Preference.
type PreferredClusterSelector struct {
	// Weight is in [-100, 100].
	Weight int32 `json:"weight"`
	// Preference is the term a cluster must match to receive the weight.
	Preference ClusterSelectorTerm `json:"preference"`
}

// PropertySelector is a list of ANDed property requirements.
type PropertySelector struct {
	MatchExpressions []PropertySelectorRequirement `json:"matchExpressions"`
}

// PropertySelectorOperator compares a cluster's property with a value.
type PropertySelectorOperator string

const (
	PropertySelectorGreaterThan          PropertySelectorOperator = "Gt"
	PropertySelectorGreaterThanOrEqualTo PropertySelectorOperator = "Ge"
	PropertySelectorEqualTo              PropertySelectorOperator = "Eq"
	PropertySelectorNotEqualTo           PropertySelectorOperator = "Ne"
	PropertySelectorLessThan             PropertySelectorOperator = "Lt"
	PropertySelectorLessThanOrEqualTo    PropertySelectorOperator = "Le"
)

// PropertySelectorRequirement compares the property Name of a cluster with the
// single value in Values, a Kubernetes quantity.
type PropertySelectorRequirement struct {
	Name     string                   `json:"name"`
	Operator PropertySelectorOperator `json:"operator"`
	Values   []string                 `json:"values"`
}

// PropertySortOrder says which end of a property's range scores highest.
type PropertySortOrder string

const (
	// Descending gives the full weight to the cluster with the highest value.
	Descending PropertySortOrder = "Descending"
	// Ascending gives the full weight to the cluster with the lowest value.
	Ascending PropertySortOrder = "Ascending"
)

// PropertySorter scores clusters by interpolating a property between the lowest
// and highest observed values.
type PropertySorter struct {
	Name      string            `json:"name"`
	SortOrder PropertySortOrder `json:"sortOrder"`
}

// UnsatisfiableConstraintAction says what to do when a spread constraint cannot be met.
type UnsatisfiableConstraintAction string

const (
	// DoNotSchedule filters out clusters that would violate the constraint.
	DoNotSchedule UnsatisfiableConstraintAction = "DoNotSchedule"
	// ScheduleAnyway only prefers clusters that reduce the skew.
	ScheduleAnyway UnsatisfiableConstraintAction = "ScheduleAnyway"
)

// TopologySpreadConstraint spreads the placement across the values of a cluster label.
type TopologySpreadConstraint struct {
	// MaxSkew is the largest allowed difference between domains (default 1, >= 1).
	MaxSkew *int32 `json:"maxSkew,omitempty"`
	// TopologyKey is the cluster label whose values are the domains.
	TopologyKey string `json:"topologyKey"`
	// WhenUnsatisfiable is DoNotSchedule (default) or ScheduleAnyway.
	WhenUnsatisfiable UnsatisfiableConstraintAction `json:"whenUnsatisfiable,omitempty"`
}

// TolerationOperator relates a toleration's key to its value.
type TolerationOperator string

const (
	TolerationOpEqual  TolerationOperator = "Equal"
	TolerationOpExists TolerationOperator = "Exists"
)

// TaintEffect is what a taint does to placements that do not tolerate it.
type TaintEffect string

// TaintEffectNoSchedule keeps new placements off the cluster; the only effect Fleet knows.
const TaintEffectNoSchedule TaintEffect = "NoSchedule"

// Toleration tolerates taints matching key, value and effect under Operator.
type Toleration struct {
	// Key is the taint key; empty with operator Exists matches every taint.
	Key string `json:"key,omitempty"`
	// Operator is Equal (default) or Exists.
	Operator TolerationOperator `json:"operator,omitempty"`
	// Value must be empty with Exists.
	Value string `json:"value,omitempty"`
	// Effect is empty (any) or NoSchedule.
	Effect TaintEffect `json:"effect,omitempty"`
}

// RolloutStrategyType is how a new resource snapshot reaches the clusters.
type RolloutStrategyType string

const (
	RollingUpdateRolloutStrategyType RolloutStrategyType = "RollingUpdate"
	ExternalRolloutStrategyType      RolloutStrategyType = "External"
)

// RolloutStrategy describes how changes roll out and are applied.
type RolloutStrategy struct {
	// Type is RollingUpdate (default) or External.
	Type RolloutStrategyType `json:"type,omitempty"`
	// RollingUpdate tunes a RollingUpdate; not allowed with External.
	RollingUpdate *RollingUpdateConfig `json:"rollingUpdate,omitempty"`
	// ApplyStrategy says when and how manifests are applied on members.
	ApplyStrategy *ApplyStrategy `json:"applyStrategy,omitempty"`
	// DeleteStrategy says what happens to placed objects when the placement is deleted.
	DeleteStrategy *DeleteStrategy `json:"deleteStrategy,omitempty"`
}

// Rolling update defaults.
const (
	DefaultMaxUnavailable           = "25%"
	DefaultMaxSurge                 = "25%"
	DefaultUnavailablePeriodSeconds = 60
	DefaultRevisionHistoryLimit     = int32(10)
)

// RollingUpdateConfig bounds a rolling update. Percentages are of the target
// cluster count, rounded up.
type RollingUpdateConfig struct {
	// MaxUnavailable is an int >= 0 or a percentage 0-100% (default 25%).
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// MaxSurge is an int >= 0 or a percentage 0-100% (default 25%).
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`
	// UnavailablePeriodSeconds is how long an untrackable resource counts as
	// unavailable after it applied (default 60).
	UnavailablePeriodSeconds *int `json:"unavailablePeriodSeconds,omitempty"`
}

// ComparisonOptionType is how hub manifests are compared with member objects.
type ComparisonOptionType string

const (
	// ComparisonOptionTypePartialComparison compares only the fields the manifest sets.
	ComparisonOptionTypePartialComparison ComparisonOptionType = "PartialComparison"
	// ComparisonOptionTypeFullComparison compares every field of the member object.
	ComparisonOptionTypeFullComparison ComparisonOptionType = "FullComparison"
)

// WhenToApplyType is when manifests are (re)applied.
type WhenToApplyType string

const (
	// WhenToApplyTypeAlways re-applies, overwriting drift in managed fields.
	WhenToApplyTypeAlways WhenToApplyType = "Always"
	// WhenToApplyTypeIfNotDrifted stops applying to objects that drifted.
	WhenToApplyTypeIfNotDrifted WhenToApplyType = "IfNotDrifted"
)

// ApplyStrategyType is the apply mechanism.
type ApplyStrategyType string

const (
	ApplyStrategyTypeClientSideApply ApplyStrategyType = "ClientSideApply"
	ApplyStrategyTypeServerSideApply ApplyStrategyType = "ServerSideApply"
	// ApplyStrategyTypeReportDiff applies nothing and reports differences.
	ApplyStrategyTypeReportDiff ApplyStrategyType = "ReportDiff"
)

// WhenToTakeOverType is what to do with an object that already exists on a member.
type WhenToTakeOverType string

const (
	// WhenToTakeOverTypeAlways takes existing objects over, overwriting managed fields.
	WhenToTakeOverTypeAlways WhenToTakeOverType = "Always"
	// WhenToTakeOverTypeIfNoDiff takes over only objects that match the manifest.
	WhenToTakeOverTypeIfNoDiff WhenToTakeOverType = "IfNoDiff"
	// WhenToTakeOverTypeNever never touches existing objects and reports them.
	WhenToTakeOverTypeNever WhenToTakeOverType = "Never"
)

// ApplyStrategy says when and how manifests are applied on member clusters.
type ApplyStrategy struct {
	// ComparisonOption is PartialComparison (default) or FullComparison.
	ComparisonOption ComparisonOptionType `json:"comparisonOption,omitempty"`
	// WhenToApply is Always (default) or IfNotDrifted.
	WhenToApply WhenToApplyType `json:"whenToApply,omitempty"`
	// Type is ClientSideApply (default), ServerSideApply or ReportDiff.
	Type ApplyStrategyType `json:"type,omitempty"`
	// AllowCoOwnership lets Flotilla apply to objects other agents also own.
	AllowCoOwnership bool `json:"allowCoOwnership,omitempty"`
	// ServerSideApplyConfig tunes ServerSideApply; only valid with that type.
	ServerSideApplyConfig *ServerSideApplyConfig `json:"serverSideApplyConfig,omitempty"`
	// WhenToTakeOver is Always (default), IfNoDiff or Never.
	WhenToTakeOver WhenToTakeOverType `json:"whenToTakeOver,omitempty"`
}

// ServerSideApplyConfig tunes server-side apply.
type ServerSideApplyConfig struct {
	// ForceConflicts takes ownership of conflicting fields instead of failing.
	ForceConflicts bool `json:"force"`
}

// DeletePropagationPolicy is what happens to placed objects when the placement goes.
type DeletePropagationPolicy string

const (
	// DeletePropagationPolicyDelete deletes placed objects (default).
	DeletePropagationPolicyDelete DeletePropagationPolicy = "Delete"
	// DeletePropagationPolicyAbandon leaves placed objects on the members.
	DeletePropagationPolicyAbandon DeletePropagationPolicy = "Abandon"
)

// DeleteStrategy configures deletion of placed objects.
type DeleteStrategy struct {
	PropagationPolicy DeletePropagationPolicy `json:"propagationPolicy,omitempty"`
}
