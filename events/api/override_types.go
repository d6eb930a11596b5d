package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ClusterResourceOverride changes cluster-scoped hub objects (and, through a
// selected Namespace, everything in it) on the member clusters its rules
// select, before they are applied there. Fleet's kind of the same name
// (placement.kubernetes-fleet.io v1alpha1, v1beta1 and v1: the same fields).
type ClusterResourceOverride struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ClusterResourceOverrideSpec `json:"spec"`

	// Placeholders: see ClusterResourcePlacement.Placeholders.
	Placeholders []string `json:"-"`
}

// ClusterResourceOverrideSpec is the desired state of a ClusterResourceOverride.
// An object may be selected by one ClusterResourceOverride at most; when a
// ResourceOverride selects it too, the ResourceOverride's rules apply last and
// so win.
type ClusterResourceOverrideSpec struct {
	// Placement names the placement the override is for. Set, a change of the
	// override rolls out at once under that placement's strategy; unset, the
	// override applies to every placement that selects its objects, from the
	// next resource snapshot each cuts. Immutable.
	Placement *PlacementRef `json:"placement,omitempty"`

	// ClusterResourceSelectors select cluster-scoped objects by name (ORed, 1-20);
	// a label selector is not supported. A selected Namespace brings every
	// object in it.
	ClusterResourceSelectors []ClusterResourceSelector `json:"clusterResourceSelectors"`

	// Policy says how the selected objects change on which clusters.
	Policy *OverridePolicy `json:"policy"`
}

// ResourceOverride changes namespaced hub objects of its own namespace on the
// member clusters its rules select.
type ResourceOverride struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ResourceOverrideSpec `json:"spec"`

	// Placeholders: see ClusterResourcePlacement.Placeholders.
	Placeholders []string `json:"-"`
}

// ResourceOverrideSpec is the desired state of a ResourceOverride. An object
// may be selected by one ResourceOverride at most.
type ResourceOverrideSpec struct {
	// Placement: see ClusterResourceOverrideSpec.Placement.
	Placement *PlacementRef `json:"placement,omitempty"`

	// ResourceSelectors select objects of the override's namespace by name
	// (ORed, 1-20).
	ResourceSelectors []ResourceSelector `json:"resourceSelectors"`

	// Policy says how the selected objects change on which clusters.
	Policy *OverridePolicy `json:"policy"`
}

// ResourceScope is the scope of the placement an override names.
type ResourceScope string

const (
	// ClusterScoped names a ClusterResourcePlacement (the default).
	ClusterScoped ResourceScope = "Cluster"
	// NamespaceScoped names a ResourcePlacement in the override's namespace.
	NamespaceScoped ResourceScope = "Namespaced"
)

// PlacementRef names a placement.
type PlacementRef struct {
	Name string `json:"name"`
	// Scope is Cluster (default) or Namespaced.
	Scope ResourceScope `json:"scope,omitempty"`
}

// ResourceSelector selects one namespaced object of the override's namespace.
// Every field is required except Group ("" is the core group).
type ResourceSelector struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	Name    string `json:"name"`
}

// OverridePolicy holds the rules of an override, applied in order: where two
// rules change the same field on a cluster, the last one wins.
type OverridePolicy struct {
	// OverrideRules are 1-20 rules.
	OverrideRules []OverrideRule `json:"overrideRules"`
}

// OverrideType is what a rule does to the selected objects.
type OverrideType string

const (
	// JSONPatchOverrideType patches the objects (RFC 6902), the default.
	JSONPatchOverrideType OverrideType = "JSONPatch"
	// DeleteOverrideType keeps the objects off the selected clusters.
	DeleteOverrideType OverrideType = "Delete"
)

// OverrideRule changes the selected objects on the clusters ClusterSelector
// selects.
type OverrideRule struct {
	// ClusterSelector selects clusters by their labels (terms ORed; only
	// labelSelector terms). Nil selects no cluster, an empty one (no terms)
	// every cluster.
	ClusterSelector *ClusterSelector `json:"clusterSelector,omitempty"`
	// OverrideType is JSONPatch (default) or Delete.
	OverrideType OverrideType `json:"overrideType,omitempty"`
	// JSONPatchOverrides are the patches of a JSONPatch rule (1-20), in order;
	// not allowed with Delete.
	JSONPatchOverrides []JSONPatchOverride `json:"jsonPatchOverrides,omitempty"`
}

// JSONPatchOverrideOperator is an RFC 6902 operation.
type JSONPatchOverrideOperator string

const (
	JSONPatchOverrideOpAdd     JSONPatchOverrideOperator = "add"
	JSONPatchOverrideOpRemove  JSONPatchOverrideOperator = "remove"
	JSONPatchOverrideOpReplace JSONPatchOverrideOperator = "replace"
)

// Variables a JSON patch value may hold, replaced per cluster before the patch
// applies.
const (
	// OverrideClusterNameVariable stands for the member cluster's name.
	OverrideClusterNameVariable = "${MEMBER-CLUSTER-NAME}"
	// OverrideClusterLabelKeyVariablePrefix, a label key and "}" stand for the
	// value of that label on the member cluster; a cluster without the label
	// fails the override.
	OverrideClusterLabelKeyVariablePrefix = "${MEMBER-CLUSTER-LABEL-KEY-"
)

// JSONPatchOverride is one RFC 6902 operation on the selected objects.
type JSONPatchOverride struct {
	// Operator is add, remove or replace.
	Operator JSONPatchOverrideOperator `json:"op"`
	// Path is a JSON pointer; the patch fails on a cluster where the path's
	// parent (remove, replace: the path itself) does not exist.
	Path string `json:"path"`
	// Value is the JSON value of add and replace; empty for remove. It may
	// hold the variables above.
	Value runtime.RawExtension `json:"value,omitzero"`
}

// Override limits from the upstream API.
const (
	MaxOverrideSelectors  = 20
	MaxOverrideRules      = 20
	MaxJSONPatchOverrides = 20
)
