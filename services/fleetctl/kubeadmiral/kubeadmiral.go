// Package kubeadmiral maps KubeAdmiral's PropagationPolicy and
// ClusterPropagationPolicy (core.kubeadmiral.io/v1alpha1) onto Fleet
// ClusterResourcePlacements, so that a KubeAdmiral user's files work with
// Flotilla unchanged.
//
// A policy becomes two placements. Both select, for each kind in Kinds, the
// hub objects labelled with the policy's name (kubeadmiral.io/propagation-policy-name
// or kubeadmiral.io/cluster-propagation-policy-name):
//
//   - <prefix>.<namespace>.<name> selects those without AdoptLabel, with
//     whenToTakeOver Never: an object that already exists on a member is left
//     alone and reported (KubeAdmiral reports such a conflict too);
//   - <prefix>-adopt.<namespace>.<name> selects those with AdoptLabel, with
//     whenToTakeOver Always: the existing object is adopted, as KubeAdmiral
//     adopts objects annotated kubeadmiral.io/conflict-resolution: adopt.
//
// fleetctl sets AdoptLabel on hub objects that carry that annotation (a
// placement can select labels, not annotations). Two placements are needed
// because the annotation is per object while whenToTakeOver is per placement.
//
// The selectors pick namespaced kinds directly, which a plain
// ClusterResourcePlacement cannot: each also names NamespaceLabel, which makes
// it namespace-aware in the rollout's selection. A PropagationPolicy's match
// NamespaceLabel=<its namespace>, since KubeAdmiral applies a policy to the
// objects of its own namespace; a ClusterPropagationPolicy's require the key
// to exist, which every hub object satisfies (cluster-scoped ones with an
// empty namespace).
//
// The prefix is pp for a PropagationPolicy and cpp (without the namespace) for
// a ClusterPropagationPolicy.
//
// Clusters: clusterSelector, clusterAffinity and the clusters listed under
// placement become required cluster affinity (the listed clusters through the
// kubernetes-fleet.io/member-name label every member carries), with
// placementType PickAll, or PickN with numberOfClusters = maxClusters when
// that is set; per-cluster weights become preferred affinity for PickN.
// PickAll is used rather than PickFixed for a plain cluster list because
// KubeAdmiral's list names candidate clusters (an absent one is not an error)
// and because a placement's type is immutable: adding a clusterSelector to the
// policy later must not change it.
//
// Not carried over: schedulingMode Divide (the whole object goes to every
// chosen cluster), replica preferences, autoMigration, reschedulePolicy and
// stickyCluster (Flotilla's scheduling is always sticky), and tolerations of
// NoExecute taints (members have NoSchedule taints only). The converter
// returns a warning for each that changes behaviour.
package kubeadmiral

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Labels and annotations fleetctl sets.
const (
	// AdoptLabel, with value AdoptValue, marks a hub object whose policy may
	// adopt it on members. fleetctl sets it on objects annotated
	// kubeadmiral.io/conflict-resolution: adopt. Flotilla's apply workers
	// ignore flotilla.dev/ keys when comparing objects.
	AdoptLabel = "flotilla.dev/conflict-resolution"
	AdoptValue = api.ConflictResolutionAdopt

	// ConvertedFromAnnotation on a placement names the policy it came from,
	// e.g. "PropagationPolicy default/nginx-pp".
	ConvertedFromAnnotation = "flotilla.dev/converted-from"

	// NamespaceLabel is matched by the rollout's selection against an
	// object's namespace rather than its labels; a selector that names it
	// may select namespaced kinds.
	NamespaceLabel = api.NamespaceSelectionLabel

	// KindsAnnotation on a policy lists extra kinds to select, comma-separated
	// as group/version/Kind, or version/Kind for the core group:
	// "monitoring.coreos.com/v1/ServiceMonitor, v1/Namespace".
	KindsAnnotation = "flotilla.dev/kinds"
)

