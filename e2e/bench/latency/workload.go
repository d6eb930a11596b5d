package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Labels and annotations on every benchmark object. The stamp changes with each version of
// an object, so that a watch on a member can tell which version it sees.
const (
	runLabel        = "bench.example.org/run"
	stampAnnotation = "bench.example.org/stamp"
	firstStamp      = "v1"
	editedStamp     = "v2"
)

var (
	namespacesGVR      = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	configMapsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	serviceAccountsGVR = schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	servicesGVR        = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	deploymentsGVR     = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	rolesGVR           = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"}
	roleBindingsGVR    = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
)

// watchedGVRs are the resources the member observers watch.
var watchedGVRs = []schema.GroupVersionResource{
	namespacesGVR, configMapsGVR, serviceAccountsGVR, servicesGVR, deploymentsGVR, rolesGVR, roleBindingsGVR,
}

// object is one benchmark object with the resource it is served as.
type object struct {
	gvr schema.GroupVersionResource
	obj *unstructured.Unstructured
}

func (o object) key() objectKey {
	return objectKey{gvr: o.gvr, namespace: o.obj.GetNamespace(), name: o.obj.GetName()}
}

// objectKey names an object on a member.
type objectKey struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
}

func (k objectKey) String() string {
	if k.namespace == "" {
		return k.gvr.Resource + "/" + k.name
	}
	return k.gvr.Resource + "/" + k.namespace + "/" + k.name
}

// Counts of each kind in the namespace: 20 objects beside the Namespace itself.
const (
	configMaps   = 5
	appsPerSpace = 3 // a ServiceAccount, Role, RoleBinding, Deployment and Service each
)

// objectsPerNamespace is the Namespace plus what it holds.
const objectsPerNamespace = 1 + configMaps + 5*appsPerSpace

// workload is the namespace and its 20 objects, in the order kubectl should create them
// (the Namespace first). Every object carries the run label and the first stamp.
func workload(namespace, run string) []object {
	meta := func(name string) map[string]any {
		m := map[string]any{
			"name":        name,
			"labels":      map[string]any{runLabel: run},
			"annotations": map[string]any{stampAnnotation: firstStamp},
		}
		if name != namespace {
			m["namespace"] = namespace
		}
		return m
	}
	var out []object
	add := func(gvr schema.GroupVersionResource, apiVersion, kind, name string, fields map[string]any) {
		u := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta(name)}
		for k, v := range fields {
			u[k] = v
		}
		out = append(out, object{gvr: gvr, obj: &unstructured.Unstructured{Object: u}})
	}
	add(namespacesGVR, "v1", "Namespace", namespace, nil)
	for i := 1; i <= appsPerSpace; i++ {
		add(serviceAccountsGVR, "v1", "ServiceAccount", fmt.Sprintf("app-%d", i), nil)
	}
	for i := 1; i <= appsPerSpace; i++ {
		add(rolesGVR, "rbac.authorization.k8s.io/v1", "Role", fmt.Sprintf("config-reader-%d", i), map[string]any{
			"rules": []any{map[string]any{
				"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get", "list", "watch"},
			}},
		})
	}
	for i := 1; i <= appsPerSpace; i++ {
		add(roleBindingsGVR, "rbac.authorization.k8s.io/v1", "RoleBinding", fmt.Sprintf("config-reader-%d", i), map[string]any{
			"roleRef": map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": fmt.Sprintf("config-reader-%d", i)},
			"subjects": []any{map[string]any{
				"kind": "ServiceAccount", "name": fmt.Sprintf("app-%d", i), "namespace": namespace,
			}},
		})
	}
	for i := 1; i <= configMaps; i++ {
		add(configMapsGVR, "v1", "ConfigMap", fmt.Sprintf("config-%d", i), map[string]any{
			"data": map[string]any{
				"revision":       "1",
				"app.properties": fmt.Sprintf("log.level=info\ncache.size=%d\nfeature.flags=a,b,c\n", 64*i),
			},
		})
	}
	for i := 1; i <= appsPerSpace; i++ {
		app := fmt.Sprintf("web-%d", i)
		add(servicesGVR, "v1", "Service", app, map[string]any{
			"spec": map[string]any{
				"selector": map[string]any{"app": app},
				"ports":    []any{map[string]any{"name": "http", "port": int64(80), "targetPort": int64(8080)}},
			},
		})
	}
	for i := 1; i <= appsPerSpace; i++ {
		app := fmt.Sprintf("web-%d", i)
		add(deploymentsGVR, "apps/v1", "Deployment", app, map[string]any{
			"spec": map[string]any{
				"replicas": int64(1),
				"selector": map[string]any{"matchLabels": map[string]any{"app": app}},
				"template": map[string]any{
					"metadata": map[string]any{"labels": map[string]any{"app": app}},
					"spec": map[string]any{
						"serviceAccountName": fmt.Sprintf("app-%d", i),
						"containers": []any{map[string]any{
							"name":  "web",
							"image": "nginx:1.27",
							"ports": []any{map[string]any{"containerPort": int64(8080)}},
							"envFrom": []any{map[string]any{
								"configMapRef": map[string]any{"name": fmt.Sprintf("config-%d", i)},
							}},
						}},
					},
				},
			},
		})
	}
	if len(out) != objectsPerNamespace {
		panic(fmt.Sprintf("workload has %d objects, want %d", len(out), objectsPerNamespace))
	}
	return out
}

// edited is the hub change: the first ConfigMap of the workload with a new revision.
func edited(objs []object) object {
	for _, o := range objs {
		if o.gvr == configMapsGVR {
			u := o.obj.DeepCopy()
			_ = unstructured.SetNestedField(u.Object, "2", "data", "revision")
			u.SetAnnotations(map[string]string{stampAnnotation: editedStamp})
			return object{gvr: o.gvr, obj: u}
		}
	}
	panic("the workload has no ConfigMap")
}

// placement is a PickAll ClusterResourcePlacement selecting the namespace, with Fleet's
// default rollout strategy unless maxUnavailable is set.
func placement(name, namespace, maxUnavailable string) map[string]any {
	spec := map[string]any{
		"resourceSelectors": []any{map[string]any{"group": "", "version": "v1", "kind": "Namespace", "name": namespace}},
		"policy":            map[string]any{"placementType": "PickAll"},
	}
	if maxUnavailable != "" {
		spec["strategy"] = map[string]any{
			"type":          "RollingUpdate",
			"rollingUpdate": map[string]any{"maxUnavailable": maxUnavailable},
		}
	}
	return map[string]any{
		"apiVersion": "placement.kubernetes-fleet.io/v1beta1",
		"kind":       "ClusterResourcePlacement",
		"metadata":   map[string]any{"name": name},
		"spec":       spec,
	}
}

// writeYAML writes the documents to path as one multi-document YAML file.
func writeYAML(path string, docs ...map[string]any) error {
	var buf bytes.Buffer
	for i, d := range docs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		data, err := yaml.Marshal(d)
		if err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		buf.Write(data)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func documents(objs []object) []map[string]any {
	docs := make([]map[string]any, len(objs))
	for i, o := range objs {
		docs[i] = o.obj.Object
	}
	return docs
}
