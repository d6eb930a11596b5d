package api

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ResourcePlacementKind is the namespaced twin of ClusterResourcePlacement:
// the same spec and status, for the resources of its own namespace. Flotilla
// reads it into a ClusterResourcePlacement value with this kind and a
// namespace, and runs it through the same engine under its placement key.
const ResourcePlacementKind = "ResourcePlacement"

// placementKeySeparator joins a ResourcePlacement's namespace and name into
// its placement key. No Kubernetes name contains "..", so a key never
// collides with a ClusterResourcePlacement's name; it survives every place a
// placement name goes (a NATS subject token spells it "__", a label name may
// hold it, PostgreSQL takes any text).
const placementKeySeparator = ".."

// PlacementKey is the name under which the services know a placement: a
// ClusterResourcePlacement's name, or namespace..name for a ResourcePlacement.
func PlacementKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + placementKeySeparator + name
}

// SplitPlacementKey reverses PlacementKey: the namespace is empty for a
// ClusterResourcePlacement.
func SplitPlacementKey(key string) (namespace, name string) {
	if ns, n, ok := strings.Cut(key, placementKeySeparator); ok {
		return ns, n
	}
	return "", key
}

// IsResourcePlacement reports whether crp holds a namespaced ResourcePlacement,
// as the user wrote it (by its kind) or as the services carry it (by its key).
func (crp *ClusterResourcePlacement) IsResourcePlacement() bool {
	if crp.Kind == ResourcePlacementKind {
		return true
	}
	ns, _ := SplitPlacementKey(crp.Name)
	return ns != ""
}

// InternalPlacement is the placement as the services carry it: a
// ResourcePlacement's name becomes its placement key. A
// ClusterResourcePlacement is returned as it is.
func InternalPlacement(crp *ClusterResourcePlacement) *ClusterResourcePlacement {
	if crp.Kind != ResourcePlacementKind || crp.Namespace == "" {
		return crp
	}
	if ns, _ := SplitPlacementKey(crp.Name); ns != "" {
		return crp // already internal
	}
	out := *crp
	out.Name = PlacementKey(crp.Namespace, crp.Name)
	return &out
}

// ExternalPlacement is the placement as the user sees it: a ResourcePlacement
// gets back its kind, namespace and name, and its placement-level conditions
// the ResourcePlacement names (ResourcePlacementApplied for
// ClusterResourcePlacementApplied). A ClusterResourcePlacement is returned as
// it is.
func ExternalPlacement(crp *ClusterResourcePlacement) *ClusterResourcePlacement {
	ns, name := SplitPlacementKey(crp.Name)
	if ns == "" {
		return crp
	}
	out := *crp
	out.Kind = ResourcePlacementKind
	if out.APIVersion == "" {
		out.APIVersion = PlacementGroupVersion.String()
	}
	out.Namespace, out.Name = ns, name
	if len(crp.Status.Conditions) > 0 {
		out.Status.Conditions = append(crp.Status.Conditions[:0:0], crp.Status.Conditions...)
		for i := range out.Status.Conditions {
			out.Status.Conditions[i].Type = ResourcePlacementConditionType(out.Status.Conditions[i].Type)
		}
	}
	return &out
}

// ResourcePlacementConditionType names a placement-level condition type as a
// ResourcePlacement carries it: ClusterResourcePlacementApplied becomes
// ResourcePlacementApplied. Other types are returned as they are.
func ResourcePlacementConditionType(t string) string {
	if rest, ok := strings.CutPrefix(t, "Cluster"+ResourcePlacementKind); ok {
		return ResourcePlacementKind + rest
	}
	return t
}

// validateResourcePlacement checks what differs for a ResourcePlacement: it
// lives in a namespace and selects namespaced resources of that namespace
// only, never a Namespace (upstream's rules). name is its own name (the key
// without its namespace when crp is in its internal form).
func validateResourcePlacement(p *problems, crp *ClusterResourcePlacement) (name string) {
	name = crp.Name
	if crp.Namespace == "" {
		p.add(ErrorTypeRequired, field.NewPath("metadata", "namespace"),
			"is required: a ResourcePlacement is namespaced and selects resources of its own namespace")
		return name
	}
	if msgs := content.IsDNS1123Label(crp.Namespace); len(msgs) > 0 {
		p.add(ErrorTypeInvalid, field.NewPath("metadata", "namespace"), "%q is not a valid namespace: %s", crp.Namespace, strings.Join(msgs, "; "))
	}
	if ns, n := SplitPlacementKey(name); ns != "" {
		if ns != crp.Namespace {
			p.add(ErrorTypeInvalid, field.NewPath("metadata", "name"), "%q is not a name in namespace %q", name, crp.Namespace)
		}
		name = n
	}
	path := field.NewPath("spec", "resourceSelectors")
	for i, s := range crp.Spec.ResourceSelectors {
		if s.IsNamespace() {
			p.add(ErrorTypeForbidden, path.Index(i).Child("kind"),
				"a ResourcePlacement cannot select Namespaces: it places resources of its own namespace %q, which must exist on the clusters (place it with a ClusterResourcePlacement, selectionScope: NamespaceOnly)", crp.Namespace)
		}
		if s.SelectionScope != "" {
			p.add(ErrorTypeForbidden, path.Index(i).Child("selectionScope"), "applies to Namespace selectors, which a ResourcePlacement does not have")
		}
	}
	return name
}
