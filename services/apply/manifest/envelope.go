package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/flotilla-dev/flotilla/events/api"
)

// envelopeOf reports whether u is an envelope, and which kind.
func envelopeOf(u *unstructured.Unstructured) (api.EnvelopeIdentifier, api.EnvelopeType) {
	gvk := u.GroupVersionKind()
	var t api.EnvelopeType
	switch {
	case gvk.Group == "" && gvk.Kind == "ConfigMap" && u.GetAnnotations()[api.EnvelopeConfigMapAnnotation] == "true":
		t = api.ConfigMapEnvelopeType
	case gvk.Group == api.PlacementGroupVersion.Group && gvk.Kind == api.ClusterResourceEnvelopeKind:
		t = api.ClusterResourceEnvelopeType
	case gvk.Group == api.PlacementGroupVersion.Group && gvk.Kind == api.ResourceEnvelopeKind:
		t = api.ResourceEnvelopeType
	default:
		return api.EnvelopeIdentifier{}, ""
	}
	return api.EnvelopeIdentifier{Name: u.GetName(), Namespace: u.GetNamespace(), Type: t}, t
}

// unwrap returns the objects an envelope carries, in the order of their data
// keys. Each entry fails alone: a bad entry does not stop its siblings.
func unwrap(index int, u *unstructured.Unstructured, env api.EnvelopeIdentifier, t api.EnvelopeType) []Object {
	envID := &env
	data, _, _ := unstructured.NestedFieldNoCopy(u.Object, "data")
	entries, ok := data.(map[string]any)
	if !ok || len(entries) == 0 {
		return []Object{failed(index, api.ResourceIdentifier{Envelope: envID}, api.ManifestDecodingErredReason,
			fmt.Errorf("%s envelope %s has no data", t, envName(env)))}
	}
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	slices.Sort(keys)

	var out []Object
	for _, key := range keys {
		docs, err := entryDocuments(entries[key])
		if err != nil {
			out = append(out, failed(index, api.ResourceIdentifier{Name: key, Envelope: envID}, api.ManifestDecodingErredReason,
				fmt.Errorf("%s envelope %s, entry %q: %w", t, envName(env), key, err)))
			continue
		}
		for _, doc := range docs {
			w, err := decode(doc)
			if err != nil {
				out = append(out, failed(index, api.ResourceIdentifier{Name: key, Envelope: envID}, api.ManifestDecodingErredReason,
					fmt.Errorf("%s envelope %s, entry %q: %w", t, envName(env), key, err)))
				continue
			}
			if _, nested := envelopeOf(w); nested != "" {
				out = append(out, failed(index, identify(w, envID), api.ManifestDecodingErredReason,
					fmt.Errorf("%s envelope %s, entry %q: envelopes cannot be nested", t, envName(env), key)))
				continue
			}
			o := prepare(index, w, envID)
			if t == api.ResourceEnvelopeType && o.Err == nil {
				// A ResourceEnvelope holds objects of its own namespace only.
				switch ns := w.GetNamespace(); ns {
				case "":
					w.SetNamespace(env.Namespace)
					o.Resource.Namespace = env.Namespace
					o.Hash = Hash(w)
				case env.Namespace:
				default:
					o.Reason = api.ManifestApplyFailedReason
					o.Err = fmt.Errorf("ResourceEnvelope %s may only hold objects of namespace %q, not %q", envName(env), env.Namespace, ns)
				}
			}
			out = append(out, o)
		}
	}
	return out
}

// entryDocuments returns the manifests of one envelope entry as JSON
// documents. ConfigMap envelopes hold YAML (or JSON) text, possibly several
// documents; the envelope kinds hold objects.
func entryDocuments(v any) ([][]byte, error) {
	switch val := v.(type) {
	case string:
		// ConfigMap data is text; an envelope entry written as a YAML
		// string instead of an object is read the same way.
		return splitYAML(val)
	case map[string]any:
		b, err := json.Marshal(val)
		if err != nil {
			return nil, err
		}
		return [][]byte{b}, nil
	default:
		return nil, fmt.Errorf("entry is a %T, not a manifest", v)
	}
}

// splitYAML splits a YAML or JSON stream into JSON documents, skipping empty
// ones.
func splitYAML(s string) ([][]byte, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(s)), 4096)
	var out [][]byte
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(doc) == 0 {
			continue
		}
		b, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, errors.New("entry holds no manifest")
	}
	return out, nil
}

func identify(u *unstructured.Unstructured, env *api.EnvelopeIdentifier) api.ResourceIdentifier {
	gvk := u.GroupVersionKind()
	return api.ResourceIdentifier{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind,
		Name: u.GetName(), Namespace: u.GetNamespace(), Envelope: env}
}

func envName(env api.EnvelopeIdentifier) string {
	if env.Namespace == "" {
		return env.Name
	}
	return env.Namespace + "/" + env.Name
}
