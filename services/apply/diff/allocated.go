package diff

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// DropAllocated removes from u the fields that the member's API server or
// controllers fill in for an object (a Service's cluster IPs and node ports, a
// claim's bound volume, a Job's generated selector) unless the manifest sets
// them. A full comparison calls it on both sides: such values differ between
// any two objects and say nothing about the configuration.
func DropAllocated(u, manifest *unstructured.Unstructured) {
	if u == nil {
		return
	}
	gvk := u.GroupVersionKind()
	drop := func(fields ...string) {
		if _, set, _ := unstructured.NestedFieldNoCopy(manifest.Object, fields...); !set {
			unstructured.RemoveNestedField(u.Object, fields...)
		}
	}
	switch {
	case gvk.Group == "" && gvk.Kind == "Service":
		drop("spec", "clusterIP")
		drop("spec", "clusterIPs")
		drop("spec", "healthCheckNodePort")
		if !manifestSetsNodePort(manifest) {
			ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "ports")
			for _, p := range ports {
				if pm, ok := p.(map[string]any); ok {
					delete(pm, "nodePort")
				}
			}
			if ports != nil {
				_ = unstructured.SetNestedSlice(u.Object, ports, "spec", "ports")
			}
		}
	case gvk.Group == "" && gvk.Kind == "PersistentVolumeClaim":
		drop("spec", "volumeName")
	case gvk.Group == "" && gvk.Kind == "Pod":
		drop("spec", "nodeName")
	case gvk.Group == "batch" && gvk.Kind == "Job":
		drop("spec", "selector")
		for _, l := range []string{"controller-uid", "job-name"} {
			drop("spec", "template", "metadata", "labels", l)
		}
	}
}

func manifestSetsNodePort(manifest *unstructured.Unstructured) bool {
	ports, _, _ := unstructured.NestedSlice(manifest.Object, "spec", "ports")
	for _, p := range ports {
		if pm, ok := p.(map[string]any); ok {
			if _, set := pm["nodePort"]; set {
				return true
			}
		}
	}
	return false
}
