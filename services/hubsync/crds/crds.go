// Package crds builds the CustomResourceDefinitions of the Fleet kinds Flotilla accepts
// (ClusterResourcePlacement, ResourcePlacement and MemberCluster, the envelopes, KubeAdmiral's propagation
// policies, overrides, evictions and disruption budgets, staged update strategies and
// runs), with OpenAPI schemas generated from the Go types in events/api, status
// subresources, and upstream's names, short names, categories and printer columns, so
// that kubectl shows them as it does on an upstream Fleet hub. hubsync installs them.
package crds

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Kind is one kind hubsync serves on the hub.
type Kind struct {
	GVK      schema.GroupVersionKind
	Plural   string
	Singular string
	// Namespaced kinds live in a namespace; the others are cluster-scoped.
	Namespaced bool
	ShortNames []string
	Categories []string
	// Status: the kind has a status subresource hubsync writes.
	Status  bool
	Columns []apiextensionsv1.CustomResourceColumnDefinition
	schema  func() (*apiextensionsv1.JSONSchemaProps, error)
}

// GVR is the kind's resource.
func (k Kind) GVR() schema.GroupVersionResource {
	return k.GVK.GroupVersion().WithResource(k.Plural)
}

// condition is the JSONPath of a condition's field by type.
func condition(typ, field string) string {
	return fmt.Sprintf(`.status.conditions[?(@.type=="%s")].%s`, typ, field)
}

func column(name, typ, path string, priority int32) apiextensionsv1.CustomResourceColumnDefinition {
	return apiextensionsv1.CustomResourceColumnDefinition{Name: name, Type: typ, JSONPath: path, Priority: priority}
}

// rpCondition is the JSONPath of a ResourcePlacement's condition field: the placement
// condition t by its ResourcePlacement name (ResourcePlacementApplied).
func rpCondition(t api.ClusterResourcePlacementConditionType, field string) string {
	return condition(api.ResourcePlacementConditionType(string(t)), field)
}

var age = column("Age", "date", ".metadata.creationTimestamp", 0)

