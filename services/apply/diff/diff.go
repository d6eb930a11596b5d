// Package diff compares a hub manifest with a member object the way the Fleet
// contract says: fields an API server or controller owns (status, uid,
// resourceVersion, managedFields, ...), Kubernetes' and Fleet's own labels and
// annotations, and Flotilla's ownership marks never count as differences.
// Differences come as JSON-pointer paths with both values; Secret values are
// redacted.
package diff

import (
	"encoding/json"
	"fmt"

	"github.com/wI2L/jsondiff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Redacted replaces Secret values in differences.
const Redacted = api.Redacted

// WholeObject is the hub value of the one difference reported for an object
// missing on the member (at path "/").
const WholeObject = "(the whole object)"

// MaxPerObject caps the differences reported for one object.
const MaxPerObject = 100

// Missing is the difference of an object that does not exist on the member.
func Missing() []api.PatchDetail {
	return []api.PatchDetail{{Path: "/", ValueInHub: WholeObject}}
}

// Compare returns how member differs from hub, both compared after Normalize.
// Paths are JSON pointers; ValueInHub is empty for a field only the member
// has, ValueInMember for a field only the hub has. Values of a Secret's data
// and stringData are replaced by Redacted.
func Compare(hub, member *unstructured.Unstructured) ([]api.PatchDetail, error) {
	h, err := json.Marshal(Normalize(hub))
	if err != nil {
		return nil, fmt.Errorf("compare: encode hub object: %w", err)
	}
	m, err := json.Marshal(Normalize(member))
	if err != nil {
		return nil, fmt.Errorf("compare: encode member object: %w", err)
	}
	patch, err := jsondiff.CompareJSON(m, h)
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	secret := isSecret(hub) || isSecret(member)
	var out []api.PatchDetail
	for _, op := range patch {
		if len(out) == MaxPerObject {
			break
		}
		d := api.PatchDetail{Path: op.Path}
		switch op.Type {
		case jsondiff.OperationAdd:
			d.ValueInHub = render(op.Value)
		case jsondiff.OperationRemove:
			d.ValueInMember = render(op.OldValue)
		case jsondiff.OperationReplace:
			d.ValueInHub = render(op.Value)
			d.ValueInMember = render(op.OldValue)
		default:
			// Move, copy and test are not produced without the Factorize
			// and Invertible options.
			continue
		}
		if secret {
			d = redact(d)
		}
		out = append(out, d)
	}
	return out, nil
}

// render formats a value for a PatchDetail: strings as they are, everything
// else as JSON.
func render(v any) string {
	switch val := v.(type) {
	case nil:
		return "null"
	case string:
		return val
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func isSecret(u *unstructured.Unstructured) bool {
	if u == nil {
		return false
	}
	gvk := u.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Secret"
}

// redact hides the values of a Secret difference that are, or contain, data.
func redact(d api.PatchDetail) api.PatchDetail { return api.RedactSecretDiff(d) }

// Redact hides Secret values in differences computed elsewhere.
func Redact(u *unstructured.Unstructured, details []api.PatchDetail) []api.PatchDetail {
	if !isSecret(u) {
		return details
	}
	out := make([]api.PatchDetail, len(details))
	for i, d := range details {
		out[i] = redact(d)
	}
	return out
}
