package api

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits from the upstream API.
const (
	MaxResourceSelectors    = 100
	MaxClusterNames         = 100
	MaxTolerations          = 100
	MaxClusterSelectorTerms = 10
	MinPreferenceWeight     = -100
	MaxPreferenceWeight     = 100
	MinRevisionHistoryLimit = 1
	MaxRevisionHistoryLimit = 1000
)

// ValidatePlacement checks a ClusterResourcePlacement against every rule of the
// Fleet contract and returns all problems at once.
func ValidatePlacement(crp *ClusterResourcePlacement) ErrorList {
	var p problems
	name := crp.Name
	if crp.IsResourcePlacement() {
		name = validateResourcePlacement(&p, crp)
	} else {
		validateClusterScoped(&p, ClusterResourcePlacementKind, crp.Namespace)
	}
	validateName(&p, name, field.NewPath("metadata", "name"))

	spec := field.NewPath("spec")
	validateResourceSelectors(&p, crp.Spec.ResourceSelectors, spec.Child("resourceSelectors"))
	if crp.Spec.Policy != nil {
		validatePolicy(&p, crp.Spec.Policy, spec.Child("policy"))
	}
	validateStrategy(&p, &crp.Spec.Strategy, spec.Child("strategy"))
	if l := crp.Spec.RevisionHistoryLimit; l != nil && (*l < MinRevisionHistoryLimit || *l > MaxRevisionHistoryLimit) {
		p.add(ErrorTypeInvalid, spec.Child("revisionHistoryLimit"), "must be between %d and %d, not %d", MinRevisionHistoryLimit, MaxRevisionHistoryLimit, *l)
	}
	_, failover := Failover(crp)
	p.list = append(p.list, failover...)
	return withPlaceholders(p.list, crp.Placeholders)
}

// ValidatePlacementUpdate checks the rules that relate a placement to its
// previous version: the placement type is immutable (no policy means PickAll),
// and tolerations can only be added.
func ValidatePlacementUpdate(old, new *ClusterResourcePlacement) ErrorList {
	var p problems
	if o, n := old.Spec.EffectivePlacementType(), new.Spec.EffectivePlacementType(); o != n {
		p.add(ErrorTypeImmutable, field.NewPath("spec", "policy", "placementType"),
			"cannot change from %s to %s; delete the placement and create it again to change its type", o, n)
	}
	kept := map[Toleration]bool{}
	for _, t := range new.Spec.Tolerations() {
		kept[normalToleration(t)] = true
	}
	for i, t := range old.Spec.Tolerations() {
		if !kept[normalToleration(t)] {
			p.add(ErrorTypeImmutable, field.NewPath("spec", "policy", "tolerations"),
				"tolerations can be added but not changed or removed; the former tolerations[%d] %s is missing", i, describeToleration(t))
		}
	}
	return p.list
}

// normalToleration makes a toleration comparable before and after defaulting.
func normalToleration(t Toleration) Toleration {
	if t.Operator == "" {
		t.Operator = TolerationOpEqual
	}
	return t
}

func describeToleration(t Toleration) string {
	s := fmt.Sprintf("{key: %q, operator: %s", t.Key, normalToleration(t).Operator)
	if t.Value != "" {
		s += fmt.Sprintf(", value: %q", t.Value)
	}
	if t.Effect != "" {
		s += fmt.Sprintf(", effect: %s", t.Effect)
	}
	return s + "}"
}

func validateResourceSelectors(p *problems, selectors []ClusterResourceSelector, path *field.Path) {
	switch {
	case len(selectors) == 0:
		p.add(ErrorTypeRequired, path, "at least one resource selector is required")
	case len(selectors) > MaxResourceSelectors:
		p.add(ErrorTypeTooMany, path, "at most %d resource selectors are allowed, not %d", MaxResourceSelectors, len(selectors))
	}
	for i, s := range selectors {
		sp := path.Index(i)
		if s.Version == "" {
			p.add(ErrorTypeRequired, sp.Child("version"), "is required")
		}
		if s.Kind == "" {
			p.add(ErrorTypeRequired, sp.Child("kind"), "is required")
		}
		if s.Name != "" && s.LabelSelector != nil {
			p.add(ErrorTypeForbidden, sp, "set either name or labelSelector, not both")
		}
		validateLabelSelector(p, s.LabelSelector, sp.Child("labelSelector"))
		if s.SelectionScope != "" && !isEnumValue(s.SelectionScope) {
			p.add(ErrorTypeNotSupported, sp.Child("selectionScope"), "%q is not supported; use %s", s.SelectionScope, enumList[SelectionScope]())
		}
	}
	validateSelectionScopes(p, selectors, path)
}

