package api

import (
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxEvictionRefLength bounds an eviction's placementName and clusterName, as
// upstream's CRD does.
const maxEvictionRefLength = 255

// budgetValuePattern is upstream's rule for a percentage in a disruption budget.
var budgetValuePattern = regexp.MustCompile(`^(100|[0-9]{1,2})%$`)

// Upstream's CRD messages for the rules below.
const (
	budgetValueMessage      = "If supplied value is String should match regex '^(100|[0-9]{1,2})%$' or If supplied value is Integer must be greater than or equal to 0"
	budgetBothMessage       = "Both MaxUnavailable and MinAvailable cannot be specified"
	placementNameImmutable  = "The PlacementName field is immutable"
	clusterNameImmutable    = "The ClusterName field is immutable"
	evictionFieldMaxMessage = "must be at most %d characters, not %d"
)

// ValidateEviction checks a ClusterResourcePlacementEviction: it names a
// placement and a cluster (each at most 255 characters).
func ValidateEviction(e *ClusterResourcePlacementEviction) ErrorList {
	var p problems
	// Upstream's drain names evictions drain-eviction-<placement>-<cluster>-<suffix>: a
	// subdomain of up to 253 characters, longer than other Fleet names.
	if e.Name == "" {
		p.add(ErrorTypeRequired, field.NewPath("metadata", "name"), "is required")
	} else if msgs := content.IsDNS1123Subdomain(e.Name); len(msgs) > 0 {
		p.add(ErrorTypeInvalid, field.NewPath("metadata", "name"), "%q is not a valid name: %s", e.Name, strings.Join(msgs, "; "))
	}
	validateClusterScoped(&p, ClusterResourcePlacementEvictionKind, e.Namespace)
	spec := field.NewPath("spec")
	for _, f := range []struct {
		name, value string
	}{{"placementName", e.Spec.PlacementName}, {"clusterName", e.Spec.ClusterName}} {
		switch {
		case f.value == "":
			p.add(ErrorTypeRequired, spec.Child(f.name), "is required")
		case len(f.value) > maxEvictionRefLength:
			p.add(ErrorTypeInvalid, spec.Child(f.name), evictionFieldMaxMessage, maxEvictionRefLength, len(f.value))
		}
	}
	return withPlaceholders(p.list, e.Placeholders)
}

// ValidateEvictionUpdate checks a change of an eviction: its spec is immutable.
func ValidateEvictionUpdate(old, new *ClusterResourcePlacementEviction) ErrorList {
	var p problems
	spec := field.NewPath("spec")
	if old.Spec.PlacementName != new.Spec.PlacementName {
		p.add(ErrorTypeImmutable, spec.Child("placementName"), "%s", placementNameImmutable)
	}
	if old.Spec.ClusterName != new.Spec.ClusterName {
		p.add(ErrorTypeImmutable, spec.Child("clusterName"), "%s", clusterNameImmutable)
	}
	return p.list
}

// ValidateDisruptionBudget checks a ClusterResourcePlacementDisruptionBudget by
// upstream's CRD: at most one of maxUnavailable and minAvailable, each a number
// of at least 0 or a percentage from 0% to 100%.
func ValidateDisruptionBudget(b *ClusterResourcePlacementDisruptionBudget) ErrorList {
	var p problems
	validateName(&p, b.Name, field.NewPath("metadata", "name"))
	validateClusterScoped(&p, ClusterResourcePlacementDisruptionBudgetKind, b.Namespace)
	spec := field.NewPath("spec")
	if b.Spec.MaxUnavailable != nil && b.Spec.MinAvailable != nil {
		p.add(ErrorTypeInvalid, spec, "%s", budgetBothMessage)
	}
	validateBudgetValue(&p, b.Spec.MaxUnavailable, spec.Child("maxUnavailable"))
	validateBudgetValue(&p, b.Spec.MinAvailable, spec.Child("minAvailable"))
	return withPlaceholders(p.list, b.Placeholders)
}

func validateBudgetValue(p *problems, v *intstr.IntOrString, path *field.Path) {
	if v == nil {
		return
	}
	if v.Type == intstr.String && !budgetValuePattern.MatchString(v.StrVal) || v.Type == intstr.Int && v.IntVal < 0 {
		p.add(ErrorTypeInvalid, path, "%s", budgetValueMessage)
	}
}

// ValidateDisruptionBudgetForPlacement checks a budget against the placement
// of its name, as upstream's webhook does: a PickAll placement (or one with
// no policy) takes neither maxUnavailable nor a percentage minAvailable, as
// the number of clusters it selects is not known.
func ValidateDisruptionBudgetForPlacement(b *ClusterResourcePlacementDisruptionBudget, crp *ClusterResourcePlacement) ErrorList {
	var p problems
	if crp.Spec.Policy != nil && crp.Spec.Policy.PlacementType != PickAllPlacementType && crp.Spec.Policy.PlacementType != "" {
		return nil
	}
	spec := field.NewPath("spec")
	if b.Spec.MaxUnavailable != nil {
		p.add(ErrorTypeForbidden, spec.Child("maxUnavailable"),
			"cluster resource placement policy type PickAll is not supported with any specified max unavailable %v", b.Spec.MaxUnavailable)
	}
	if b.Spec.MinAvailable != nil && b.Spec.MinAvailable.Type == intstr.String {
		p.add(ErrorTypeForbidden, spec.Child("minAvailable"),
			"cluster resource placement policy type PickAll is not supported with min available as a percentage %v", b.Spec.MinAvailable)
	}
	return p.list
}
