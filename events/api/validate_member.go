package api

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Member cluster limits.
const (
	MinHeartbeatPeriodSeconds = 1
	MaxHeartbeatPeriodSeconds = 600
	MaxTaints                 = 100
)

// ValidateMemberCluster checks a MemberCluster: its name, heartbeat period
// (1-600 seconds; 0 means the default) and taints (a valid key, a valid value,
// effect NoSchedule, no duplicates).
func ValidateMemberCluster(m *MemberCluster) ErrorList {
	var p problems
	validateName(&p, m.Name, field.NewPath("metadata", "name"))
	validateClusterScoped(&p, MemberClusterKind, m.Namespace)

	spec := field.NewPath("spec")
	if hb := m.Spec.HeartbeatPeriodSeconds; hb != 0 && (hb < MinHeartbeatPeriodSeconds || hb > MaxHeartbeatPeriodSeconds) {
		p.add(ErrorTypeInvalid, spec.Child("heartbeatPeriodSeconds"), "must be between %d and %d seconds, not %d", MinHeartbeatPeriodSeconds, MaxHeartbeatPeriodSeconds, hb)
	}
	taints := spec.Child("taints")
	if len(m.Spec.Taints) > MaxTaints {
		p.add(ErrorTypeTooMany, taints, "at most %d taints are allowed, not %d", MaxTaints, len(m.Spec.Taints))
	}
	first := map[Taint]int{}
	for i, t := range m.Spec.Taints {
		tp := taints.Index(i)
		if t.Key == "" {
			p.add(ErrorTypeRequired, tp.Child("key"), "is required")
		} else {
			validateLabelKey(&p, t.Key, tp.Child("key"))
		}
		if t.Value != "" {
			validateLabelValue(&p, t.Value, tp.Child("value"))
		}
		switch t.Effect {
		case TaintEffectNoSchedule:
		case "":
			p.add(ErrorTypeRequired, tp.Child("effect"), "is required; the only effect is NoSchedule")
		default:
			p.add(ErrorTypeNotSupported, tp.Child("effect"), "%q is not supported; the only effect is NoSchedule", t.Effect)
		}
		if j, dup := first[t]; dup {
			p.add(ErrorTypeDuplicate, tp, "repeats taints[%d]", j)
			continue
		}
		first[t] = i
	}
	p.list = append(p.list, ValidatePropertyValues(m.Status.Properties, field.NewPath("status", "properties"))...)
	return withPlaceholders(p.list, m.Placeholders)
}

// ValidatePropertyValues checks that every property value is a Kubernetes
// quantity, as the scheduler compares and sorts them (a member reports them in
// its status and its heartbeats).
func ValidatePropertyValues(props map[PropertyName]PropertyValue, path *field.Path) ErrorList {
	var p problems
	for _, name := range slices.Sorted(maps.Keys(props)) {
		if _, err := resource.ParseQuantity(props[name].Value); err != nil {
			p.add(ErrorTypeInvalid, path.Key(string(name)).Child("value"), "%q is not a quantity such as 12, 500m or 4Gi", props[name].Value)
		}
	}
	return p.list
}

// ValidateMemberNamespaces checks the namespaces a member reports: at most
// MaxMemberNamespaces, each a namespace name mapped to a placement key (or "").
func ValidateMemberNamespaces(namespaces map[string]string, path *field.Path) ErrorList {
	var p problems
	if len(namespaces) > MaxMemberNamespaces {
		p.add(ErrorTypeTooMany, path, "at most %d namespaces, not %d", MaxMemberNamespaces, len(namespaces))
		return p.list
	}
	for ns, owner := range namespaces {
		if msgs := content.IsDNS1123Label(ns); len(msgs) > 0 {
			p.add(ErrorTypeInvalid, path.Key(ns), "%q is not a namespace name: %s", ns, strings.Join(msgs, "; "))
		}
		if len(owner) > 2*maxNameLength+len(placementKeySeparator) {
			p.add(ErrorTypeInvalid, path.Key(ns), "the owner is %d characters, not a placement key", len(owner))
		}
	}
	return p.list
}
