package override

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/flotilla-dev/flotilla/events/api"
)

// engine applies one cluster's overrides, indexed by the target keys they select.
type engine struct {
	cluster  Cluster
	byTarget map[string][]Snapshot
}

// manifest applies the overrides to one manifest. It returns the manifest for
// the cluster, whether the cluster gets it at all (a Delete rule, or an
// envelope whose every object was deleted) and whether it changed. A manifest
// that does not decode is left as it is: the apply worker reports it.
func (e *engine) manifest(raw json.RawMessage) (json.RawMessage, bool, bool, error) {
	doc, err := decode(raw)
	obj, ok := doc.(map[string]any)
	if err != nil || !ok {
		return raw, true, false, nil
	}
	if env, ok := envelopeOf(obj); ok {
		keep, changed, err := e.envelope(obj, env)
		if err != nil || !changed {
			return raw, keep, false, err
		}
		if !keep {
			return nil, false, true, nil
		}
		out, err := json.Marshal(obj)
		return out, true, true, err
	}
	id := identityOf(obj, nil)
	patched, keep, changed, err := e.object(obj, object{id: id, namespaced: id.Namespace != ""})
	if err != nil || !changed || !keep {
		return raw, keep, changed, err
	}
	out, err := json.Marshal(patched)
	return out, true, true, err
}

// object applies the overrides that select o to its document: the
// ClusterResourceOverrides first, then the ResourceOverrides, each rule that
// matches the cluster in order.
func (e *engine) object(doc any, o object) (any, bool, bool, error) {
	changed := false
	for _, key := range o.keys() {
		for _, s := range e.byTarget[key] {
			for i, r := range s.Rules {
				if !matches(r.ClusterSelector, e.cluster) {
					continue
				}
				if r.OverrideType == api.DeleteOverrideType {
					return nil, false, true, nil
				}
				for j, p := range r.JSONPatchOverrides {
					var err error
					if doc, err = e.patch(doc, p); err != nil {
						return nil, false, false, fmt.Errorf("%sSnapshot %q failed to apply on %s: overrideRules[%d].jsonPatchOverrides[%d] (%s %s): %w",
							s.Key.Kind, s.Name(), describeObject(o.id), i, j, p.Operator, p.Path, err)
					}
					changed = true
				}
			}
		}
	}
	return doc, true, changed, nil
}

// patch applies one JSON patch, its value's variables replaced for the cluster.
func (e *engine) patch(doc any, p api.JSONPatchOverride) (any, error) {
	var value any
	if p.Operator != api.JSONPatchOverrideOpRemove {
		raw, err := substitute(string(p.Value.Raw), e.cluster)
		if err != nil {
			return nil, err
		}
		if value, err = decode([]byte(raw)); err != nil {
			return nil, fmt.Errorf("the value is not JSON once its variables are replaced: %w", err)
		}
	}
	return applyPatch(doc, p.Operator, p.Path, value)
}

// envelope applies the overrides to the objects an envelope wraps, in place.
// It reports whether the envelope still wraps something for the cluster and
// whether anything changed.
func (e *engine) envelope(obj map[string]any, env api.EnvelopeIdentifier) (bool, bool, error) {
	data, ok := obj["data"].(map[string]any)
	if !ok {
		return true, false, nil
	}
	changed := false
	for _, key := range slices.Sorted(maps.Keys(data)) {
		value, keep, entryChanged, err := e.entry(data[key], env)
		if err != nil {
			return false, false, fmt.Errorf("envelope entry %q: %w", key, err)
		}
		if !entryChanged {
			continue
		}
		changed = true
		if keep {
			data[key] = value
		} else {
			delete(data, key)
		}
	}
	return len(data) > 0, changed, nil
}

