package api

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// OverrideKey names an override: its kind (ClusterResourceOverrideKind or
// ResourceOverrideKind), its namespace ("" for a ClusterResourceOverride) and
// its name.
type OverrideKey struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func (k OverrideKey) String() string {
	if k.Namespace == "" {
		return k.Kind + " " + k.Name
	}
	return k.Kind + " " + k.Namespace + "/" + k.Name
}

// Override is what the services need of a ClusterResourceOverride or a
// ResourceOverride: who it is, which placement it is for, what it selects and
// its rules. OverrideOf reads it from either kind.
type Override struct {
	Key OverrideKey `json:"key"`
	// Placement is the placement the override is for; nil for every placement.
	Placement *PlacementRef `json:"placement,omitempty"`
	// Targets are the objects the override selects, by group, version, kind
	// and name, with the override's namespace for a ResourceOverride. A
	// ClusterResourceOverride's Namespace target stands for everything in it.
	Targets []ResourceIdentifier `json:"targets"`
	// Rules are the override's rules, defaulted.
	Rules []OverrideRule `json:"rules"`
}

// OverrideOf reads the Override of a ClusterResourceOverride or a
// ResourceOverride (defaulting a copy of its rules); false for any other object.
func OverrideOf(obj Object) (Override, bool) {
	var (
		o      Override
		ref    *PlacementRef
		policy *OverridePolicy
	)
	switch v := obj.(type) {
	case *ClusterResourceOverride:
		o.Key = OverrideKey{Kind: ClusterResourceOverrideKind, Name: v.Name}
		ref, policy = v.Spec.Placement, v.Spec.Policy
		for _, s := range v.Spec.ClusterResourceSelectors {
			o.Targets = append(o.Targets, ResourceIdentifier{Group: s.Group, Version: s.Version, Kind: s.Kind, Name: s.Name})
		}
	case *ResourceOverride:
		o.Key = OverrideKey{Kind: ResourceOverrideKind, Namespace: v.Namespace, Name: v.Name}
		ref, policy = v.Spec.Placement, v.Spec.Policy
		for _, s := range v.Spec.ResourceSelectors {
			o.Targets = append(o.Targets, ResourceIdentifier{Group: s.Group, Version: s.Version, Kind: s.Kind, Namespace: v.Namespace, Name: s.Name})
		}
	default:
		return Override{}, false
	}
	if ref != nil {
		r := *ref
		o.Placement = &r
	}
	if policy != nil {
		p := OverridePolicy{OverrideRules: slices.Clone(policy.OverrideRules)}
		SetOverrideDefaults(o.Placement, &p)
		o.Rules = p.OverrideRules
	}
	SetOverrideDefaults(o.Placement, nil)
	return o, true
}

// ForPlacement reports whether the override concerns the placement whose key
// is placement (see PlacementKey): it names that placement, or none.
func (o Override) ForPlacement(placement string) bool {
	return o.Placement == nil || o.PlacementKey() == placement
}

// PlacementKey is the key of the placement the override names: a
// ClusterResourcePlacement (scope Cluster), or a ResourcePlacement of the
// override's own namespace (scope Namespaced). "" when it names none.
func (o Override) PlacementKey() string {
	switch {
	case o.Placement == nil:
		return ""
	case o.Placement.Scope == NamespaceScoped:
		return PlacementKey(o.Key.Namespace, o.Placement.Name)
	}
	return o.Placement.Name
}

// ValidateOverrideUpdate checks the rule that relates an override to its
// previous version, as upstream's API does: its placement is immutable.
func ValidateOverrideUpdate(old, new Override) ErrorList {
	var p problems
	if !reflect.DeepEqual(old.Placement, new.Placement) {
		p.add(ErrorTypeImmutable, field.NewPath("spec", "placement"), "The placement field is immutable (from %s to %s); delete the override and create it again to name another placement",
			describeRef(old.Placement), describeRef(new.Placement))
	}
	return p.list
}

func describeRef(r *PlacementRef) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("%s %q", r.Scope, r.Name)
}

// targetKey identifies the object a selector selects, whatever the version it
// is selected at: two selectors differing only in version select one object.
func targetKey(id ResourceIdentifier) string {
	return id.Group + "/" + id.Kind + "/" + id.Namespace + "/" + id.Name
}

// OverrideConflicts checks the rule of upstream's webhook that an object is
// selected by one override of each kind at most: it reports each selector of o
// that selects an object another override of o's kind in live already selects,
// naming both overrides. live may hold o itself (its former version, by key),
// which is skipped, and overrides of the other kind, which may select the same
// objects (the ResourceOverride wins).
func OverrideConflicts(o Override, live []Override) ErrorList {
	owner := map[string]OverrideKey{}
	for _, l := range live {
		if l.Key == o.Key || l.Key.Kind != o.Key.Kind {
			continue
		}
		for _, t := range l.Targets {
			k := targetKey(t)
			if prev, taken := owner[k]; !taken || l.Key.Name < prev.Name {
				owner[k] = l.Key
			}
		}
	}
	selectors := "clusterResourceSelectors"
	if o.Key.Kind == ResourceOverrideKind {
		selectors = "resourceSelectors"
	}
	var p problems
	for i, t := range o.Targets {
		other, taken := owner[targetKey(t)]
		if !taken {
			continue
		}
		p.add(ErrorTypeForbidden, field.NewPath("spec", selectors).Index(i),
			"selects %s, which %s %q already selects: an object may be selected by one %s only (the resource has been selected by both %s and %s, which is not supported)",
			describeTarget(t), other.Kind, other.Name, o.Key.Kind, o.Key.Name, other.Name)
	}
	return p.list
}

// describeTarget names a selected object: `ClusterRole secret-reader (rbac.authorization.k8s.io/v1)`.
func describeTarget(t ResourceIdentifier) string {
	gv := t.Version
	if t.Group != "" {
		gv = t.Group + "/" + t.Version
	}
	name := t.Name
	if t.Namespace != "" {
		name = t.Namespace + "/" + t.Name
	}
	return fmt.Sprintf("%s %s (%s)", t.Kind, name, gv)
}

// SortOverrides orders overrides as they apply: ClusterResourceOverrides before
// ResourceOverrides (so that a ResourceOverride wins), each by namespace and name.
func SortOverrides(os []Override) {
	slices.SortFunc(os, func(a, b Override) int {
		if a.Key.Kind != b.Key.Kind {
			if a.Key.Kind == ClusterResourceOverrideKind {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Key.Namespace+"/"+a.Key.Name, b.Key.Namespace+"/"+b.Key.Name)
	})
}