// validateSelectionScopes applies upstream's rules of NamespaceWithResourceSelectors:
// one such Namespace selector at most, selecting by name, and no other Namespace
// selector beside it.
func validateSelectionScopes(p *problems, selectors []ClusterResourceSelector, path *field.Path) {
	namespaces, scoped := 0, -1
	for i, s := range selectors {
		if !s.IsNamespace() || s.Version != "v1" {
			continue
		}
		namespaces++
		if s.SelectionScope != NamespaceWithResourceSelectors {
			continue
		}
		sp := path.Index(i).Child("selectionScope")
		if scoped >= 0 {
			p.add(ErrorTypeForbidden, sp, "only one namespace selector with NamespaceWithResourceSelectors mode is allowed (resourceSelectors[%d] has it)", scoped)
			continue
		}
		scoped = i
		if s.Name == "" || s.LabelSelector != nil {
			p.add(ErrorTypeForbidden, sp, "namespace selector with NamespaceWithResourceSelectors mode must select by name (not by label)")
		}
	}
	if scoped >= 0 && namespaces > 1 {
		p.add(ErrorTypeForbidden, path.Index(scoped).Child("selectionScope"),
			"when using NamespaceWithResourceSelectors mode, only one namespace selector is allowed (cannot mix with other namespace selectors)")
	}
}

func validateLabelSelector(p *problems, sel *metav1.LabelSelector, path *field.Path) {
	if sel == nil {
		return
	}
	p.addField(metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, path))
}

func validatePolicy(p *problems, policy *PlacementPolicy, path *field.Path) {
	typ := policy.PlacementType
	if typ == "" {
		typ = PickAllPlacementType
	}
	if !isEnumValue(typ) {
		p.add(ErrorTypeNotSupported, path.Child("placementType"), "%q is not supported; use %s", policy.PlacementType, enumList[PlacementType]())
		// Without a known type the type-specific rules cannot be applied.
		return
	}

	names := path.Child("clusterNames")
	if typ == PickFixedPlacementType {
		validateClusterNames(p, policy.ClusterNames, names)
	} else if len(policy.ClusterNames) > 0 {
		p.add(ErrorTypeForbidden, names, "is only allowed when placementType is PickFixed")
	}

	n := path.Child("numberOfClusters")
	switch {
	case typ == PickNPlacementType && policy.NumberOfClusters == nil:
		p.add(ErrorTypeRequired, n, "required when placementType is PickN")
	case typ == PickNPlacementType && *policy.NumberOfClusters < 0:
		p.add(ErrorTypeInvalid, n, "must be 0 or more, not %d", *policy.NumberOfClusters)
	case typ != PickNPlacementType && policy.NumberOfClusters != nil:
		p.add(ErrorTypeForbidden, n, "is only allowed when placementType is PickN")
	}

	if policy.Affinity != nil {
		if typ == PickFixedPlacementType {
			p.add(ErrorTypeForbidden, path.Child("affinity"), "is not allowed when placementType is PickFixed; the clusters are the ones in clusterNames")
		} else if policy.Affinity.ClusterAffinity != nil {
			validateClusterAffinity(p, policy.Affinity.ClusterAffinity, path.Child("affinity", "clusterAffinity"))
		}
	}

	tsc := path.Child("topologySpreadConstraints")
	if typ != PickNPlacementType && len(policy.TopologySpreadConstraints) > 0 {
		p.add(ErrorTypeForbidden, tsc, "are only allowed when placementType is PickN")
	} else {
		for i, c := range policy.TopologySpreadConstraints {
			validateTopologySpreadConstraint(p, c, tsc.Index(i))
		}
	}

	tol := path.Child("tolerations")
	if typ == PickFixedPlacementType && len(policy.Tolerations) > 0 {
		p.add(ErrorTypeForbidden, tol, "are not allowed when placementType is PickFixed, which places on the named clusters whatever their taints")
	} else {
		validateTolerations(p, policy.Tolerations, tol)
	}
}

