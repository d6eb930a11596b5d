package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsyaml "sigs.k8s.io/yaml"
)

// IsEnvelopeConfigMap reports whether u is a ConfigMap envelope: a core/v1
// ConfigMap annotated kubernetes-fleet.io/envelope-configmap: "true".
func IsEnvelopeConfigMap(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "ConfigMap" && u.GetAnnotations()[EnvelopeConfigMapAnnotation] == "true"
}

// IsEnvelope reports whether obj wraps manifests for the members: a
// ClusterResourceEnvelope, a ResourceEnvelope or a ConfigMap envelope.
func IsEnvelope(obj Object) bool {
	switch o := obj.(type) {
	case *ClusterResourceEnvelope, *ResourceEnvelope:
		return true
	case *unstructured.Unstructured:
		return IsEnvelopeConfigMap(o)
	}
	return false
}

// EnvelopeContents returns the manifests an envelope wraps, ordered by their
// data key, and the identifier that failures of those manifests carry.
func EnvelopeContents(obj Object) ([]*unstructured.Unstructured, EnvelopeIdentifier, error) {
	var (
		id  EnvelopeIdentifier
		raw = map[string][]byte{}
	)
	switch o := obj.(type) {
	case *ClusterResourceEnvelope:
		id = EnvelopeIdentifier{Name: o.Name, Type: ClusterResourceEnvelopeType}
		for k, v := range o.Data {
			raw[k] = v.Raw
		}
	case *ResourceEnvelope:
		id = EnvelopeIdentifier{Name: o.Name, Namespace: o.Namespace, Type: ResourceEnvelopeType}
		for k, v := range o.Data {
			raw[k] = v.Raw
		}
	case *unstructured.Unstructured:
		if !IsEnvelopeConfigMap(o) {
			return nil, id, fmt.Errorf("%s %s is not an envelope", o.GetKind(), o.GetName())
		}
		id = EnvelopeIdentifier{Name: o.GetName(), Namespace: o.GetNamespace(), Type: ConfigMapEnvelopeType}
		data, _, _ := unstructured.NestedStringMap(o.Object, "data")
		for k, v := range data {
			raw[k] = []byte(v)
		}
	default:
		return nil, id, fmt.Errorf("%T is not an envelope", obj)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]*unstructured.Unstructured, 0, len(keys))
	for _, k := range keys {
		u, err := parseManifest(raw[k])
		if err != nil {
			return nil, id, fmt.Errorf("envelope %s entry %q: %w", id.Name, k, err)
		}
		out = append(out, u)
	}
	return out, id, nil
}

// parseManifest reads one wrapped manifest (JSON or YAML) and checks that it
// identifies an object.
func parseManifest(data []byte) (*unstructured.Unstructured, error) {
	j, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not a manifest: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil || m == nil {
		return nil, fmt.Errorf("not a manifest: it must be an object with apiVersion, kind and metadata.name")
	}
	u := &unstructured.Unstructured{Object: m}
	var missing []string
	if u.GetAPIVersion() == "" {
		missing = append(missing, "apiVersion")
	}
	if u.GetKind() == "" {
		missing = append(missing, "kind")
	}
	if u.GetName() == "" {
		missing = append(missing, "metadata.name")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the manifest has no %s", strings.Join(missing, ", "))
	}
	return u, nil
}

// ValidateClusterResourceEnvelope checks a ClusterResourceEnvelope: 1-50 entries,
// each a manifest of a cluster-scoped object (no namespace).
func ValidateClusterResourceEnvelope(e *ClusterResourceEnvelope) ErrorList {
	var p problems
	validateName(&p, e.Name, field.NewPath("metadata", "name"))
	validateClusterScoped(&p, ClusterResourceEnvelopeKind, e.Namespace)
	validateEnvelopeData(&p, e.Data, func(u *unstructured.Unstructured, path *field.Path) {
		if ns := u.GetNamespace(); ns != "" {
			p.add(ErrorTypeForbidden, path.Child("metadata", "namespace"),
				"must be empty: a ClusterResourceEnvelope holds cluster-scoped objects; wrap namespaced objects in a ResourceEnvelope")
		}
	})
	return withPlaceholders(p.list, e.Placeholders)
}

// ValidateResourceEnvelope checks a ResourceEnvelope: it has a namespace, 1-50
// entries, and each entry is a manifest of an object in that namespace (an
// empty namespace means the envelope's).
func ValidateResourceEnvelope(e *ResourceEnvelope) ErrorList {
	var p problems
	validateName(&p, e.Name, field.NewPath("metadata", "name"))
	if e.Namespace == "" {
		p.add(ErrorTypeRequired, field.NewPath("metadata", "namespace"), "is required: a ResourceEnvelope is namespaced and its contents live in its namespace")
	}
	validateEnvelopeData(&p, e.Data, func(u *unstructured.Unstructured, path *field.Path) {
		if ns := u.GetNamespace(); ns != "" && e.Namespace != "" && ns != e.Namespace {
			p.add(ErrorTypeInvalid, path.Child("metadata", "namespace"),
				"is %q, but a ResourceEnvelope's contents must be in its own namespace %q (or leave it empty)", ns, e.Namespace)
		}
	})
	return withPlaceholders(p.list, e.Placeholders)
}

func validateEnvelopeData(p *problems, data map[string]runtime.RawExtension, check func(*unstructured.Unstructured, *field.Path)) {
	path := field.NewPath("data")
	switch {
	case len(data) < MinEnvelopeEntries:
		p.add(ErrorTypeRequired, path, "must hold at least %d manifest", MinEnvelopeEntries)
	case len(data) > MaxEnvelopeEntries:
		p.add(ErrorTypeTooMany, path, "must hold at most %d manifests, not %d", MaxEnvelopeEntries, len(data))
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		kp := path.Key(k)
		u, err := parseManifest(data[k].Raw)
		if err != nil {
			p.add(ErrorTypeInvalid, kp, "%v", err)
			continue
		}
		check(u, kp)
	}
}

func validateConfigMapEnvelope(p *problems, u *unstructured.Unstructured) {
	path := field.NewPath("data")
	data, found, err := unstructured.NestedStringMap(u.Object, "data")
	if err != nil {
		p.add(ErrorTypeWrongType, path, "must map keys to manifests written as strings")
		return
	}
	if !found || len(data) == 0 {
		p.add(ErrorTypeRequired, path, "must hold at least one manifest: the ConfigMap is annotated %s: \"true\"", EnvelopeConfigMapAnnotation)
		return
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, err := parseManifest([]byte(data[k])); err != nil {
			p.add(ErrorTypeInvalid, path.Key(k), "%v", err)
		}
	}
}
