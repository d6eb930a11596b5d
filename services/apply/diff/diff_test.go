package diff_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/diff"
	"github.com/flotilla-dev/flotilla/services/apply/internal/applytest"
)

func TestCompare(t *testing.T) {
	hub := applytest.Object(t, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: a
  labels: {team: green, flotilla.dev/managed-by: flotilla}
spec:
  replicas: 2
  template:
    metadata:
      creationTimestamp: null
      labels: {app: web}
    spec:
      containers: [{name: web, image: "nginx:1.27"}]
`)
	member := applytest.Object(t, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: b
  uid: x
  resourceVersion: "7"
  generation: 4
  creationTimestamp: "2024-01-01T00:00:00Z"
  managedFields: [{manager: kubectl}]
  finalizers: [f]
  labels: {team: blue, extra: someone}
  annotations:
    deployment.kubernetes.io/revision: "3"
    kubectl.kubernetes.io/last-applied-configuration: "{}"
    kubernetes-fleet.io/x: "y"
spec:
  replicas: 3
  template:
    metadata:
      labels: {app: web}
    spec:
      containers: [{name: web, image: "nginx:1.25"}]
status: {replicas: 3}
`)
	got, err := diff.Compare(hub, member)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.PatchDetail{
		{Path: "/metadata/labels/extra", ValueInMember: "someone"},
		{Path: "/metadata/labels/team", ValueInHub: "green", ValueInMember: "blue"},
		{Path: "/spec/replicas", ValueInHub: "2", ValueInMember: "3"},
		{Path: "/spec/template/spec/containers/0/image", ValueInHub: "nginx:1.27", ValueInMember: "nginx:1.25"},
	}
	slices.SortFunc(got, func(a, b api.PatchDetail) int {
		if a.Path < b.Path {
			return -1
		}
		return 1
	})
	if !slices.Equal(got, want) {
		t.Errorf("diffs:\n got %+v\nwant %+v", got, want)
	}
	if diff.Digest(hub) == diff.Digest(member) {
		t.Error("different objects have the same digest")
	}
	same := member.DeepCopy()
	unstructured.SetNestedField(same.Object, "8", "metadata", "resourceVersion")
	unstructured.SetNestedField(same.Object, int64(4), "status", "replicas")
	if diff.Digest(same) != diff.Digest(member) {
		t.Error("a status-only change changed the digest")
	}
}

func TestSecretValuesAreRedacted(t *testing.T) {
	hub := applytest.Object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {password: aHVi, new: eA==}\n")
	member := applytest.Object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s, labels: {a: b}}\ndata: {password: bWVtYmVy, old: eQ==}\n")
	got, err := diff.Compare(hub, member)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("diffs = %+v", got)
	}
	for _, d := range got {
		if strings.HasPrefix(d.Path, "/metadata") {
			if d.ValueInMember == diff.Redacted {
				t.Errorf("non-secret field redacted: %+v", d)
			}
			continue
		}
		for _, v := range []string{d.ValueInHub, d.ValueInMember} {
			if v != "" && v != diff.Redacted {
				t.Errorf("secret value in %+v", d)
			}
		}
	}
}

func TestIgnoredKey(t *testing.T) {
	for key, want := range map[string]bool{
		"kubernetes.io/metadata.name":                      true,
		"kubectl.kubernetes.io/last-applied-configuration": true,
		"app.k8s.io/name":                                  true,
		"kubernetes-fleet.io/envelope-configmap":           true,
		"placement.flotilla.dev/web":                       true,
		"team":                                             false,
		"example.com/kubernetes.io":                        false,
		"notkubernetes.io/x":                               false,
	} {
		if got := diff.IgnoredKey(key); got != want {
			t.Errorf("IgnoredKey(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestDropAllocated(t *testing.T) {
	manifest := applytest.Object(t, "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n")
	live := applytest.Object(t, "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {clusterIP: 10.0.0.1, clusterIPs: [10.0.0.1], type: NodePort, ports: [{port: 80, nodePort: 30001}]}\n")
	fresh := applytest.Object(t, "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {clusterIP: 10.0.0.9, clusterIPs: [10.0.0.9], type: NodePort, ports: [{port: 80, nodePort: 30444}]}\n")
	diff.DropAllocated(live, manifest)
	diff.DropAllocated(fresh, manifest)
	if d, _ := diff.Compare(fresh, live); len(d) != 0 {
		t.Errorf("allocated fields still differ: %+v", d)
	}
}