// entry applies the overrides to one envelope entry: an object, or text (a
// ConfigMap envelope's) of one or more YAML or JSON documents, which is
// written back as JSON documents when something changed.
func (e *engine) entry(v any, env api.EnvelopeIdentifier) (any, bool, bool, error) {
	switch val := v.(type) {
	case map[string]any:
		patched, keep, changed, err := e.object(val, wrapped(val, env))
		return patched, keep, changed, err
	case string:
		docs, err := splitDocuments(val)
		if err != nil {
			return v, true, false, nil // the apply worker reports it
		}
		var out []string
		changed := false
		for _, d := range docs {
			patched, keep, c, err := e.object(d, wrapped(d, env))
			if err != nil {
				return nil, false, false, err
			}
			changed = changed || c
			if !keep {
				continue
			}
			b, err := json.Marshal(patched)
			if err != nil {
				return nil, false, false, err
			}
			out = append(out, string(b))
		}
		if !changed {
			return v, true, false, nil
		}
		return strings.Join(out, "\n---\n"), len(out) > 0, true, nil
	}
	return v, true, false, nil
}

// wrapped identifies an object an envelope wraps: a ClusterResourceEnvelope
// holds cluster-scoped objects, a ResourceEnvelope objects of its namespace
// (its namespace when they name none), a ConfigMap envelope either.
func wrapped(doc map[string]any, env api.EnvelopeIdentifier) object {
	id := identityOf(doc, &env)
	switch env.Type {
	case api.ClusterResourceEnvelopeType:
		return object{id: id}
	case api.ResourceEnvelopeType:
		if id.Namespace == "" {
			id.Namespace = env.Namespace
		}
		return object{id: id, namespaced: true}
	}
	return object{id: id, namespaced: id.Namespace != ""}
}

// objectsOf lists the objects of a manifest: itself, or what it wraps when it
// is an envelope.
func objectsOf(raw json.RawMessage) []object {
	doc, err := decode(raw)
	obj, ok := doc.(map[string]any)
	if err != nil || !ok {
		return nil
	}
	env, isEnvelope := envelopeOf(obj)
	if !isEnvelope {
		id := identityOf(obj, nil)
		return []object{{id: id, namespaced: id.Namespace != ""}}
	}
	data, _ := obj["data"].(map[string]any)
	var out []object
	for _, v := range data {
		switch val := v.(type) {
		case map[string]any:
			out = append(out, wrapped(val, env))
		case string:
			docs, _ := splitDocuments(val)
			for _, d := range docs {
				out = append(out, wrapped(d, env))
			}
		}
	}
	return out
}

// envelopeOf reports whether a manifest is an envelope, and which.
func envelopeOf(obj map[string]any) (api.EnvelopeIdentifier, bool) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	group, _, _ := strings.Cut(apiVersion, "/")
	if !strings.Contains(apiVersion, "/") {
		group = ""
	}
	id := api.EnvelopeIdentifier{Name: name, Namespace: namespace}
	switch {
	case group == "" && kind == "ConfigMap":
		annotations, _ := meta["annotations"].(map[string]any)
		if annotations[api.EnvelopeConfigMapAnnotation] != "true" {
			return id, false
		}
		id.Type = api.ConfigMapEnvelopeType
	case group == api.PlacementGroupVersion.Group && kind == api.ClusterResourceEnvelopeKind:
		id.Type = api.ClusterResourceEnvelopeType
	case group == api.PlacementGroupVersion.Group && kind == api.ResourceEnvelopeKind:
		id.Type = api.ResourceEnvelopeType
	default:
		return id, false
	}
	return id, true
}

// identityOf reads an object's group, version, kind, namespace and name.
func identityOf(obj map[string]any, env *api.EnvelopeIdentifier) api.ResourceIdentifier {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	group, version, found := strings.Cut(apiVersion, "/")
	if !found {
		group, version = "", apiVersion
	}
	id := api.ResourceIdentifier{Group: group, Version: version, Kind: kind, Namespace: namespace, Name: name}
	if env != nil {
		e := *env
		id.Envelope = &e
	}
	return id
}

// splitDocuments reads a YAML or JSON stream into its objects, skipping empty
// documents.
func splitDocuments(s string) ([]map[string]any, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(s)), 4096)
	var out []map[string]any
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		doc, err := decode(raw)
		if err != nil {
			return nil, err
		}
		if m, ok := doc.(map[string]any); ok && len(m) > 0 {
			out = append(out, m)
		}
	}
}