// NamespacedKinds are the kinds a policy selects by default: the namespaced
// kinds KubeAdmiral federates out of the box.
var NamespacedKinds = []schema.GroupVersionKind{
	{Group: "apps", Version: "v1", Kind: "Deployment"},
	{Group: "apps", Version: "v1", Kind: "StatefulSet"},
	{Group: "apps", Version: "v1", Kind: "DaemonSet"},
	{Group: "batch", Version: "v1", Kind: "Job"},
	{Group: "batch", Version: "v1", Kind: "CronJob"},
	{Version: "v1", Kind: "Service"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Version: "v1", Kind: "PersistentVolumeClaim"},
	{Version: "v1", Kind: "LimitRange"},
	{Version: "v1", Kind: "ResourceQuota"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "autoscaling", Version: "v2", Kind: "HorizontalPodAutoscaler"},
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
}

// ClusterScopedKinds are added for a ClusterPropagationPolicy. Namespace is
// not among them: a placement that selects a Namespace brings everything in
// it, which is not what labelling one Namespace with a KubeAdmiral policy
// means. List v1/Namespace in KindsAnnotation to select namespaces anyway.
var ClusterScopedKinds = []schema.GroupVersionKind{
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
	{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"},
	{Group: "scheduling.k8s.io", Version: "v1", Kind: "PriorityClass"},
	{Group: "networking.k8s.io", Version: "v1", Kind: "IngressClass"},
	{Version: "v1", Kind: "PersistentVolume"},
}

// Policy is a PropagationPolicy or ClusterPropagationPolicy, reduced to what
// the conversion needs.
type Policy struct {
	// Kind is PropagationPolicy or ClusterPropagationPolicy.
	Kind      string
	Namespace string
	Name      string
	// Annotations of the policy (for KindsAnnotation).
	Annotations map[string]string
	Spec        api.PropagationPolicySpec
}

// PolicyOf returns the policy an object holds, and false when it is not one.
func PolicyOf(obj api.Object) (Policy, bool) {
	switch o := obj.(type) {
	case *api.PropagationPolicy:
		return Policy{Kind: api.PropagationPolicyKind, Namespace: o.Namespace, Name: o.Name, Annotations: o.Annotations, Spec: o.Spec}, true
	case *api.ClusterPropagationPolicy:
		return Policy{Kind: api.ClusterPropagationPolicyKind, Name: o.Name, Annotations: o.Annotations, Spec: o.Spec}, true
	}
	return Policy{}, false
}

// String names the policy: "PropagationPolicy default/nginx-pp".
func (p Policy) String() string {
	if p.Kind == api.ClusterPropagationPolicyKind {
		return p.Kind + " " + p.Name
	}
	return p.Kind + " " + p.Namespace + "/" + p.Name
}

// LabelKey is the label hub objects carry to use this policy.
func (p Policy) LabelKey() string {
	if p.Kind == api.ClusterPropagationPolicyKind {
		return api.ClusterPropagationPolicyNameLabel
	}
	return api.PropagationPolicyNameLabel
}

// PlacementNames returns the names of the two placements of a policy: the
// one that never takes over and the one that adopts.
func (p Policy) PlacementNames() (keep, adopt string) {
	prefix, rest := "pp", p.Namespace+"."+p.Name
	if p.Kind == api.ClusterPropagationPolicyKind {
		prefix, rest = "cpp", p.Name
	}
	return fitName(prefix + "." + rest), fitName(prefix + "-adopt." + rest)
}

// maxName is the longest placement name the API accepts.
const maxName = 63

// fitName shortens a name that is too long, keeping it unique with a hash of
// the full name.
func fitName(name string) string {
	if len(name) <= maxName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	head := strings.TrimRight(name[:maxName-len(suffix)], ".-")
	return head + suffix
}

// Kinds returns the kinds the policy's placements select: the defaults and
// those listed in KindsAnnotation. Malformed entries of the annotation are
// errors at its path.
func (p Policy) Kinds() ([]schema.GroupVersionKind, api.ErrorList) {
	kinds := slices.Clone(NamespacedKinds)
	if p.Kind == api.ClusterPropagationPolicyKind {
		kinds = append(kinds, ClusterScopedKinds...)
	}
	var errs api.ErrorList
	path := field.NewPath("metadata", "annotations").Key(KindsAnnotation).String()
	for entry := range strings.SplitSeq(p.Annotations[KindsAnnotation], ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		gvk, ok := parseKind(entry)
		if !ok {
			errs = append(errs, &api.FieldError{Type: api.ErrorTypeInvalid, Field: path,
				Detail: fmt.Sprintf("%q is not group/version/Kind or version/Kind (for example apps/v1/Deployment or v1/Namespace)", entry)})
			continue
		}
		if !slices.Contains(kinds, gvk) {
			kinds = append(kinds, gvk)
		}
	}
	return kinds, errs
}

func parseKind(s string) (schema.GroupVersionKind, bool) {
	parts := strings.Split(s, "/")
	for _, part := range parts {
		if part == "" {
			return schema.GroupVersionKind{}, false
		}
	}
	switch len(parts) {
	case 2:
		return schema.GroupVersionKind{Version: parts[0], Kind: parts[1]}, true
	case 3:
		return schema.GroupVersionKind{Group: parts[0], Version: parts[1], Kind: parts[2]}, true
	}
	return schema.GroupVersionKind{}, false
}

// Conversion is the outcome of converting one policy.
type Conversion struct {
	// Keep selects the policy's objects without AdoptLabel and never takes over.
	Keep *api.ClusterResourcePlacement
	// Adopt selects the policy's objects with AdoptLabel and adopts them.
	Adopt *api.ClusterResourcePlacement
	// Warnings name the parts of the policy Flotilla does not carry out.
	Warnings []string
}

// Placements returns Keep and Adopt.
func (c Conversion) Placements() []*api.ClusterResourcePlacement {
	return []*api.ClusterResourcePlacement{c.Keep, c.Adopt}
}

// Convert maps a policy onto its two placements, defaulted and validated.
// Parts of the policy that cannot be expressed are errors at their field path
// in the policy.
func Convert(p Policy) (Conversion, api.ErrorList) {
	var conv Conversion
	kinds, errs := p.Kinds()
	if len(p.Name) > maxName {
		errs = append(errs, &api.FieldError{Type: api.ErrorTypeInvalid, Field: "metadata.name",
			Detail: fmt.Sprintf("must be at most %d characters to be the value of the label %s that selects the policy's objects, not %d", maxName, p.LabelKey(), len(p.Name))})
	}
	policy, warnings, perrs := placementPolicy(&p.Spec, field.NewPath("spec"))
	errs = append(errs, perrs...)
	conv.Warnings = warnings
	if len(errs) > 0 {
		return conv, errs
	}
	keep, adopt := p.PlacementNames()
	conv.Keep = placement(p, keep, policy, kinds, false)
	// A second, identical policy: each placement owns its own (defaulting
	// writes into it).
	policy, _, _ = placementPolicy(&p.Spec, field.NewPath("spec"))
	conv.Adopt = placement(p, adopt, policy, kinds, true)
	for _, crp := range conv.Placements() {
		// Not expected: valid policies convert into valid placements. Say
		// which generated field broke, once per placement.
		if verrs := api.ValidatePlacement(crp); len(verrs) > 0 {
			errs = append(errs, &api.FieldError{Type: verrs[0].Type, Field: "spec",
				Detail: fmt.Sprintf("cannot be converted: placement %s would be invalid: %s (and %d more problem(s))", crp.Name, verrs[0].Error(), len(verrs)-1)})
		}
	}
	return conv, errs
}

func placement(p Policy, name string, policy *api.PlacementPolicy, kinds []schema.GroupVersionKind, adopt bool) *api.ClusterResourcePlacement {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{p.LabelKey(): p.Name}}
	if p.Kind == api.ClusterPropagationPolicyKind {
		sel.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: NamespaceLabel, Operator: metav1.LabelSelectorOpExists}}
	} else {
		sel.MatchLabels[NamespaceLabel] = p.Namespace
	}
	takeOver := api.WhenToTakeOverTypeNever
	if adopt {
		sel.MatchLabels[AdoptLabel] = AdoptValue
		takeOver = api.WhenToTakeOverTypeAlways
	} else {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: AdoptLabel, Operator: metav1.LabelSelectorOpDoesNotExist})
	}
	selectors := make([]api.ClusterResourceSelector, 0, len(kinds))
	for _, k := range kinds {
		selectors = append(selectors, api.ClusterResourceSelector{Group: k.Group, Version: k.Version, Kind: k.Kind, LabelSelector: sel.DeepCopy()})
	}
	crp := &api.ClusterResourcePlacement{
		TypeMeta: metav1.TypeMeta{APIVersion: api.PlacementGroupVersion.String(), Kind: api.ClusterResourcePlacementKind},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{ConvertedFromAnnotation: p.String()},
		},
		Spec: api.PlacementSpec{
			ResourceSelectors: selectors,
			Policy:            policy,
			Strategy: api.RolloutStrategy{
				ApplyStrategy: &api.ApplyStrategy{WhenToTakeOver: takeOver},
			},
		},
	}
	api.SetDefaults(crp)
	return crp
}

