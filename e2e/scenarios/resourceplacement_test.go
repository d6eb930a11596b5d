package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// TestResourcePlacement follows upstream's ResourcePlacement documentation: a
// ClusterResourcePlacement with selectionScope NamespaceOnly places the namespace on two
// clusters, and a namespaced ResourcePlacement in it (PickAll) places one ConfigMap of the
// namespace (not the others) where the namespace is, and only there, with a ResourceOverride
// that names the ResourcePlacement (placement scope Namespaced) labelling it per cluster. A
// namespace created on a third cluster by hand brings the ResourcePlacement there too (the
// members' heartbeats report their namespaces, as upstream's MemberCluster status does).
// fleetctl shows it as a ResourcePlacement with the ResourcePlacement condition names (get
// rp, describe rp, wait rp). A ResourcePlacement naming a cluster without its namespace is
// not scheduled there, saying why; one that selects a Namespace is refused before anything is
// published; deleting the ResourcePlacement removes its objects and leaves the namespaces.
func TestResourcePlacement(t *testing.T) {
	s := fleetFor(t)
	s.deleteAtEnd(t, "crp-rp-namespace")
	t.Cleanup(func() {
		// t.Context() is done by the time cleanups run.
		_, _, _ = s.fleetctl(context.Background(), "", "delete", "rp", "app-config", "elsewhere", "-n", "rp-demo")
	})
	s.apply(t, `
apiVersion: v1
kind: Namespace
metadata: {name: rp-demo}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config, namespace: rp-demo, labels: {app: demo}}
data: {mode: placed}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: not-selected, namespace: rp-demo}
data: {mode: hub-only}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: crp-rp-namespace}
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: Namespace, name: rp-demo, selectionScope: NamespaceOnly}
  policy:
    placementType: PickFixed
    clusterNames: [member-1, member-2]
`)
	s.converged(t, "crp-rp-namespace", 1)

	out := s.apply(t, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourcePlacement
metadata: {name: app-config, namespace: rp-demo}
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: ConfigMap, name: app-config}
---
apiVersion: placement.kubernetes-fleet.io/v1alpha1
kind: ResourceOverride
metadata: {name: per-cluster, namespace: rp-demo}
spec:
  placement: {name: app-config, scope: Namespaced}
  resourceSelectors:
  - {group: "", version: v1, kind: ConfigMap, name: app-config}
  policy:
    overrideRules:
    - clusterSelector: {clusterSelectorTerms: []}
      jsonPatchOverrides:
      - {op: add, path: /metadata/labels/cluster, value: "${MEMBER-CLUSTER-NAME}"}
`)
	if !strings.Contains(out, "resourceplacement.placement.kubernetes-fleet.io/app-config") {
		t.Errorf("fleetctl apply did not name the ResourcePlacement:\n%s", out)
	}
	s.run(t, "wait", "rp", "app-config", "-n", "rp-demo", "--for=condition=Available", "--timeout="+patience.String())
	placedOn := func(members ...string) {
		t.Helper()
		for _, m := range members {
			poll.Every(t, step, patience, "app-config with its override on "+m, func() error {
				cm, err := s.member(m).CoreV1().ConfigMaps("rp-demo").Get(t.Context(), "app-config", metav1.GetOptions{})
				if err != nil {
					return err
				}
				if cm.Data["mode"] != "placed" || cm.Labels["cluster"] != m {
					return fmt.Errorf("data %v, labels %v", cm.Data, cm.Labels)
				}
				return nil
			})
			if _, err := s.member(m).CoreV1().ConfigMaps("rp-demo").Get(t.Context(), "not-selected", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("not-selected on %s: %v (want not found: the ResourcePlacement selects app-config only)", m, err)
			}
		}
	}
	placedOn("member-1", "member-2")

	// Available may come on member-1 alone, when member-2's namespace reached the
	// scheduler after its first decision: the status follows the second.
	var rp *api.ClusterResourcePlacement
	poll.Every(t, step, patience, "app-config scheduled on member-1 and member-2, with its conditions True", func() (err error) {
		if rp, err = s.tryResourcePlacement(t, "rp-demo", "app-config"); err != nil {
			return err
		}
		if got := scheduledClusters(rp); strings.Join(got, ",") != "member-1,member-2" {
			return fmt.Errorf("PickAll scheduled on %v, want the clusters with namespace rp-demo: member-1, member-2", got)
		}
		for _, typ := range []string{"ResourcePlacementScheduled", "ResourcePlacementApplied", "ResourcePlacementAvailable"} {
			if err := conditionTrue(rp.Status.Conditions, typ, rp.Generation); err != nil {
				return err
			}
		}
		return nil
	})
	if rp.Kind != api.ResourcePlacementKind || rp.Namespace != "rp-demo" || rp.Name != "app-config" {
		t.Errorf("fleetctl get rp -o json: %s %s/%s", rp.Kind, rp.Namespace, rp.Name)
	}
	if c := meta.FindStatusCondition(rp.Status.Conditions, string(api.ClusterResourcePlacementAppliedConditionType)); c != nil {
		t.Errorf("a ResourcePlacement shows %s", c.Type)
	}
	table := s.run(t, "get", "rp", "-A")
	if !strings.Contains(table, "NAMESPACE") || !strings.Contains(table, "rp-demo") || !strings.Contains(table, "app-config") {
		t.Errorf("fleetctl get rp -A:\n%s", table)
	}
	if crps := s.run(t, "get", "crp"); strings.Contains(crps, "app-config") {
		t.Errorf("fleetctl get crp lists the ResourcePlacement:\n%s", crps)
	}
	if d := s.run(t, "describe", "rp", "app-config", "-n", "rp-demo"); !strings.Contains(d, "Namespace:") || !strings.Contains(d, "ResourcePlacementApplied") {
		t.Errorf("fleetctl describe rp:\n%s", d)
	}

	// The namespace created on member-3 outside Flotilla: the ResourcePlacement follows it.
	if _, err := s.member("member-3").CoreV1().Namespaces().Create(t.Context(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rp-demo"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.member("member-3").CoreV1().Namespaces().Delete(context.Background(), "rp-demo", metav1.DeleteOptions{})
	})
	placedOn("member-3")

	// A cluster named outright but without the namespace is not scheduled, and says why.
	s.apply(t, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourcePlacement
metadata: {name: elsewhere, namespace: rp-demo}
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: ConfigMap, name: app-config}
  policy:
    placementType: PickFixed
    clusterNames: [member-4]
`)
	poll.Every(t, step, patience, "the ResourcePlacement naming member-4, which has no rp-demo, to be unscheduled", func() error {
		p, err := s.tryResourcePlacement(t, "rp-demo", "elsewhere")
		if err != nil {
			return err // not known to the status service yet
		}
		c := meta.FindStatusCondition(p.Status.Conditions, "ResourcePlacementScheduled")
		if c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("ResourcePlacementScheduled: %+v", c)
		}
		cs := clusterStatus(p, "member-4")
		if cs == nil {
			return fmt.Errorf("no status for member-4: %+v", p.Status.PlacementStatuses)
		}
		sc := meta.FindStatusCondition(cs.Conditions, "Scheduled")
		if sc == nil || !strings.Contains(sc.Message, `does not have the namespace "rp-demo"`) {
			return fmt.Errorf("member-4 Scheduled: %+v", sc)
		}
		t.Logf("member-4 without the namespace: %s", sc.Message)
		return nil
	})

	// A ResourcePlacement never selects a Namespace.
	_, errOut, err := s.fleetctl(t.Context(), `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourcePlacement
metadata: {name: whole-namespace, namespace: rp-demo}
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: Namespace, name: rp-demo}
`, "apply", "-f", "-")
	if err == nil || !strings.Contains(errOut, "a ResourcePlacement cannot select Namespaces") {
		t.Errorf("fleetctl apply of a ResourcePlacement selecting a Namespace: %v\n%s", err, errOut)
	}

	s.run(t, "delete", "rp", "app-config", "elsewhere", "-n", "rp-demo")
	s.run(t, "wait", "rp", "app-config", "elsewhere", "-n", "rp-demo", "--for=delete", "--timeout="+patience.String())
	for _, m := range []string{"member-1", "member-2", "member-3"} {
		poll.Every(t, step, patience, "app-config gone from "+m+", rp-demo kept", func() error {
			if _, err := s.member(m).CoreV1().ConfigMaps("rp-demo").Get(t.Context(), "app-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("app-config: %v", err)
			}
			_, err := s.member(m).CoreV1().Namespaces().Get(t.Context(), "rp-demo", metav1.GetOptions{})
			return err
		})
	}
}

// tryResourcePlacement is `fleetctl get rp NAME -n NAMESPACE -o json`, decoded.
func (s *stack) tryResourcePlacement(t *testing.T, namespace, name string) (*api.ClusterResourcePlacement, error) {
	t.Helper()
	out, errOut, err := s.fleetctl(t.Context(), "", "get", "rp", name, "-n", namespace, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("fleetctl get rp %s -n %s -o json: %v %s", name, namespace, err, errOut)
	}
	var rp api.ClusterResourcePlacement
	if err := json.Unmarshal([]byte(out), &rp); err != nil {
		return nil, fmt.Errorf("fleetctl get rp -o json printed what is not a placement: %v\n%s", err, out)
	}
	return &rp, nil
}