// Placement, Member and the others are the kinds, in the order hubsync installs them.
var (
	Placement = Kind{
		GVK:    api.PlacementGroupVersion.WithKind(api.ClusterResourcePlacementKind),
		Plural: "clusterresourceplacements", Singular: "clusterresourceplacement",
		ShortNames: []string{"crp"}, Categories: []string{"fleet", "fleet-placement"}, Status: true,
		// Upstream's columns; -o wide adds what fleetctl get -o wide shows too.
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			column("Gen", "string", ".metadata.generation", 0),
			column("Scheduled", "string", condition(string(api.ClusterResourcePlacementScheduledConditionType), "status"), 0),
			column("Scheduled-Gen", "string", condition(string(api.ClusterResourcePlacementScheduledConditionType), "observedGeneration"), 0),
			column("Available", "string", condition(string(api.ClusterResourcePlacementAvailableConditionType), "status"), 0),
			column("Available-Gen", "string", condition(string(api.ClusterResourcePlacementAvailableConditionType), "observedGeneration"), 0),
			age,
			column("Applied", "string", condition(string(api.ClusterResourcePlacementAppliedConditionType), "status"), 1),
			column("Applied-Gen", "string", condition(string(api.ClusterResourcePlacementAppliedConditionType), "observedGeneration"), 1),
			column("Policy", "string", ".spec.policy.placementType", 1),
		},
		schema: SchemaOf[api.ClusterResourcePlacement],
	}
	// ResourcePlacement is the namespaced placement (upstream serves it in v1beta1): the
	// ClusterResourcePlacement's schema and columns, its conditions' ResourcePlacement names.
	ResourcePlacement = Kind{
		GVK:    api.PlacementGroupVersion.WithKind(api.ResourcePlacementKind),
		Plural: "resourceplacements", Singular: "resourceplacement", Namespaced: true,
		ShortNames: []string{"rp"}, Categories: []string{"fleet", "fleet-placement"}, Status: true,
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			column("Gen", "string", ".metadata.generation", 0),
			column("Scheduled", "string", rpCondition(api.ClusterResourcePlacementScheduledConditionType, "status"), 0),
			column("Scheduled-Gen", "string", rpCondition(api.ClusterResourcePlacementScheduledConditionType, "observedGeneration"), 0),
			column("Available", "string", rpCondition(api.ClusterResourcePlacementAvailableConditionType, "status"), 0),
			column("Available-Gen", "string", rpCondition(api.ClusterResourcePlacementAvailableConditionType, "observedGeneration"), 0),
			age,
			column("Applied", "string", rpCondition(api.ClusterResourcePlacementAppliedConditionType, "status"), 1),
			column("Applied-Gen", "string", rpCondition(api.ClusterResourcePlacementAppliedConditionType, "observedGeneration"), 1),
			column("Policy", "string", ".spec.policy.placementType", 1),
		},
		schema: SchemaOf[api.ClusterResourcePlacement],
	}
	Member = Kind{
		GVK:    api.ClusterGroupVersion.WithKind(api.MemberClusterKind),
		Plural: "memberclusters", Singular: "membercluster",
		ShortNames: []string{"cluster"}, Categories: []string{"fleet", "fleet-cluster"}, Status: true,
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			column("Joined", "string", condition(string(api.ConditionTypeMemberClusterJoined), "status"), 0),
			age,
			column("Node-Count", "string", `.status.properties.kubernetes-fleet\.io/node-count.value`, 0),
			column("Available-CPU", "string", ".status.resourceUsage.available.cpu", 0),
			column("Available-Memory", "string", ".status.resourceUsage.available.memory", 0),
			column("Allocatable-CPU", "string", ".status.resourceUsage.allocatable.cpu", 1),
			column("Allocatable-Memory", "string", ".status.resourceUsage.allocatable.memory", 1),
		},
		schema: SchemaOf[api.MemberCluster],
	}
	ClusterEnvelope = Kind{
		GVK:    api.PlacementGroupVersion.WithKind(api.ClusterResourceEnvelopeKind),
		Plural: "clusterresourceenvelopes", Singular: "clusterresourceenvelope",
		Categories: []string{"fleet", "fleet-placement"}, Columns: []apiextensionsv1.CustomResourceColumnDefinition{age},
		schema: SchemaOf[api.ClusterResourceEnvelope],
	}
	Envelope = Kind{
		GVK:    api.PlacementGroupVersion.WithKind(api.ResourceEnvelopeKind),
		Plural: "resourceenvelopes", Singular: "resourceenvelope", Namespaced: true,
		Categories: []string{"fleet", "fleet-placement"}, Columns: []apiextensionsv1.CustomResourceColumnDefinition{age},
		schema: SchemaOf[api.ResourceEnvelope],
	}
	PropagationPolicy = Kind{
		GVK:    api.KubeAdmiralGroupVersion.WithKind(api.PropagationPolicyKind),
		Plural: "propagationpolicies", Singular: "propagationpolicy", Namespaced: true,
		ShortNames: []string{"pp"}, Categories: []string{"kubeadmiral-all"}, Columns: []apiextensionsv1.CustomResourceColumnDefinition{age},
		schema: SchemaOf[api.PropagationPolicy],
	}
	ClusterPropagationPolicy = Kind{
		GVK:    api.KubeAdmiralGroupVersion.WithKind(api.ClusterPropagationPolicyKind),
		Plural: "clusterpropagationpolicies", Singular: "clusterpropagationpolicy",
		ShortNames: []string{"cpp"}, Categories: []string{"kubeadmiral-all"}, Columns: []apiextensionsv1.CustomResourceColumnDefinition{age},
		schema: SchemaOf[api.ClusterPropagationPolicy],
	}
)

// Overrides, evictions and disruption budgets, with upstream's names, short names and
// columns. Upstream serves overrides in several versions; the hub serves them in
// v1beta1, the version Flotilla's placements are in.
var (
	ClusterOverride = Kind{
		GVK:    api.PlacementGroupVersion.WithKind(api.ClusterResourceOverrideKind),
		Plural: "clusterresourceoverrides", Singular: "clusterresourceoverride",
		Categories: []string{"fleet", "fleet-placement"}, Columns: []apiextensionsv1.CustomResourceColumnDefinition{age},
		schema: overrideSchema[api.ClusterResourceOverride],
	}
	Override = Kind{
		GVK:    api.PlacementGroupVersion.WithKind(api.ResourceOverrideKind),
		Plural: "resourceoverrides", Singular: "resourceoverride", Namespaced: true,
		Categories: []string{"fleet", "fleet-placement"}, Columns: []apiextensionsv1.CustomResourceColumnDefinition{age},
		schema: overrideSchema[api.ResourceOverride],
	}
	Eviction = Kind{
		GVK:    api.PlacementGroupVersion.WithKind(api.ClusterResourcePlacementEvictionKind),
		Plural: "clusterresourceplacementevictions", Singular: "clusterresourceplacementeviction",
		ShortNames: []string{"crpe"}, Categories: []string{"fleet", "fleet-placement"}, Status: true,
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			column("Valid", "string", condition(api.EvictionConditionValid, "status"), 0),
			column("Executed", "string", condition(api.EvictionConditionExecuted, "status"), 0),
			age,
		},
		schema: SchemaOf[api.ClusterResourcePlacementEviction],
	}
	DisruptionBudget = Kind{
		GVK:    api.PlacementGroupVersion.WithKind(api.ClusterResourcePlacementDisruptionBudgetKind),
		Plural: "clusterresourceplacementdisruptionbudgets", Singular: "clusterresourceplacementdisruptionbudget",
		ShortNames: []string{"crpdb"}, Categories: []string{"fleet", "fleet-placement"},
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			column("Max-Unavailable", "string", ".spec.maxUnavailable", 0),
			column("Min-Available", "string", ".spec.minAvailable", 0),
			age,
		},
		schema: SchemaOf[api.ClusterResourcePlacementDisruptionBudget],
	}
)