// placementPolicy maps the policy's cluster choice.
func placementPolicy(s *api.PropagationPolicySpec, path *field.Path) (*api.PlacementPolicy, []string, api.ErrorList) {
	var warnings []string
	var errs api.ErrorList

	if s.SchedulingMode == api.SchedulingModeDivide {
		warnings = append(warnings, "schedulingMode Divide: Flotilla places the whole object on every chosen cluster; replicas are not divided between clusters")
	}
	if s.AutoMigration != nil {
		warnings = append(warnings, "autoMigration is not supported and is ignored")
	}
	if rp := s.ReschedulePolicy; rp != nil && rp.DisableRescheduling {
		warnings = append(warnings, "reschedulePolicy.disableRescheduling is ignored: Flotilla keeps clusters that satisfy the policy and reschedules only when the policy or the clusters change")
	}

	// Requirements every term carries: the cluster list and clusterSelector.
	var base []metav1.LabelSelectorRequirement
	if len(s.Placements) > 0 {
		names := make([]string, 0, len(s.Placements))
		for _, pl := range s.Placements {
			names = append(names, pl.Cluster)
		}
		base = append(base, metav1.LabelSelectorRequirement{Key: api.MemberNameLabel, Operator: metav1.LabelSelectorOpIn, Values: names})
	}
	var matchLabels map[string]string
	if len(s.ClusterSelector) > 0 {
		matchLabels = s.ClusterSelector
	}

	var terms []api.ClusterSelectorTerm
	for i, t := range s.ClusterAffinity {
		tp := path.Child("clusterAffinity").Index(i)
		var reqs []metav1.LabelSelectorRequirement
		for j, r := range t.MatchExpressions {
			req, err := requirement(r, false, tp.Child("matchExpressions").Index(j))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			reqs = append(reqs, req)
		}
		for j, r := range t.MatchFields {
			req, err := requirement(r, true, tp.Child("matchFields").Index(j))
			if err != nil {
				errs = append(errs, err)
				continue
			}
			reqs = append(reqs, req)
		}
		terms = append(terms, selectorTerm(matchLabels, append(slices.Clone(base), reqs...)))
	}
	if len(terms) == 0 && (len(base) > 0 || matchLabels != nil) {
		terms = append(terms, selectorTerm(matchLabels, base))
	}

	policy := &api.PlacementPolicy{PlacementType: api.PickAllPlacementType}
	if s.MaxClusters != nil {
		n := int32(min(*s.MaxClusters, int64(api.MaxClusterNames)))
		policy.PlacementType, policy.NumberOfClusters = api.PickNPlacementType, &n
	}
	if len(terms) > 0 {
		policy.Affinity = &api.Affinity{ClusterAffinity: &api.ClusterAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &api.ClusterSelector{ClusterSelectorTerms: terms},
		}}
	}
	if policy.PlacementType == api.PickNPlacementType {
		for _, pl := range s.Placements {
			if pl.Preferences.Weight == nil || *pl.Preferences.Weight == 0 {
				continue
			}
			if policy.Affinity == nil {
				policy.Affinity = &api.Affinity{ClusterAffinity: &api.ClusterAffinity{}}
			}
			ca := policy.Affinity.ClusterAffinity
			ca.PreferredDuringSchedulingIgnoredDuringExecution = append(ca.PreferredDuringSchedulingIgnoredDuringExecution,
				api.PreferredClusterSelector{
					Weight: int32(min(*pl.Preferences.Weight, int64(api.MaxPreferenceWeight))),
					Preference: api.ClusterSelectorTerm{LabelSelector: &metav1.LabelSelector{
						MatchLabels: map[string]string{api.MemberNameLabel: pl.Cluster},
					}},
				})
		}
	}

	for i, t := range s.Tolerations {
		switch t.Effect {
		case "", string(api.TaintEffectNoSchedule):
			policy.Tolerations = append(policy.Tolerations, api.Toleration{
				Key: t.Key, Operator: t.Operator, Value: t.Value, Effect: api.TaintEffect(t.Effect),
			})
		default:
			warnings = append(warnings, fmt.Sprintf("%s: effect %s is ignored: member clusters have NoSchedule taints only",
				path.Child("tolerations").Index(i), t.Effect))
		}
	}
	return policy, warnings, errs
}

