package diff

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// ignoredMetadata are the metadata fields that never count as differences.
var ignoredMetadata = []string{
	"name", "namespace", "generateName", "finalizers", "managedFields", "ownerReferences",
	"deletionTimestamp", "deletionGracePeriodSeconds", "generation", "resourceVersion",
	"selfLink", "uid", "creationTimestamp",
}

// ignoredKeyDomains are the label and annotation domains that never count as
// differences: Kubernetes', Fleet's and Flotilla's own.
var ignoredKeyDomains = []string{"kubernetes.io", "k8s.io", "kubernetes-fleet.io", "flotilla.dev"}

// IgnoredKey reports whether a label or annotation key is ignored in
// comparisons: its prefix is kubernetes.io, k8s.io, kubernetes-fleet.io or
// flotilla.dev, or a subdomain of one (kubectl.kubernetes.io).
func IgnoredKey(key string) bool {
	domain, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	for _, d := range ignoredKeyDomains {
		if domain == d || strings.HasSuffix(domain, "."+d) {
			return true
		}
	}
	return false
}

// Normalize returns a copy of u's content without what comparisons ignore:
// status, server-set and identity metadata, ignored labels and annotations,
// and the creationTimestamp of embedded templates. A nil u gives nil.
func Normalize(u *unstructured.Unstructured) map[string]any {
	if u == nil {
		return nil
	}
	obj := runtime.DeepCopyJSON(u.Object)
	delete(obj, "status")
	if md, ok := obj["metadata"].(map[string]any); ok {
		for _, f := range ignoredMetadata {
			delete(md, f)
		}
		normalizeMetadata(md)
		if len(md) == 0 {
			delete(obj, "metadata")
		}
	}
	for k, v := range obj {
		if k != "metadata" {
			dropTemplateTimestamps(v)
		}
	}
	return obj
}

func normalizeMetadata(md map[string]any) {
	for _, field := range []string{"labels", "annotations"} {
		m, ok := md[field].(map[string]any)
		if !ok {
			if md[field] == nil {
				delete(md, field)
			}
			continue
		}
		for k := range m {
			if IgnoredKey(k) {
				delete(m, k)
			}
		}
		if len(m) == 0 {
			delete(md, field)
		}
	}
}

// dropTemplateTimestamps removes creationTimestamp (kubectl prints null) and
// ignored labels and annotations from every nested metadata, such as a pod
// template's.
func dropTemplateTimestamps(v any) {
	switch val := v.(type) {
	case map[string]any:
		for k, child := range val {
			if k == "metadata" {
				if md, ok := child.(map[string]any); ok {
					delete(md, "creationTimestamp")
					normalizeMetadata(md)
					if len(md) == 0 {
						delete(val, k)
						continue
					}
				}
			}
			dropTemplateTimestamps(child)
		}
	case []any:
		for _, child := range val {
			dropTemplateTimestamps(child)
		}
	}
}

// Digest summarises what comparisons look at in u: two objects with the same
// digest have no differences. Workers use it to skip drift checks for changes
// that touch only status or server-set metadata.
func Digest(u *unstructured.Unstructured) string {
	b, err := json.Marshal(Normalize(u))
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
