package manifest_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// needsOf decodes YAML documents and returns, per object, "Kind/name" of
// what it needs, sorted.
func needsOf(t *testing.T, docs ...string) map[string][]string {
	t.Helper()
	objs := make([]*unstructured.Unstructured, len(docs))
	waves := make([]int, len(docs))
	for i, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatal(err)
		}
		objs[i] = u
		waves[i] = manifest.WaveOf(u.GroupVersionKind().GroupKind())
	}
	out := map[string][]string{}
	for i, needs := range manifest.Needs(objs, waves) {
		var names []string
		for _, j := range needs {
			names = append(names, objs[j].GetKind()+"/"+objs[j].GetName())
		}
		slices.Sort(names)
		out[objs[i].GetKind()+"/"+objs[i].GetName()] = names
	}
	return out
}

func TestNeeds(t *testing.T) {
	got := needsOf(t,
		`{apiVersion: v1, kind: Namespace, metadata: {name: app}}`,
		`{apiVersion: v1, kind: ServiceAccount, metadata: {name: web, namespace: app}}`,
		`{apiVersion: v1, kind: ServiceAccount, metadata: {name: other, namespace: app}}`,
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: env, namespace: app}}`,
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: files, namespace: app}}`,
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: unused, namespace: app}}`,
		`{apiVersion: v1, kind: Secret, metadata: {name: pull, namespace: app}}`,
		`{apiVersion: v1, kind: Secret, metadata: {name: key, namespace: app}}`,
		`{apiVersion: v1, kind: LimitRange, metadata: {name: limits, namespace: app}}`,
		`{apiVersion: v1, kind: ResourceQuota, metadata: {name: quota, namespace: other}}`,
		`{apiVersion: networking.k8s.io/v1, kind: NetworkPolicy, metadata: {name: deny, namespace: app}}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: Role, metadata: {name: reader, namespace: app}}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: viewer}}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: web-reads, namespace: app},
		  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader},
		  subjects: [{kind: ServiceAccount, name: web}]}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRoleBinding, metadata: {name: other-views},
		  roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: viewer},
		  subjects: [{kind: ServiceAccount, name: other, namespace: app}]}`,
		`{apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: fast}}`,
		`{apiVersion: v1, kind: PersistentVolumeClaim, metadata: {name: data, namespace: app}, spec: {storageClassName: fast}}`,
		`{apiVersion: v1, kind: Service, metadata: {name: web, namespace: app}}`,
		`{apiVersion: apps/v1, kind: Deployment, metadata: {name: web, namespace: app},
		  spec: {template: {spec: {serviceAccountName: web, imagePullSecrets: [{name: pull}],
		    volumes: [{name: f, configMap: {name: files}}, {name: d, persistentVolumeClaim: {claimName: data}}],
		    containers: [{name: c, envFrom: [{configMapRef: {name: env}}],
		      env: [{name: K, valueFrom: {secretKeyRef: {name: key, key: k}}}, {name: M, valueFrom: {configMapKeyRef: {name: missing, key: k}}}]}]}}}}`,
		`{apiVersion: batch/v1, kind: CronJob, metadata: {name: report, namespace: app},
		  spec: {jobTemplate: {spec: {template: {spec: {serviceAccountName: other, containers: [{name: c}]}}}}}}`,
		`{apiVersion: example.com/v1, kind: Widget, metadata: {name: w, namespace: app}}`,
	)
	want := map[string]string{
		"Namespace/app":                  "",
		"ServiceAccount/web":             "Namespace/app",
		"ConfigMap/unused":               "Namespace/app",
		"ClusterRole/viewer":             "",
		"Role/reader":                    "Namespace/app",
		"RoleBinding/web-reads":          "Namespace/app Role/reader",
		"ClusterRoleBinding/other-views": "ClusterRole/viewer",
		"PersistentVolumeClaim/data":     "Namespace/app StorageClass/fast",
		"Service/web":                    "Namespace/app",
		// Not the unused ConfigMap, the other account, or the quota of
		// another namespace; the missing ConfigMap is not in the set.
		"Deployment/web": "ConfigMap/env ConfigMap/files LimitRange/limits Namespace/app NetworkPolicy/deny PersistentVolumeClaim/data RoleBinding/web-reads Secret/key Secret/pull ServiceAccount/web",
		"CronJob/report": "ClusterRoleBinding/other-views LimitRange/limits Namespace/app NetworkPolicy/deny ServiceAccount/other",
		// Custom resources wait for whole waves, not listed needs.
		"Widget/w": "",
	}
	for obj, w := range want {
		if g := strings.Join(got[obj], " "); g != w {
			t.Errorf("%s needs %q\nwant %q", obj, g, w)
		}
	}
}

// TestNeedsFollowWaves: an object never needs one of its own wave or a
// later one, whatever it names, so the order has no cycles.
func TestNeedsFollowWaves(t *testing.T) {
	got := needsOf(t,
		`{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: app}, spec: {serviceAccountName: a}}`,
		// A binding whose role is a wave later than bindings can be.
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: RoleBinding, metadata: {name: b, namespace: app},
		  roleRef: {kind: Role, name: b}, subjects: [{kind: ServiceAccount, name: a}]}`,
		// A Deployment pretending to be a ServiceAccount's dependency.
		`{apiVersion: apps/v1, kind: Deployment, metadata: {name: a, namespace: app}, spec: {template: {spec: {serviceAccountName: a}}}}`,
		`{apiVersion: v1, kind: ServiceAccount, metadata: {name: a, namespace: app}}`,
	)
	if g := strings.Join(got["Pod/a"], " "); g != "RoleBinding/b ServiceAccount/a" {
		t.Errorf("Pod/a needs %q", g)
	}
	if g := got["ServiceAccount/a"]; len(g) != 0 {
		t.Errorf("ServiceAccount/a needs %v", g)
	}
}

func TestNeedsSkipsUndecoded(t *testing.T) {
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "app"}}}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "app"}}}
	needs := manifest.Needs([]*unstructured.Unstructured{nil, ns, cm}, []int{manifest.WaveOther, manifest.WaveFoundation, manifest.WaveConfig})
	if len(needs[0]) != 0 || len(needs[1]) != 0 || !slices.Equal(needs[2], []int{1}) {
		t.Errorf("needs = %v", needs)
	}
}
