package api

import (
	"bytes"
	"encoding/json"
	"strings"

	sigsyaml "sigs.k8s.io/yaml"
)

// Redacted stands for a Secret's value wherever Flotilla shows or records one: differences,
// the audit log, the placement revisions.
const Redacted = "(redacted)"

// RedactSecretDiff hides the values of one difference of a Secret that are, or contain, its
// data: the whole object, data, stringData, and the last-applied-configuration annotation
// (which holds the whole object as kubectl last applied it).
func RedactSecretDiff(d PatchDetail) PatchDetail {
	p := d.Path
	whole := p == "/" || p == "" || strings.HasPrefix(p, "/data") || strings.HasPrefix(p, "/stringData") ||
		strings.Contains(p, "last-applied-configuration")
	// All of metadata or of its annotations: redacted when it holds the annotation.
	around := p == "/metadata" || p == "/metadata/annotations"
	redact := func(v string) string {
		if v != "" && (whole || around && strings.Contains(v, LastAppliedConfigAnnotation)) {
			return Redacted
		}
		return v
	}
	d.ValueInHub, d.ValueInMember = redact(d.ValueInHub), redact(d.ValueInMember)
	return d
}

// RedactSecrets returns a JSON document (an event's payload, a manifest, a status) with
// every Secret value in it replaced by Redacted, and whether it replaced any. It finds them
// wherever they are: a core/v1 Secret's data and stringData (and its last-applied
// annotation), Secrets wrapped in envelopes (ResourceEnvelope, ClusterResourceEnvelope, or a
// ConfigMap envelope's manifests written as strings), and differences reported for a Secret
// (drifts, diffs, observedDrifts, observedDiffs beside a Secret's identifier). A document that
// is not JSON is returned unchanged.
func RedactSecrets(data []byte) ([]byte, bool) {
	if !bytes.Contains(data, []byte("Secret")) {
		return data, false // fast path: nothing can be a Secret
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return data, false
	}
	v, changed := redactValue(v)
	if !changed {
		return data, false
	}
	out, err := json.Marshal(v)
	if err != nil {
		return data, false
	}
	return out, true
}

// HoldsSecret reports whether a manifest holds a Secret value (a Secret's data, or a
// Secret wrapped in an envelope): what must not be stored in plain text.
func HoldsSecret(manifest []byte) bool {
	_, changed := RedactSecrets(manifest)
	return changed
}

func redactValue(v any) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		return redactObject(t)
	case []any:
		changed := false
		for i := range t {
			var c bool
			if t[i], c = redactValue(t[i]); c {
				changed = true
			}
		}
		return t, changed
	}
	return v, false
}

func redactObject(o map[string]any) (any, bool) {
	changed := false
	for k, child := range o {
		var c bool
		if o[k], c = redactValue(child); c {
			changed = true
		}
	}
	if isCoreSecret(o) || isCoreSecretID(o) {
		for _, f := range []string{"data", "stringData"} {
			if m, ok := o[f].(map[string]any); ok {
				for k, val := range m {
					if val != Redacted {
						m[k] = Redacted
						changed = true
					}
				}
			}
		}
		if redactLastApplied(o) {
			changed = true
		}
	}
	if id, ok := o["resource"].(map[string]any); (ok && isCoreSecretID(id)) || isCoreSecretID(o) {
		for _, f := range []string{"drifts", "diffs", "observedDrifts", "observedDiffs"} {
			if redactDiffs(o[f]) {
				changed = true
			}
		}
	}
	if isConfigMapEnvelope(o) && redactEnvelopeStrings(o) {
		changed = true
	}
	return o, changed
}

// isCoreSecret: a manifest of a core/v1 Secret.
func isCoreSecret(o map[string]any) bool {
	return o["kind"] == "Secret" && o["apiVersion"] == "v1"
}

// isCoreSecretID: a ResourceIdentifier of a core Secret (group empty or absent).
func isCoreSecretID(o map[string]any) bool {
	if o["kind"] != "Secret" {
		return false
	}
	g, _ := o["group"].(string)
	_, hasVersion := o["version"]
	return g == "" && hasVersion
}

func redactLastApplied(o map[string]any) bool {
	meta, _ := o["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	if v, ok := ann[LastAppliedConfigAnnotation]; ok && v != Redacted {
		ann[LastAppliedConfigAnnotation] = Redacted
		return true
	}
	return false
}

func redactDiffs(v any) bool {
	list, ok := v.([]any)
	if !ok {
		return false
	}
	changed := false
	for _, item := range list {
		d, ok := item.(map[string]any)
		if !ok {
			continue
		}
		path, _ := d["path"].(string)
		hub, _ := d["valueInHub"].(string)
		member, _ := d["valueInMember"].(string)
		r := RedactSecretDiff(PatchDetail{Path: path, ValueInHub: hub, ValueInMember: member})
		if r.ValueInHub != hub {
			d["valueInHub"], changed = r.ValueInHub, true
		}
		if r.ValueInMember != member {
			d["valueInMember"], changed = r.ValueInMember, true
		}
	}
	return changed
}

func isConfigMapEnvelope(o map[string]any) bool {
	if o["kind"] != "ConfigMap" || o["apiVersion"] != "v1" {
		return false
	}
	meta, _ := o["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	return ann[EnvelopeConfigMapAnnotation] == "true"
}

// redactEnvelopeStrings redacts the manifests of a ConfigMap envelope that are Secrets, or
// hold one: they are YAML or JSON written as strings.
func redactEnvelopeStrings(o map[string]any) bool {
	data, _ := o["data"].(map[string]any)
	changed := false
	for k, v := range data {
		s, ok := v.(string)
		if !ok || !strings.Contains(s, "Secret") {
			continue
		}
		j, err := sigsyaml.YAMLToJSON([]byte(s))
		if err != nil {
			continue
		}
		if out, c := RedactSecrets(j); c {
			data[k] = string(out)
			changed = true
		}
	}
	return changed
}
