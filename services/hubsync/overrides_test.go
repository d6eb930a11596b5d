package hubsync_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
	"github.com/flotilla-dev/flotilla/services/hubsync/crds"
)

// create is a program creating an object on the hub with the dynamic client, as kubectl
// create does.
func (f *fixture) create(k crds.Kind, manifest string) {
	f.t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.hub.Resource(k.GVR()).Namespace(u.GetNamespace()).Create(f.t.Context(), u, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("create %s %s on the hub: %v", k.GVK.Kind, u.GetName(), err)
	}
}

// TestHubOverridesAndEvictions: an override (its patch's value a string, as kubectl writes it),
// a staged update strategy and run, a disruption budget and evictions created on the
// hub reach Flotilla; the override changes what the members get, and each eviction's verdict
// comes back into its status on the hub, as kubectl get crpe shows it.
func TestHubOverridesAndEvictions(t *testing.T) {
	f := newFixture(t)
	f.startHubsync("replica-a")
	f.waitForPass("replica-a", 0)
	f.apply(f.memberClusters())
	f.startWorkers()

	f.apply(webHub)
	f.create(crds.Override, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceOverride
metadata: {name: color, namespace: web}
spec:
  placement: {name: web}
  resourceSelectors: [{group: "", version: v1, kind: ConfigMap, name: settings}]
  policy:
    overrideRules:
      - clusterSelector: {clusterSelectorTerms: []}
        jsonPatchOverrides:
          - {op: replace, path: /data/color, value: "${MEMBER-CLUSTER-NAME}"}
`)
	poll.Every(t, step, patience, "the override to reach Flotilla", func() error {
		_, err := f.q.ResourceOverride(t.Context(), "web", "color")
		return err
	})
	f.apply(webCRP("web", "100%"))
	f.availableAt("web")
	for _, m := range f.members {
		cm, err := kubernetesFor(f, m).CoreV1().ConfigMaps("web").Get(t.Context(), "settings", metav1.GetOptions{})
		if err != nil || cm.Data["color"] != m {
			t.Errorf("ConfigMap web/settings on %s: %v %v; want the override's color %s", m, cm.Data, err, m)
		}
	}

	f.create(crds.DisruptionBudget, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacementDisruptionBudget
metadata: {name: web}
spec: {minAvailable: 1}
`)
	poll.Every(t, step, patience, "the disruption budget to reach Flotilla", func() error {
		_, err := f.q.DisruptionBudget(t.Context(), "web")
		return err
	})

	f.create(crds.Eviction, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacementEviction
metadata: {name: web-member-1}
spec: {placementName: web, clusterName: member-1}
`)
	f.create(crds.Eviction, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacementEviction
metadata: {name: nowhere}
spec: {placementName: no-such-placement, clusterName: member-1}
`)
	verdict := func(name, typ string) metav1.Condition {
		t.Helper()
		var c metav1.Condition
		poll.Every(t, step, patience, "eviction "+name+" to show "+typ+" on the hub", func() error {
			u, err := f.hub.Resource(crds.Eviction.GVR()).Get(t.Context(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			var ok bool
			if c, ok = conditionOf(u, typ); !ok {
				return fmt.Errorf("no condition %s in %v", typ, u.Object["status"])
			}
			if c.ObservedGeneration != u.GetGeneration() {
				return fmt.Errorf("%s observed generation %d, the hub's is %d", typ, c.ObservedGeneration, u.GetGeneration())
			}
			return nil
		})
		return c
	}
	// Two of two clusters available and at least one must stay: the budget lets one go.
	if c := verdict("web-member-1", api.EvictionConditionExecuted); c.Status != metav1.ConditionTrue {
		t.Errorf("eviction web-member-1: Executed %s %s: %s", c.Status, c.Reason, c.Message)
	}
	if c := verdict("nowhere", api.EvictionConditionValid); c.Status != metav1.ConditionFalse || c.Message != api.EvictionInvalidMissingCRPMessage {
		t.Errorf("eviction nowhere: Valid %s %s: %q, want False: %q", c.Status, c.Reason, c.Message, api.EvictionInvalidMissingCRPMessage)
	}
	out, err := f.kubectl("", "get", "crpe")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl get crpe:\n%s", out)
	if header := strings.Fields(strings.SplitN(out, "\n", 2)[0]); strings.Join(header, " ") != "NAME VALID EXECUTED AGE" {
		t.Errorf("kubectl get crpe columns %v, want NAME VALID EXECUTED AGE", header)
	}
	if !strings.Contains(out, "nowhere") || !strings.Contains(out, "False") {
		t.Errorf("kubectl get crpe does not show the invalid eviction:\n%s", out)
	}

	// A staged update run of a placement that is not External fails to initialise, and says
	// so on the hub.
	f.create(crds.StagedUpdateStrategy, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateStrategy
metadata: {name: all-at-once}
spec:
  stages: [{name: all, labelSelector: {}}]
`)
	f.create(crds.StagedUpdateRun, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateRun
metadata: {name: web-run}
spec: {placementName: web, resourceSnapshotIndex: "0", stagedRolloutStrategyName: all-at-once}
`)
	poll.Every(t, step, patience, "the strategy to reach Flotilla", func() error {
		_, err := f.q.StagedUpdateStrategy(t.Context(), "all-at-once")
		return err
	})
	poll.Every(t, step, patience, "run web-run to show Initialized on the hub", func() error {
		u, err := f.hub.Resource(crds.StagedUpdateRun.GVR()).Get(t.Context(), "web-run", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c, ok := conditionOf(u, api.UpdateRunConditionInitialized)
		if !ok {
			return fmt.Errorf("no condition Initialized in %v", u.Object["status"])
		}
		if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "does not use the External rollout strategy type") {
			t.Errorf("run web-run: Initialized %s %s: %q, want False: not External", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	if out, err := f.kubectl("", "get", "csur"); err != nil || !strings.Contains(out, "INITIALIZED") {
		t.Errorf("kubectl get csur: %v\n%s", err, out)
	} else {
		t.Logf("kubectl get csur:\n%s", out)
	}

	// Deleting the eviction on the hub deletes it in Flotilla too.
	if out, err := f.kubectl("", "delete", "crpe", "nowhere"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	poll.Every(t, step, patience, "eviction nowhere to be gone from Flotilla", func() error {
		if _, err := f.q.Eviction(t.Context(), "nowhere"); !errors.Is(err, query.ErrNotFound) {
			return fmt.Errorf("still known: %v", err)
		}
		return nil
	})

	// fleetctl drain and uncordon of a hub-kept member set and remove the cordon taint on
	// the hub, where hubsync brings it from. PickAll picked member-1 again after its
	// eviction; the budget lets member-2 go once both are available.
	poll.Every(t, step, patience, "web available on both members again", func() error {
		crp, err := f.q.Placement(t.Context(), "web")
		if err != nil {
			return err
		}
		available := 0
		for _, ps := range crp.Status.PlacementStatuses {
			if meta.IsStatusConditionTrue(ps.Conditions, string(api.PerClusterAvailableConditionType)) {
				available++
			}
		}
		if available != len(f.members) {
			return fmt.Errorf("available on %d member(s)", available)
		}
		return nil
	})
	// The scheduler judges the budget from what it has heard of availability, which can
	// lag the status just read: a drain it refuses says to run it again, as a user would.
	poll.Every(t, step, patience, "fleetctl drain member-2 to drain it", func() error {
		out, err := f.fleetctl("", "drain", "member-2", "--hub-kubeconfig", f.kube.Kubeconfig("hub"))
		t.Logf("fleetctl drain member-2:\n%s", out)
		if err != nil || !strings.Contains(out, "drained member-2") {
			return fmt.Errorf("fleetctl drain of a hub-kept member: %v", err)
		}
		return nil
	})
	hubTaints := func() []any {
		u, err := f.hub.Resource(crds.Member.GVR()).Get(t.Context(), "member-2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		taints, _, _ := unstructured.NestedSlice(u.Object, "spec", "taints")
		return taints
	}
	if taints := hubTaints(); len(taints) != 1 || taints[0].(map[string]any)["key"] != api.CordonTaint.Key {
		t.Errorf("the hub's member-2 has taints %v, want the cordon taint", taints)
	}
	if out, err := f.fleetctl("", "uncordon", "member-2", "--hub-kubeconfig", f.kube.Kubeconfig("hub")); err != nil {
		t.Errorf("fleetctl uncordon of a hub-kept member: %v\n%s", err, out)
	}
	if taints := hubTaints(); len(taints) != 0 {
		t.Errorf("the hub's member-2 has taints %v after uncordon, want none", taints)
	}
	m, err := f.q.Member(t.Context(), "member-2")
	if err != nil || len(m.Spec.Taints) != 0 {
		t.Errorf("Flotilla's member-2 after uncordon: taints %v, %v", m, err)
	}
}