func selectorTerm(matchLabels map[string]string, reqs []metav1.LabelSelectorRequirement) api.ClusterSelectorTerm {
	sel := &metav1.LabelSelector{MatchExpressions: reqs}
	if len(matchLabels) > 0 {
		sel.MatchLabels = make(map[string]string, len(matchLabels))
		for k, v := range matchLabels {
			sel.MatchLabels[k] = v
		}
	}
	return api.ClusterSelectorTerm{LabelSelector: sel}
}

// requirement maps a KubeAdmiral cluster requirement onto a label selector
// requirement. Fields: only metadata.name, through the member-name label.
func requirement(r api.PropagationClusterSelectorRequirement, isField bool, path *field.Path) (metav1.LabelSelectorRequirement, *api.FieldError) {
	key := r.Key
	if isField {
		if key != "metadata.name" {
			return metav1.LabelSelectorRequirement{}, &api.FieldError{Type: api.ErrorTypeNotSupported, Field: path.Child("key").String(),
				Detail: fmt.Sprintf("%q is not supported: Flotilla matches the cluster field metadata.name only; use matchExpressions on cluster labels", key)}
		}
		key = api.MemberNameLabel
	}
	var op metav1.LabelSelectorOperator
	switch r.Operator {
	case api.PropagationClusterSelectorOpIn:
		op = metav1.LabelSelectorOpIn
	case api.PropagationClusterSelectorOpNotIn:
		op = metav1.LabelSelectorOpNotIn
	case api.PropagationClusterSelectorOpExists:
		op = metav1.LabelSelectorOpExists
	case api.PropagationClusterSelectorOpDoesNotExist:
		op = metav1.LabelSelectorOpDoesNotExist
	default:
		return metav1.LabelSelectorRequirement{}, &api.FieldError{Type: api.ErrorTypeNotSupported, Field: path.Child("operator").String(),
			Detail: fmt.Sprintf("%q is not supported: Flotilla compares cluster labels with In, NotIn, Exists and DoesNotExist; compare numeric cluster properties with a ClusterResourcePlacement's propertySelector instead", r.Operator)}
	}
	var values []string
	if len(r.Values) > 0 {
		values = slices.Clone(r.Values)
	}
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}, nil
}
