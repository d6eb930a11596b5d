package hubsync_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
	"github.com/flotilla-dev/flotilla/services/hubsync/crds"
)

// The hub's side of a ResourcePlacement, as upstream documents it: a
// ClusterResourcePlacement with selectionScope NamespaceOnly places the namespace, and a
// ResourcePlacement of the same name in it places one ConfigMap of the namespace.
const shopHub = `
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: prices, namespace: shop}
data: {apple: "3"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: not-selected, namespace: shop}
data: {mode: hub-only}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: shop}
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: Namespace, name: shop, selectionScope: NamespaceOnly}
  policy: {placementType: PickAll}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourcePlacement
metadata: {name: shop, namespace: shop}
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: ConfigMap, name: prices}
  policy: {placementType: PickAll}
`

// resourcePlacement is the hub's ResourcePlacement.
func (f *fixture) resourcePlacement(namespace, name string) (*unstructured.Unstructured, error) {
	return f.hub.Resource(crds.ResourcePlacement.GVR()).Namespace(namespace).Get(f.t.Context(), name, metav1.GetOptions{})
}

// TestHubResourcePlacement: a ResourcePlacement applied with kubectl to the hub places the
// ConfigMap it selects on the members, changed by the ResourceOverride that names it (scope
// Namespaced), and shows its status on the hub with the ResourcePlacement condition names,
// beside a ClusterResourcePlacement of the same name that keeps its own; one that selects a
// Namespace is refused at the door; a restarted hubsync publishes nothing again; deleting
// it on the hub removes its ConfigMap from the members and leaves the namespace to its own
// placement.
func TestHubResourcePlacement(t *testing.T) {
	f := newFixture(t)
	f.startHubsync("replica-a")
	f.waitForPass("replica-a", 0)
	f.apply(f.memberClusters())
	f.startWorkers()

	// An override of scope Namespaced names the ResourcePlacement shop, not the
	// ClusterResourcePlacement shop (which does not place the ConfigMap).
	f.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n")
	f.create(crds.Override, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceOverride
metadata: {name: per-cluster, namespace: shop}
spec:
  placement: {name: shop, scope: Namespaced}
  resourceSelectors: [{group: "", version: v1, kind: ConfigMap, name: prices}]
  policy:
    overrideRules:
      - clusterSelector: {clusterSelectorTerms: []}
        jsonPatchOverrides:
          - {op: add, path: /data/cluster, value: "${MEMBER-CLUSTER-NAME}"}
`)
	poll.Every(t, step, patience, "the override to reach Flotilla", func() error {
		_, err := f.q.ResourceOverride(t.Context(), "shop", "per-cluster")
		return err
	})

	f.apply(shopHub)
	crp := f.availableAt("shop")
	var rp *unstructured.Unstructured
	poll.Every(t, step, patience, "the hub's ResourcePlacement shop/shop to show ResourcePlacementApplied=True", func() error {
		var err error
		if rp, err = f.resourcePlacement("shop", "shop"); err != nil {
			return err
		}
		for _, typ := range []api.ClusterResourcePlacementConditionType{api.ClusterResourcePlacementAppliedConditionType, api.ClusterResourcePlacementAvailableConditionType} {
			name := api.ResourcePlacementConditionType(string(typ))
			c, ok := conditionOf(rp, name)
			switch {
			case !ok:
				return fmt.Errorf("no condition %s in %v", name, rp.Object["status"])
			case c.ObservedGeneration != rp.GetGeneration():
				return fmt.Errorf("%s is observed for generation %d, the hub's object is at %d", name, c.ObservedGeneration, rp.GetGeneration())
			case c.Status != metav1.ConditionTrue:
				return fmt.Errorf("%s is %s: %s", name, c.Status, c.Message)
			}
		}
		return nil
	})
	for _, m := range f.members {
		cms := kubernetesFor(f, m).CoreV1().ConfigMaps("shop")
		if cm, err := cms.Get(t.Context(), "prices", metav1.GetOptions{}); err != nil || cm.Data["apple"] != "3" ||
			cm.Data["cluster"] != m {
			t.Errorf("ConfigMap shop/prices on %s: %v %v; want apple 3 and the override's cluster %s", m, cm.Data, err, m)
		}
		if _, err := cms.Get(t.Context(), "not-selected", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap shop/not-selected on %s: %v; want it left on the hub", m, err)
		}
	}

	t.Run("the two placements named shop keep their own status", func(t *testing.T) {
		for _, c := range conditionTypes(rp) {
			if strings.HasPrefix(c, "ClusterResourcePlacement") {
				t.Errorf("the ResourcePlacement's status has %s, want ResourcePlacement names only", c)
			}
		}
		for _, c := range conditionTypes(crp) {
			if strings.HasPrefix(c, "ResourcePlacement") {
				t.Errorf("the ClusterResourcePlacement's status has %s, want its own names only", c)
			}
		}
		if got := selectedKinds(rp); got != "ConfigMap/shop/prices" {
			t.Errorf("the ResourcePlacement's selectedResources are %s, want ConfigMap/shop/prices", got)
		}
		if got := selectedKinds(crp); got != "Namespace//shop" {
			t.Errorf("the ClusterResourcePlacement's selectedResources are %s, want Namespace//shop", got)
		}
		out, err := f.kubectl("", "get", "rp", "-n", "shop")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubectl get rp -n shop:\n%s", out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if header := strings.Join(strings.Fields(lines[0]), " "); header != "NAME GEN SCHEDULED SCHEDULED-GEN AVAILABLE AVAILABLE-GEN AGE" {
			t.Errorf("kubectl get rp columns %q", header)
		}
		if len(lines) != 2 || strings.Fields(lines[1])[0] != "shop" || strings.Fields(lines[1])[2] != "True" || strings.Fields(lines[1])[4] != "True" {
			t.Errorf("kubectl get rp -n shop does not show shop scheduled and available:\n%s", out)
		}
		if out, err := f.kubectl("", "wait", "rp/shop", "-n", "shop", "--for=condition=ResourcePlacementApplied", "--timeout=60s"); err != nil {
			t.Errorf("kubectl wait rp/shop: %v\n%s", err, out)
		}
		if out, err := f.kubectl("", "get", "fleet-placement", "-A"); err != nil || !strings.Contains(out, "resourceplacement.placement.kubernetes-fleet.io/shop") {
			t.Errorf("kubectl get fleet-placement -A does not list the ResourcePlacement: %v\n%s", err, out)
		}
		out, err = f.fleetctl("", "get", "rp", "-n", "shop")
		if err != nil || !strings.Contains(out, "shop") {
			t.Errorf("fleetctl get rp -n shop: %v\n%s", err, out)
		}
		out, err = f.fleetctl("", "delete", "rp", "shop", "-n", "shop")
		if err == nil || !strings.Contains(out+err.Error(), "is kept on the hub cluster") {
			t.Errorf("fleetctl delete of a hub-kept ResourcePlacement: %v\n%s; want it refused", err, out)
		}
	})

	t.Run("a ResourcePlacement selecting a Namespace is refused at the door", func(t *testing.T) {
		out, err := f.kubectl(`
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourcePlacement
metadata: {name: whole-namespace}
spec:
  resourceSelectors: [{group: "", version: v1, kind: Namespace, name: shop}]
`, "apply", "-n", "shop", "-f", "-")
		if err == nil || !strings.Contains(out, `ResourcePlacement "whole-namespace" is invalid: spec.resourceSelectors[0].kind`) {
			t.Errorf("kubectl apply of a ResourcePlacement selecting a Namespace: %v\n%s", err, out)
		}
	})

	t.Run("a restart publishes nothing again", func(t *testing.T) {
		f.stopReplica("replica-a")
		f.startHubsync("replica-b")
		if p := f.waitForPass("replica-b", 0); p.Published != 0 || p.Undone != 0 || len(p.Problems) != 0 {
			t.Errorf("the restarted hubsync's first pass published %d, deleted %d, found problems %v; want nothing", p.Published, p.Undone, p.Problems)
		}
	})

	t.Run("deleting the ResourcePlacement on the hub removes its ConfigMap from the members", func(t *testing.T) {
		if out, err := f.kubectl("", "delete", "rp", "shop", "-n", "shop"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		poll.Every(t, step, patience, "the ResourcePlacement shop/shop to be gone from Flotilla", func() error {
			if _, err := f.q.ResourcePlacement(t.Context(), "shop", "shop"); !errors.Is(err, query.ErrNotFound) {
				return fmt.Errorf("still known: %v", err)
			}
			return nil
		})
		poll.Every(t, step, patience, "ConfigMap shop/prices to leave the members", func() error {
			for _, m := range f.members {
				_, err := kubernetesFor(f, m).CoreV1().ConfigMaps("shop").Get(t.Context(), "prices", metav1.GetOptions{})
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("on %s: %v", m, err)
				}
			}
			return nil
		})
		for _, m := range f.members {
			if _, err := kubernetesFor(f, m).CoreV1().Namespaces().Get(t.Context(), "shop", metav1.GetOptions{}); err != nil {
				t.Errorf("namespace shop on %s: %v; want it kept by its ClusterResourcePlacement", m, err)
			}
		}
		if _, err := f.q.Placement(t.Context(), "shop"); err != nil {
			t.Errorf("the ClusterResourcePlacement shop after the ResourcePlacement's deletion: %v", err)
		}
		if c, ok := conditionOf(f.availableAt("shop"), string(api.ClusterResourcePlacementAvailableConditionType)); !ok || c.Status != metav1.ConditionTrue {
			t.Errorf("the ClusterResourcePlacement shop is no longer available: %+v", c)
		}
	})
}

// conditionTypes are the types of an object's status.conditions.
func conditionTypes(u *unstructured.Unstructured) []string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []string
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok {
			out = append(out, fmt.Sprint(m["type"]))
		}
	}
	return out
}

// selectedKinds lists a placement's status.selectedResources as kind/namespace/name.
func selectedKinds(u *unstructured.Unstructured) string {
	res, _, _ := unstructured.NestedSlice(u.Object, "status", "selectedResources")
	var out []string
	for _, r := range res {
		if m, ok := r.(map[string]any); ok {
			ns, _ := m["namespace"].(string)
			out = append(out, fmt.Sprintf("%v/%s/%v", m["kind"], ns, m["name"]))
		}
	}
	return strings.Join(out, ",")
}
