package api

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// serverMetadataFields are the metadata fields an API server fills in.
var serverMetadataFields = []string{
	"uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
	"selfLink", "deletionTimestamp", "deletionGracePeriodSeconds",
}

// StripServerFields removes from u what an API server added, so that a
// manifest copied from `kubectl get -o yaml` can be placed on other clusters:
// status; metadata uid, resourceVersion, creationTimestamp, generation,
// managedFields, selfLink, deletionTimestamp and deletionGracePeriodSeconds;
// the kubectl last-applied-configuration annotation; the null
// creationTimestamp kubectl prints in pod templates; and a Service's allocated
// spec.clusterIP and spec.clusterIPs (a headless Service's "None" is the user's
// choice and stays). It reports whether anything was removed.
func StripServerFields(u *unstructured.Unstructured) bool {
	removed := false
	remove := func(fields ...string) {
		if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, fields...); found {
			unstructured.RemoveNestedField(u.Object, fields...)
			removed = true
		}
	}

	remove("status")
	for _, f := range serverMetadataFields {
		remove("metadata", f)
	}
	if annotations, ok, _ := unstructured.NestedMap(u.Object, "metadata", "annotations"); ok {
		if _, has := annotations[LastAppliedConfigAnnotation]; has {
			delete(annotations, LastAppliedConfigAnnotation)
			removed = true
			if len(annotations) == 0 {
				unstructured.RemoveNestedField(u.Object, "metadata", "annotations")
			} else {
				_ = unstructured.SetNestedMap(u.Object, annotations, "metadata", "annotations")
			}
		}
	}
	if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "template", "metadata", "creationTimestamp"); found && v == nil {
		remove("spec", "template", "metadata", "creationTimestamp")
	}

	gvk := u.GroupVersionKind()
	if gvk.Group == "" && gvk.Kind == "Service" {
		if ip, _, _ := unstructured.NestedString(u.Object, "spec", "clusterIP"); ip != "None" {
			remove("spec", "clusterIP")
			remove("spec", "clusterIPs")
		}
	}
	return removed
}