// Staged updates: strategies and runs (a run's status is the rollout's, written back).
// Approval requests are the rollout's to create; they stay off the hub (fleetctl approve).
var (
	StagedUpdateStrategy = Kind{
		GVK:    api.PlacementGroupVersion.WithKind(api.ClusterStagedUpdateStrategyKind),
		Plural: "clusterstagedupdatestrategies", Singular: "clusterstagedupdatestrategy",
		ShortNames: []string{"csus"}, Categories: []string{"fleet", "fleet-placement"},
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{age},
		schema:  SchemaOf[api.ClusterStagedUpdateStrategy],
	}
	StagedUpdateRun = Kind{
		GVK:    api.PlacementGroupVersion.WithKind(api.ClusterStagedUpdateRunKind),
		Plural: "clusterstagedupdateruns", Singular: "clusterstagedupdaterun",
		ShortNames: []string{"csur"}, Categories: []string{"fleet", "fleet-placement"}, Status: true,
		Columns: []apiextensionsv1.CustomResourceColumnDefinition{
			column("Placement", "string", ".spec.placementName", 0),
			column("Resource-Snapshot-Index", "string", ".spec.resourceSnapshotIndex", 0),
			column("Policy-Snapshot-Index", "string", ".status.policySnapshotIndexUsed", 0),
			column("Initialized", "string", condition(api.UpdateRunConditionInitialized, "status"), 0),
			column("Progressing", "string", condition(api.UpdateRunConditionProgressing, "status"), 0),
			column("Succeeded", "string", condition(api.UpdateRunConditionSucceeded, "status"), 0),
			age,
			column("Strategy", "string", ".spec.stagedRolloutStrategyName", 1),
		},
		schema: SchemaOf[api.ClusterStagedUpdateRun],
	}
)

// Kinds are every kind hubsync installs.
var Kinds = []Kind{Placement, ResourcePlacement, Member, ClusterEnvelope, Envelope, PropagationPolicy, ClusterPropagationPolicy,
	ClusterOverride, Override, Eviction, DisruptionBudget, StagedUpdateStrategy, StagedUpdateRun}

// FieldManager owns what hubsync writes on the hub.
const FieldManager = "flotilla-hubsync"

// CRD is the CustomResourceDefinition of k.
func (k Kind) CRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	s, err := k.schema()
	if err != nil {
		return nil, fmt.Errorf("schema of %s: %w", k.GVK.Kind, err)
	}
	scope := apiextensionsv1.ClusterScoped
	if k.Namespaced {
		scope = apiextensionsv1.NamespaceScoped
	}
	version := apiextensionsv1.CustomResourceDefinitionVersion{
		Name: k.GVK.Version, Served: true, Storage: true,
		Schema:                   &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: s},
		AdditionalPrinterColumns: k.Columns,
	}
	if k.Status {
		version.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: k.Plural + "." + k.GVK.Group,
			Labels: map[string]string{"app.kubernetes.io/managed-by": FieldManager}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: k.GVK.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: k.Plural, Singular: k.Singular, Kind: k.GVK.Kind, ListKind: k.GVK.Kind + "List",
				ShortNames: k.ShortNames, Categories: k.Categories,
			},
			Scope:    scope,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version},
		},
	}, nil
}

// All are the CRDs of Kinds.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(Kinds))
	for _, k := range Kinds {
		crd, err := k.CRD()
		if err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
	return out, nil
}

// ByGVK finds the kind of gvk.
func ByGVK(gvk schema.GroupVersionKind) (Kind, bool) {
	for _, k := range Kinds {
		if k.GVK == gvk {
			return k, true
		}
	}
	return Kind{}, false
}