func validateClusterNames(p *problems, names []string, path *field.Path) {
	switch {
	case len(names) == 0:
		p.add(ErrorTypeRequired, path, "must name at least one cluster when placementType is PickFixed")
	case len(names) > MaxClusterNames:
		p.add(ErrorTypeTooMany, path, "at most %d cluster names are allowed, not %d", MaxClusterNames, len(names))
	}
	first := map[string]int{}
	for i, name := range names {
		np := path.Index(i)
		if j, dup := first[name]; dup {
			p.add(ErrorTypeDuplicate, np, "%q is already listed at clusterNames[%d]", name, j)
			continue
		}
		first[name] = i
		validateName(p, name, np)
	}
}

func validateClusterAffinity(p *problems, a *ClusterAffinity, path *field.Path) {
	if req := a.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
		terms := path.Child("requiredDuringSchedulingIgnoredDuringExecution", "clusterSelectorTerms")
		if len(req.ClusterSelectorTerms) > MaxClusterSelectorTerms {
			p.add(ErrorTypeTooMany, terms, "at most %d terms are allowed, not %d", MaxClusterSelectorTerms, len(req.ClusterSelectorTerms))
		}
		for i, term := range req.ClusterSelectorTerms {
			tp := terms.Index(i)
			validateLabelSelector(p, term.LabelSelector, tp.Child("labelSelector"))
			if term.PropertySelector != nil {
				validatePropertySelector(p, term.PropertySelector, tp.Child("propertySelector"))
			}
			if term.PropertySorter != nil {
				p.add(ErrorTypeForbidden, tp.Child("propertySorter"), "is only allowed in preferredDuringSchedulingIgnoredDuringExecution terms")
			}
		}
	}
	// Preferred terms are ignored for PickAll but still checked: a mistake there
	// becomes a surprise when the type is PickN.
	for i, pref := range a.PreferredDuringSchedulingIgnoredDuringExecution {
		pp := path.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		if pref.Weight < MinPreferenceWeight || pref.Weight > MaxPreferenceWeight {
			p.add(ErrorTypeInvalid, pp.Child("weight"), "must be between %d and %d, not %d", MinPreferenceWeight, MaxPreferenceWeight, pref.Weight)
		}
		term := pref.Preference
		tp := pp.Child("preference")
		validateLabelSelector(p, term.LabelSelector, tp.Child("labelSelector"))
		if term.PropertySelector != nil {
			p.add(ErrorTypeForbidden, tp.Child("propertySelector"), "is only allowed in requiredDuringSchedulingIgnoredDuringExecution terms; use propertySorter to prefer clusters by a property")
		}
		if s := term.PropertySorter; s != nil {
			validatePropertyName(p, s.Name, tp.Child("propertySorter", "name"))
			if !isEnumValue(s.SortOrder) {
				p.add(ErrorTypeNotSupported, tp.Child("propertySorter", "sortOrder"), "%q is not supported; use %s", s.SortOrder, enumList[PropertySortOrder]())
			}
		}
	}
}

func validatePropertySelector(p *problems, s *PropertySelector, path *field.Path) {
	for i, req := range s.MatchExpressions {
		rp := path.Child("matchExpressions").Index(i)
		validatePropertyName(p, req.Name, rp.Child("name"))
		if !isEnumValue(req.Operator) {
			p.add(ErrorTypeNotSupported, rp.Child("operator"), "%q is not supported; use %s", req.Operator, enumList[PropertySelectorOperator]())
		}
		if len(req.Values) != 1 {
			p.add(ErrorTypeInvalid, rp.Child("values"), "must hold exactly one value, not %d", len(req.Values))
		}
		for j, v := range req.Values {
			if _, err := resource.ParseQuantity(v); err != nil {
				p.add(ErrorTypeInvalid, rp.Child("values").Index(j), "%q is not a Kubernetes quantity (such as 3, 500m or 16Gi)", v)
			}
		}
	}
}

