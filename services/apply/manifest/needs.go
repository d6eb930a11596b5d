package manifest

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Needs returns, for each object, the indexes of the objects in objs that
// must be applied before it; nil entries of objs (manifests that could not
// be decoded) need nothing and are needed by nothing.
//
// Waves order kinds, but waiting for a whole wave makes every object wait
// for the slowest of the waves before it. An object of the waves up to
// WaveWorkload waits instead only for what the member needs first to treat
// it as meant:
//
//   - its Namespace (it cannot be created before);
//   - the Role or ClusterRole a binding names (a binding to a missing role
//     is refused to a worker that may not escalate);
//   - the StorageClass and PersistentVolume a claim names;
//   - for a pod or pod template: its ServiceAccount (pods are refused
//     without it), the ConfigMaps, Secrets, claims, PriorityClass and
//     RuntimeClass it refers to, the bindings that grant its ServiceAccount
//     its permissions (a Job that starts before them may fail for good), and
//     every ResourceQuota, LimitRange and NetworkPolicy of its namespace
//     (pods admitted before them escape them);
//   - for an Ingress: its IngressClass and TLS Secrets.
//
// Only objects of an object's prerequisite waves count, which keeps the
// order acyclic. Objects of WaveOther and later are not listed: they wait
// for whole waves (custom resources need their CRDs established; webhooks
// come last), which the applier does with Prerequisites.
func Needs(objs []*unstructured.Unstructured, waves []int) [][]int {
	byKey := make(map[Key]int, len(objs))
	guards := map[string][]int{} // namespace → its quotas, limit ranges and network policies
	for i, u := range objs {
		if u == nil {
			continue
		}
		k := keyOfUnstructured(u)
		byKey[k] = i
		if isPodGuard(k.Group, k.Kind) {
			guards[k.Namespace] = append(guards[k.Namespace], i)
		}
	}
	// bindings maps a ServiceAccount to the bindings whose subjects name it.
	bindings := map[Key][]int{}
	for i, u := range objs {
		if u == nil {
			continue
		}
		for _, sa := range boundServiceAccounts(u) {
			bindings[sa] = append(bindings[sa], i)
		}
	}

	out := make([][]int, len(objs))
	for i, u := range objs {
		if u == nil || waves[i] >= WaveOther {
			continue
		}
		prereq := prerequisites[waves[i]]
		seen := map[int]bool{}
		add := func(j int) {
			if j == i || seen[j] || objs[j] == nil || !slices.Contains(prereq, waves[j]) {
				return
			}
			seen[j] = true
			out[i] = append(out[i], j)
		}
		addKey := func(k Key) {
			if j, ok := byKey[k]; ok {
				add(j)
			}
		}
		ns := u.GetNamespace()
		if ns != "" {
			addKey(Key{Kind: "Namespace", Name: ns})
		}
		for _, k := range references(u) {
			addKey(k)
		}
		if spec := podSpecOf(u); spec != nil {
			for _, j := range guards[ns] {
				add(j)
			}
			sa := Key{Kind: "ServiceAccount", Namespace: ns, Name: serviceAccountOf(spec)}
			for _, j := range bindings[sa] {
				add(j)
			}
		}
	}
	return out
}

func keyOfUnstructured(u *unstructured.Unstructured) Key {
	gvk := u.GroupVersionKind()
	return Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
}

func isPodGuard(group, kind string) bool {
	return group == "" && (kind == "ResourceQuota" || kind == "LimitRange") ||
		group == "networking.k8s.io" && kind == "NetworkPolicy"
}

const rbacGroup = "rbac.authorization.k8s.io"

