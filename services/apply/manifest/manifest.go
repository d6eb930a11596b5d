package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Object is one object to apply on a member: a manifest of the WorkDesired,
// or an object unwrapped from an envelope manifest.
type Object struct {
	// Index is the position of the manifest in WorkDesired.Manifests; the
	// contents of an envelope share the envelope's index.
	Index int
	// Resource identifies the object and, for wrapped objects, its envelope.
	Resource api.ResourceIdentifier
	// Object is the manifest without server-populated fields. Nil when the
	// manifest could not be decoded.
	Object *unstructured.Unstructured
	// Wave is the object's place in dependency order: lower waves are
	// applied first and deleted last.
	Wave int
	// Hash identifies the manifest's content (see Hash).
	Hash string
	// Reason and Err are set when the object cannot be applied as given:
	// Reason is a per-manifest reason of the contract (DecodingErred,
	// FoundGenerateName, Duplicated, ManifestApplyFailed).
	Reason string
	Err    error
}

// GroupVersionKind of the object.
func (o *Object) GroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: o.Resource.Group, Version: o.Resource.Version, Kind: o.Resource.Kind}
}

// Key identifies the object on a member regardless of its version and
// envelope: group, kind, namespace and name.
func (o *Object) Key() Key {
	return KeyOf(o.Resource)
}

// Key identifies a member object independently of the API version it is
// read through.
type Key struct {
	Group, Kind, Namespace, Name string
}

// KeyOf is the key of a resource identifier.
func KeyOf(r api.ResourceIdentifier) Key {
	return Key{Group: r.Group, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

func (k Key) String() string {
	kind := k.Kind
	if k.Group != "" {
		kind += "." + k.Group
	}
	if k.Namespace == "" {
		return kind + "/" + k.Name
	}
	return kind + "/" + k.Namespace + "/" + k.Name
}

// Parse decodes the manifests of a WorkDesired into the objects to apply, in
// manifest order with envelope contents in place of their envelopes. A
// manifest that cannot be used yields an Object with Reason and Err set; it
// never stops the others.
func Parse(manifests []json.RawMessage) []Object {
	var out []Object
	for i, raw := range manifests {
		out = append(out, parseOne(i, raw)...)
	}
	markDuplicates(out)
	return out
}

func parseOne(index int, raw json.RawMessage) []Object {
	u, err := decode(raw)
	if err != nil {
		return []Object{failed(index, api.ResourceIdentifier{}, api.ManifestDecodingErredReason,
			fmt.Errorf("decode manifest %d: %w", index, err))}
	}
	if env, kind := envelopeOf(u); kind != "" {
		return unwrap(index, u, env, kind)
	}
	return []Object{prepare(index, u, nil)}
}

// decode reads one JSON manifest into an unstructured object.
func decode(raw []byte) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	if u.GetAPIVersion() == "" {
		return nil, errors.New("apiVersion is missing")
	}
	if u.IsList() {
		return nil, fmt.Errorf("%s is a list; place its items instead", u.GetKind())
	}
	return u, nil
}

// prepare strips u and computes its identity, wave and hash.
func prepare(index int, u *unstructured.Unstructured, env *api.EnvelopeIdentifier) Object {
	Strip(u)
	gvk := u.GroupVersionKind()
	id := api.ResourceIdentifier{
		Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind,
		Name: u.GetName(), Namespace: u.GetNamespace(), Envelope: env,
	}
	o := Object{Index: index, Resource: id, Object: u, Wave: WaveOf(gvk.GroupKind())}
	switch {
	case u.GetName() == "" && u.GetGenerateName() != "":
		o.Reason = api.ManifestFoundGenerateNameReason
		o.Err = fmt.Errorf("%s has generateName %q and no name: objects with generated names cannot be tracked",
			gvk.Kind, u.GetGenerateName())
	case u.GetName() == "":
		o.Reason = api.ManifestDecodingErredReason
		o.Err = fmt.Errorf("%s has no metadata.name", gvk.Kind)
	}
	o.Hash = Hash(u)
	return o
}

func failed(index int, id api.ResourceIdentifier, reason string, err error) Object {
	return Object{Index: index, Resource: id, Reason: reason, Err: err}
}

// markDuplicates fails every object after the first with the same key: two
// manifests for one member object would overwrite each other forever.
func markDuplicates(objs []Object) {
	seen := map[Key]int{}
	for i := range objs {
		o := &objs[i]
		if o.Object == nil || o.Err != nil {
			continue
		}
		k := o.Key()
		if first, dup := seen[k]; dup {
			o.Reason = api.ManifestDuplicatedReason
			o.Err = fmt.Errorf("%s is placed more than once in this placement (first as manifest %d)", k, objs[first].Index)
			continue
		}
		seen[k] = i
	}
}

// Hash is a digest of a manifest's content. The apply worker records it on
// the member object so that a later run can tell a member-side drift (same
// hash, different object) from a new hub version (different hash).
func Hash(u *unstructured.Unstructured) string {
	// encoding/json sorts map keys, so equal content gives equal bytes.
	b, err := json.Marshal(u.Object)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// Strip removes from u what an API server or another cluster added
// (api.StripServerFields), plus what must never travel from the hub to a
// member: owner references (they name hub UIDs), Flotilla's own ownership
// marks (a hub manifest must not claim ownership on its own), and
// KubeAdmiral's hub-side controls (the conflict-resolution annotation and the
// propagation-policy labels), which KubeAdmiral itself drops when it
// propagates an object.
func Strip(u *unstructured.Unstructured) {
	api.StripServerFields(u)
	unstructured.RemoveNestedField(u.Object, "metadata", "ownerReferences")
	removeKeys(u, "labels", func(k string) bool {
		return IsOwnMark(k) || k == api.PropagationPolicyNameLabel || k == api.ClusterPropagationPolicyNameLabel
	})
	removeKeys(u, "annotations", func(k string) bool {
		return IsOwnMark(k) || k == api.ConflictResolutionAnnotation
	})
}

func removeKeys(u *unstructured.Unstructured, field string, drop func(string) bool) {
	m, found, _ := unstructured.NestedStringMap(u.Object, "metadata", field)
	if !found {
		return
	}
	changed := false
	for k := range m {
		if drop(k) {
			delete(m, k)
			changed = true
		}
	}
	if !changed {
		return
	}
	if len(m) == 0 {
		unstructured.RemoveNestedField(u.Object, "metadata", field)
		return
	}
	_ = unstructured.SetNestedStringMap(u.Object, m, "metadata", field)
}

// IsOwnMark reports whether a label or annotation key is in Flotilla's
// domain (flotilla.dev or a subdomain).
func IsOwnMark(key string) bool {
	domain, _, found := strings.Cut(key, "/")
	return found && (domain == "flotilla.dev" || strings.HasSuffix(domain, ".flotilla.dev"))
}