// validatePropertyName checks a property name: a label-key-like name whose
// segments may be separated by slashes; a resources.kubernetes-fleet.io/ name
// must be <total|allocatable|available>-<resource>.
func validatePropertyName(p *problems, name string, path *field.Path) {
	if name == "" {
		p.add(ErrorTypeRequired, path, "is required")
		return
	}
	if rest, ok := strings.CutPrefix(name, ResourcePropertyPrefix); ok {
		capacity, _, found := strings.Cut(rest, "-")
		switch capacity {
		case TotalCapacityName, AllocatableCapacityName, AvailableCapacityName:
		default:
			found = false
		}
		if !found {
			p.add(ErrorTypeInvalid, path, "%q is not a valid resource property; use %s<total|allocatable|available>-<resource>, e.g. %s", name, ResourcePropertyPrefix, AllocatableCPUProperty)
			return
		}
	}
	segments := strings.Split(name, "/")
	if len(segments) > 1 && len(content.IsDNS1123Subdomain(segments[0])) > 0 && len(content.IsLabelKey(segments[0])) > 0 {
		p.add(ErrorTypeInvalid, path, "%q is not a valid property name: its prefix %q is not a DNS subdomain", name, segments[0])
		return
	}
	start := 0
	if len(segments) > 1 {
		start = 1
	}
	for _, seg := range segments[start:] {
		if msgs := content.IsLabelKey(seg); len(msgs) > 0 {
			p.add(ErrorTypeInvalid, path, "%q is not a valid property name: %s", name, strings.Join(msgs, "; "))
			return
		}
	}
}

func validateTopologySpreadConstraint(p *problems, c TopologySpreadConstraint, path *field.Path) {
	if c.MaxSkew != nil && *c.MaxSkew < 1 {
		p.add(ErrorTypeInvalid, path.Child("maxSkew"), "must be at least 1, not %d", *c.MaxSkew)
	}
	if c.TopologyKey == "" {
		p.add(ErrorTypeRequired, path.Child("topologyKey"), "is required")
	} else {
		validateLabelKey(p, c.TopologyKey, path.Child("topologyKey"))
	}
	if c.WhenUnsatisfiable != "" && !isEnumValue(c.WhenUnsatisfiable) {
		p.add(ErrorTypeNotSupported, path.Child("whenUnsatisfiable"), "%q is not supported; use %s", c.WhenUnsatisfiable, enumList[UnsatisfiableConstraintAction]())
	}
}

func validateTolerations(p *problems, tolerations []Toleration, path *field.Path) {
	if len(tolerations) > MaxTolerations {
		p.add(ErrorTypeTooMany, path, "at most %d tolerations are allowed, not %d", MaxTolerations, len(tolerations))
	}
	first := map[Toleration]int{}
	for i, t := range tolerations {
		tp := path.Index(i)
		if t.Key != "" {
			validateLabelKey(p, t.Key, tp.Child("key"))
		}
		switch op := normalToleration(t).Operator; op {
		case TolerationOpExists:
			if t.Value != "" {
				p.add(ErrorTypeInvalid, tp.Child("value"), "must be empty when operator is Exists")
			}
		case TolerationOpEqual:
			if t.Key == "" {
				p.add(ErrorTypeRequired, tp.Child("key"), "is required when operator is Equal")
			}
			validateLabelValue(p, t.Value, tp.Child("value"))
		default:
			p.add(ErrorTypeNotSupported, tp.Child("operator"), "%q is not supported; use %s", op, enumList[TolerationOperator]())
		}
		if t.Effect != "" && t.Effect != TaintEffectNoSchedule {
			p.add(ErrorTypeNotSupported, tp.Child("effect"), "%q is not supported; the only effect is NoSchedule (or leave it empty to match any effect)", t.Effect)
		}
		if j, dup := first[normalToleration(t)]; dup {
			p.add(ErrorTypeDuplicate, tp, "repeats tolerations[%d]", j)
			continue
		}
		first[normalToleration(t)] = i
	}
}

