package api

import (
	"maps"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidatePropagationPolicy checks a KubeAdmiral PropagationPolicy.
func ValidatePropagationPolicy(pp *PropagationPolicy) ErrorList {
	var p problems
	validateName(&p, pp.Name, field.NewPath("metadata", "name"))
	validatePropagationPolicySpec(&p, &pp.Spec, field.NewPath("spec"))
	return withPlaceholders(p.list, pp.Placeholders)
}

// ValidateClusterPropagationPolicy checks a KubeAdmiral ClusterPropagationPolicy.
func ValidateClusterPropagationPolicy(cpp *ClusterPropagationPolicy) ErrorList {
	var p problems
	validateName(&p, cpp.Name, field.NewPath("metadata", "name"))
	validateClusterScoped(&p, ClusterPropagationPolicyKind, cpp.Namespace)
	validatePropagationPolicySpec(&p, &cpp.Spec, field.NewPath("spec"))
	return withPlaceholders(p.list, cpp.Placeholders)
}

func validatePropagationPolicySpec(p *problems, s *PropagationPolicySpec, path *field.Path) {
	switch {
	case s.SchedulingMode == "":
		p.add(ErrorTypeRequired, path.Child("schedulingMode"), "is required: use %s", enumList[SchedulingMode]())
	case !isEnumValue(s.SchedulingMode):
		p.add(ErrorTypeNotSupported, path.Child("schedulingMode"), "%q is not supported; use %s", s.SchedulingMode, enumList[SchedulingMode]())
	}
	for _, k := range slices.Sorted(maps.Keys(s.ClusterSelector)) {
		validateLabelKey(p, k, path.Child("clusterSelector").Key(k))
		validateLabelValue(p, s.ClusterSelector[k], path.Child("clusterSelector").Key(k))
	}
	for i, term := range s.ClusterAffinity {
		tp := path.Child("clusterAffinity").Index(i)
		for j, r := range term.MatchExpressions {
			validateClusterSelectorRequirement(p, r, tp.Child("matchExpressions").Index(j))
		}
		for j, r := range term.MatchFields {
			validateClusterSelectorRequirement(p, r, tp.Child("matchFields").Index(j))
		}
	}
	for i, t := range s.Tolerations {
		tp := path.Child("tolerations").Index(i)
		switch op := t.Operator; op {
		case "", TolerationOpEqual:
			if t.Key == "" {
				p.add(ErrorTypeRequired, tp.Child("key"), "is required when operator is Equal")
			}
		case TolerationOpExists:
			if t.Value != "" {
				p.add(ErrorTypeInvalid, tp.Child("value"), "must be empty when operator is Exists")
			}
		default:
			p.add(ErrorTypeNotSupported, tp.Child("operator"), "%q is not supported; use %s", op, enumList[TolerationOperator]())
		}
	}
	if s.MaxClusters != nil && *s.MaxClusters < 0 {
		p.add(ErrorTypeInvalid, path.Child("maxClusters"), "must be 0 or more, not %d", *s.MaxClusters)
	}
	first := map[string]int{}
	for i, pl := range s.Placements {
		pp := path.Child("placement").Index(i)
		if j, dup := first[pl.Cluster]; dup && pl.Cluster != "" {
			p.add(ErrorTypeDuplicate, pp.Child("cluster"), "%q is already listed at placement[%d]", pl.Cluster, j)
		} else {
			first[pl.Cluster] = i
			validateName(p, pl.Cluster, pp.Child("cluster"))
		}
		prefs := pp.Child("preferences")
		if pl.Preferences.MinReplicas < 0 {
			p.add(ErrorTypeInvalid, prefs.Child("minReplicas"), "must be 0 or more, not %d", pl.Preferences.MinReplicas)
		}
		if m := pl.Preferences.MaxReplicas; m != nil && *m < pl.Preferences.MinReplicas {
			p.add(ErrorTypeInvalid, prefs.Child("maxReplicas"), "must be at least minReplicas (%d), not %d", pl.Preferences.MinReplicas, *m)
		}
		if w := pl.Preferences.Weight; w != nil && *w < 0 {
			p.add(ErrorTypeInvalid, prefs.Child("weight"), "must be 0 or more, not %d", *w)
		}
	}
}

func validateClusterSelectorRequirement(p *problems, r PropagationClusterSelectorRequirement, path *field.Path) {
	if r.Key == "" {
		p.add(ErrorTypeRequired, path.Child("key"), "is required")
	}
	switch r.Operator {
	case PropagationClusterSelectorOpIn, PropagationClusterSelectorOpNotIn:
		if len(r.Values) == 0 {
			p.add(ErrorTypeRequired, path.Child("values"), "must hold at least one value when operator is %s", r.Operator)
		}
	case PropagationClusterSelectorOpExists, PropagationClusterSelectorOpDoesNotExist:
		if len(r.Values) > 0 {
			p.add(ErrorTypeForbidden, path.Child("values"), "must be empty when operator is %s", r.Operator)
		}
	case PropagationClusterSelectorOpGt, PropagationClusterSelectorOpLt:
		if len(r.Values) != 1 {
			p.add(ErrorTypeInvalid, path.Child("values"), "must hold exactly one integer when operator is %s, not %d values", r.Operator, len(r.Values))
		} else if _, err := strconv.ParseInt(r.Values[0], 10, 64); err != nil {
			p.add(ErrorTypeInvalid, path.Child("values").Index(0), "%q is not an integer", r.Values[0])
		}
	default:
		p.add(ErrorTypeNotSupported, path.Child("operator"), "%q is not supported; use %s", r.Operator, enumList[PropagationClusterSelectorOperator]())
	}
}
