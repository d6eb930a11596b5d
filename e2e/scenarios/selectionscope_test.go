package scenarios

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// TestSelectionScopes: upstream's selectionScope on a Namespace selector. NamespaceOnly
// places the namespace without what is in it; NamespaceWithResourceSelectors places the
// namespace and what the placement's other selectors select in it (the Deployments labelled
// tier=frontend, as upstream's example), and a cluster-scoped object they name.
func TestSelectionScopes(t *testing.T) {
	s := fleetFor(t)
	s.deleteAtEnd(t, "crp-scope-only", "crp-scope-selected")
	s.apply(t, `
apiVersion: v1
kind: Namespace
metadata: {name: scope-only}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: scope-only}
data: {a: b}
---
apiVersion: v1
kind: Namespace
metadata: {name: scope-selected}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: frontend, namespace: scope-selected, labels: {tier: frontend}}
spec:
  replicas: 0
  selector: {matchLabels: {app: frontend}}
  template:
    metadata: {labels: {app: frontend}}
    spec: {containers: [{name: web, image: nginx}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: backend, namespace: scope-selected, labels: {tier: backend}}
spec:
  replicas: 0
  selector: {matchLabels: {app: backend}}
  template:
    metadata: {labels: {app: backend}}
    spec: {containers: [{name: api, image: nginx}]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: scope-selected-admin}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: crp-scope-only}
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: Namespace, name: scope-only, selectionScope: NamespaceOnly}
  policy: {placementType: PickFixed, clusterNames: [member-1]}
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterResourcePlacement
metadata: {name: crp-scope-selected}
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: Namespace, name: scope-selected, selectionScope: NamespaceWithResourceSelectors}
  - {group: apps, version: v1, kind: Deployment, labelSelector: {matchLabels: {tier: frontend}}}
  - {group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole, name: scope-selected-admin}
  policy: {placementType: PickFixed, clusterNames: [member-1]}
`)
	only := s.converged(t, "crp-scope-only", 1)
	if want := []api.ResourceIdentifier{{Version: "v1", Kind: "Namespace", Name: "scope-only"}}; !sameResources(only.Status.SelectedResources, want) {
		t.Errorf("crp-scope-only selected %+v, want the namespace only", only.Status.SelectedResources)
	}
	selected := s.converged(t, "crp-scope-selected", 1)
	want := []api.ResourceIdentifier{
		{Version: "v1", Kind: "Namespace", Name: "scope-selected"},
		{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "scope-selected", Name: "frontend"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "scope-selected-admin"},
	}
	if !sameResources(selected.Status.SelectedResources, want) {
		t.Errorf("crp-scope-selected selected %+v, want %+v", selected.Status.SelectedResources, want)
	}

	m := s.member("member-1")
	poll.Every(t, step, patience, "the selected objects on member-1", func() error {
		if _, err := m.CoreV1().Namespaces().Get(t.Context(), "scope-only", metav1.GetOptions{}); err != nil {
			return err
		}
		if _, err := m.CoreV1().ConfigMaps("scope-only").Get(t.Context(), "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ConfigMap scope-only/settings with NamespaceOnly: %v, want none", err)
		}
		if _, err := m.AppsV1().Deployments("scope-selected").Get(t.Context(), "frontend", metav1.GetOptions{}); err != nil {
			return err
		}
		if _, err := m.AppsV1().Deployments("scope-selected").Get(t.Context(), "backend", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Deployment backend, which no selector selects: %v, want none", err)
		}
		_, err := m.RbacV1().ClusterRoles().Get(t.Context(), "scope-selected-admin", metav1.GetOptions{})
		return err
	})
}