// intOrPercent matches what upstream's CRD allows for maxUnavailable and maxSurge.
var intOrPercent = regexp.MustCompile(`^((100|[0-9]{1,2})%|[0-9]+)$`)

func validateStrategy(p *problems, s *RolloutStrategy, path *field.Path) {
	if s.Type != "" && !isEnumValue(s.Type) {
		p.add(ErrorTypeNotSupported, path.Child("type"), "%q is not supported; use %s", s.Type, enumList[RolloutStrategyType]())
	}
	if ru := s.RollingUpdate; ru != nil {
		rp := path.Child("rollingUpdate")
		if s.Type == ExternalRolloutStrategyType {
			p.add(ErrorTypeForbidden, rp, "is not allowed when the strategy type is External")
		}
		unavailableZero := validateIntOrPercent(p, ru.MaxUnavailable, rp.Child("maxUnavailable"))
		surgeZero := validateIntOrPercent(p, ru.MaxSurge, rp.Child("maxSurge"))
		if unavailableZero && surgeZero {
			p.add(ErrorTypeInvalid, rp, "maxUnavailable and maxSurge cannot both be 0, or the rollout could never make progress")
		}
		if ru.UnavailablePeriodSeconds != nil && *ru.UnavailablePeriodSeconds < 0 {
			p.add(ErrorTypeInvalid, rp.Child("unavailablePeriodSeconds"), "must be 0 or more, not %d", *ru.UnavailablePeriodSeconds)
		}
	}
	if as := s.ApplyStrategy; as != nil {
		ap := path.Child("applyStrategy")
		if as.Type != "" && !isEnumValue(as.Type) {
			p.add(ErrorTypeNotSupported, ap.Child("type"), "%q is not supported; use %s", as.Type, enumList[ApplyStrategyType]())
		}
		if as.ComparisonOption != "" && !isEnumValue(as.ComparisonOption) {
			p.add(ErrorTypeNotSupported, ap.Child("comparisonOption"), "%q is not supported; use %s", as.ComparisonOption, enumList[ComparisonOptionType]())
		}
		if as.WhenToApply != "" && !isEnumValue(as.WhenToApply) {
			p.add(ErrorTypeNotSupported, ap.Child("whenToApply"), "%q is not supported; use %s", as.WhenToApply, enumList[WhenToApplyType]())
		}
		if as.WhenToTakeOver != "" && !isEnumValue(as.WhenToTakeOver) {
			p.add(ErrorTypeNotSupported, ap.Child("whenToTakeOver"), "%q is not supported; use %s", as.WhenToTakeOver, enumList[WhenToTakeOverType]())
		}
		if as.ServerSideApplyConfig != nil && as.Type != ApplyStrategyTypeServerSideApply {
			p.add(ErrorTypeForbidden, ap.Child("serverSideApplyConfig"), "is only allowed when type is ServerSideApply")
		}
	}
	if ds := s.DeleteStrategy; ds != nil && ds.PropagationPolicy != "" && !isEnumValue(ds.PropagationPolicy) {
		p.add(ErrorTypeNotSupported, path.Child("deleteStrategy", "propagationPolicy"), "%q is not supported; use %s", ds.PropagationPolicy, enumList[DeletePropagationPolicy]())
	}
}

// validateIntOrPercent checks maxUnavailable or maxSurge and reports whether
// the value is zero.
func validateIntOrPercent(p *problems, v *intstr.IntOrString, path *field.Path) (zero bool) {
	if v == nil {
		return false
	}
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			p.add(ErrorTypeInvalid, path, "must be 0 or more, not %d", v.IntVal)
		}
		return v.IntVal == 0
	}
	if !intOrPercent.MatchString(v.StrVal) {
		p.add(ErrorTypeInvalid, path, "%q must be a whole number of clusters (0 or more) or a percentage from 0%% to 100%%", v.StrVal)
		return false
	}
	return strings.TrimLeft(strings.TrimSuffix(v.StrVal, "%"), "0") == ""
}