// references are the objects u names that the member needs first.
func references(u *unstructured.Unstructured) []Key {
	k := keyOfUnstructured(u)
	var out []Key
	ref := func(group, kind, namespace, name string) {
		if name != "" {
			out = append(out, Key{Group: group, Kind: kind, Namespace: namespace, Name: name})
		}
	}
	switch {
	case k.Group == rbacGroup && (k.Kind == "RoleBinding" || k.Kind == "ClusterRoleBinding"):
		kind, _, _ := unstructured.NestedString(u.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(u.Object, "roleRef", "name")
		switch kind {
		case "Role":
			ref(rbacGroup, "Role", k.Namespace, name)
		case "ClusterRole":
			ref(rbacGroup, "ClusterRole", "", name)
		}
	case k.Group == "" && k.Kind == "PersistentVolumeClaim":
		ref("storage.k8s.io", "StorageClass", "", str(u.Object, "spec", "storageClassName"))
		ref("", "PersistentVolume", "", str(u.Object, "spec", "volumeName"))
	case k.Group == "networking.k8s.io" && k.Kind == "Ingress":
		ref("networking.k8s.io", "IngressClass", "", str(u.Object, "spec", "ingressClassName"))
		for _, tls := range maps(u.Object, "spec", "tls") {
			ref("", "Secret", k.Namespace, str(tls, "secretName"))
		}
	}
	if spec := podSpecOf(u); spec != nil {
		ns := k.Namespace
		ref("", "ServiceAccount", ns, serviceAccountOf(spec))
		ref("scheduling.k8s.io", "PriorityClass", "", str(spec, "priorityClassName"))
		ref("node.k8s.io", "RuntimeClass", "", str(spec, "runtimeClassName"))
		for _, s := range maps(spec, "imagePullSecrets") {
			ref("", "Secret", ns, str(s, "name"))
		}
		for _, v := range maps(spec, "volumes") {
			ref("", "ConfigMap", ns, str(v, "configMap", "name"))
			ref("", "Secret", ns, str(v, "secret", "secretName"))
			ref("", "PersistentVolumeClaim", ns, str(v, "persistentVolumeClaim", "claimName"))
			for _, src := range maps(v, "projected", "sources") {
				ref("", "ConfigMap", ns, str(src, "configMap", "name"))
				ref("", "Secret", ns, str(src, "secret", "name"))
			}
		}
		for _, field := range []string{"initContainers", "containers", "ephemeralContainers"} {
			for _, c := range maps(spec, field) {
				for _, e := range maps(c, "env") {
					ref("", "ConfigMap", ns, str(e, "valueFrom", "configMapKeyRef", "name"))
					ref("", "Secret", ns, str(e, "valueFrom", "secretKeyRef", "name"))
				}
				for _, e := range maps(c, "envFrom") {
					ref("", "ConfigMap", ns, str(e, "configMapRef", "name"))
					ref("", "Secret", ns, str(e, "secretRef", "name"))
				}
			}
		}
		if k.Group == "apps" && k.Kind == "StatefulSet" {
			for _, t := range maps(u.Object, "spec", "volumeClaimTemplates") {
				ref("storage.k8s.io", "StorageClass", "", str(t, "spec", "storageClassName"))
			}
		}
	}
	return out
}

// podSpecOf returns the pod spec of a pod or of a kind's pod template, or nil.
func podSpecOf(u *unstructured.Unstructured) map[string]any {
	gvk := u.GroupVersionKind()
	var path []string
	switch {
	case gvk.Group == "" && gvk.Kind == "Pod":
		path = []string{"spec"}
	case gvk.Group == "apps" && (gvk.Kind == "Deployment" || gvk.Kind == "StatefulSet" || gvk.Kind == "DaemonSet" || gvk.Kind == "ReplicaSet"),
		gvk.Group == "" && gvk.Kind == "ReplicationController",
		gvk.Group == "batch" && gvk.Kind == "Job":
		path = []string{"spec", "template", "spec"}
	case gvk.Group == "batch" && gvk.Kind == "CronJob":
		path = []string{"spec", "jobTemplate", "spec", "template", "spec"}
	default:
		return nil
	}
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	spec, _ := v.(map[string]any)
	if spec == nil {
		// A template without a spec still runs as the default account.
		return map[string]any{}
	}
	return spec
}

// serviceAccountOf is the account a pod spec runs as.
func serviceAccountOf(spec map[string]any) string {
	if sa := str(spec, "serviceAccountName"); sa != "" {
		return sa
	}
	if sa := str(spec, "serviceAccount"); sa != "" {
		return sa
	}
	return "default"
}

// boundServiceAccounts are the ServiceAccounts a (Cluster)RoleBinding grants
// its role to.
func boundServiceAccounts(u *unstructured.Unstructured) []Key {
	k := keyOfUnstructured(u)
	if k.Group != rbacGroup || (k.Kind != "RoleBinding" && k.Kind != "ClusterRoleBinding") {
		return nil
	}
	var out []Key
	for _, s := range maps(u.Object, "subjects") {
		if str(s, "kind") != "ServiceAccount" {
			continue
		}
		ns := str(s, "namespace")
		if ns == "" {
			ns = k.Namespace
		}
		if name := str(s, "name"); name != "" && ns != "" {
			out = append(out, Key{Kind: "ServiceAccount", Namespace: ns, Name: name})
		}
	}
	return out
}

// str reads a string field, "" when missing or of another type.
func str(obj map[string]any, path ...string) string {
	s, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	v, _ := s.(string)
	return v
}

// maps reads a list of objects, skipping items of another type.
func maps(obj map[string]any, path ...string) []map[string]any {
	l, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	items, _ := l.([]any)
	var out []map[string]any
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
