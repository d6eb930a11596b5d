package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// The placements of the eviction scenario, after upstream's how-to "Evicting resources and
// setting up disruption budgets": a PickAll placement of a namespace with a budget of
// minAvailable 3 (an integer, as PickAll requires), and a PickFixed one.
const evictionScenario = `
apiVersion: v1
kind: Namespace
metadata: {name: drain-demo}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: crp-drain}
spec:
  resourceSelectors:
  - {group: "", kind: Namespace, version: v1, name: drain-demo}
  policy:
    placementType: PickAll
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacementDisruptionBudget
metadata: {name: crp-drain}
spec:
  minAvailable: 3
---
apiVersion: v1
kind: Namespace
metadata: {name: drain-fixed}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: crp-drain-fixed}
spec:
  resourceSelectors:
  - {group: "", kind: Namespace, version: v1, name: drain-fixed}
  policy:
    placementType: PickFixed
    clusterNames: [member-2]
`

// TestDrainUnderADisruptionBudget: fleetctl drain cordons member-4 and evicts the PickAll
// placement from it, which the budget allows (4 of 4 available, 3 must stay); the namespace
// goes from member-4 and the cordon keeps it from coming back. Draining member-3 next is
// refused by the budget with upstream's reason and message, and leaves the namespace there.
// An eviction of a PickFixed placement is invalid.
func TestDrainUnderADisruptionBudget(t *testing.T) {
	s := fleetFor(t)
	s.deleteAtEnd(t, "crp-drain", "crp-drain-fixed")
	t.Cleanup(func() {
		for _, m := range []string{"member-3", "member-4"} {
			if out, err := s.kubectl(context.Background(), "", "patch", "membercluster", m, "--type", "merge", "-p", `{"spec":{"taints":null}}`); err != nil {
				t.Errorf("uncordon %s on the hub: %v\n%s", m, err, out)
			}
		}
		for _, args := range [][]string{{"delete", "crpdb", "crp-drain"}, {"delete", "crpe", "evict-fixed"}} {
			if out, errOut, err := s.fleetctl(context.Background(), "", args...); err != nil {
				t.Errorf("fleetctl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
			}
		}
	})
	s.apply(t, evictionScenario)
	crp := s.converged(t, "crp-drain", 1)
	if got := scheduledClusters(crp); len(got) != 4 {
		t.Fatalf("crp-drain scheduled on %v, want the four members", got)
	}
	s.converged(t, "crp-drain-fixed", 1)
	if out := s.run(t, "get", "crpdb", "crp-drain"); !strings.Contains(out, "crp-drain") || !strings.Contains(out, "3") {
		t.Errorf("fleetctl get crpdb:\n%s", out)
	}

	// The stack keeps its members on the hub cluster (hubsync), where the cordon goes: drain
	// says so, then finds the member cordoned and evicts.
	_, _, err := s.fleetctl(t.Context(), "", "drain", "member-4")
	if err == nil || !strings.Contains(err.Error(), "is kept on the hub cluster: set its cordon taint there") {
		t.Fatalf("drain of a hub-kept member before its cordon: %v", err)
	}
	s.cordonOnHub(t, "member-4")
	out := s.run(t, "drain", "member-4")
	t.Logf("fleetctl drain member-4:\n%s", out)
	for _, want := range []string{"cordoned member cluster member-4",
		"Eviction is allowed by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 4, totalPlacements: 4",
		"drained member-4"} {
		if !strings.Contains(out, want) {
			t.Errorf("drain output lacks %q", want)
		}
	}
	poll.Every(t, step, patience, "drain-demo gone from member-4", func() error {
		_, err := s.member("member-4").CoreV1().Namespaces().Get(t.Context(), "drain-demo", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace on member-4: %v", err)
		}
		return nil
	})
	s.placementWhen(t, "crp-drain", "crp-drain on three members", func(crp *api.ClusterResourcePlacement) error {
		if got := scheduledClusters(crp); len(got) != 3 || slices.Contains(got, "member-4") {
			return fmt.Errorf("scheduled on %v", got)
		}
		return nil
	})
	var mc api.MemberCluster
	if err := json.Unmarshal([]byte(s.run(t, "get", "member", "member-4", "-o", "json")), &mc); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(mc.Spec.Taints, api.CordonTaint) {
		t.Errorf("member-4 taints %+v, want the cordon taint", mc.Spec.Taints)
	}

	// 3 of 3 available and minAvailable 3: no more.
	s.cordonOnHub(t, "member-3")
	out, errOut, err := s.fleetctl(t.Context(), "", "drain", "member-3")
	t.Logf("fleetctl drain member-3:\n%s%s", out, errOut)
	if err == nil || !strings.Contains(err.Error(), "drain of member-3 is not complete") {
		t.Errorf("drain of member-3: error %v, want it not complete", err)
	}
	blocked := "Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 3, totalPlacements: 3"
	if !strings.Contains(out, blocked) {
		t.Errorf("drain output lacks %q", blocked)
	}
	var evictions []api.ClusterResourcePlacementEviction
	var list struct {
		Items []api.ClusterResourcePlacementEviction `json:"items"`
	}
	if err := json.Unmarshal([]byte(s.run(t, "get", "crpe", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Spec.ClusterName == "member-3" && e.Spec.PlacementName == "crp-drain" {
			evictions = append(evictions, e)
		}
	}
	if len(evictions) != 1 {
		t.Fatalf("evictions of crp-drain on member-3: %+v", evictions)
	}
	t.Cleanup(func() { s.fleetctl(context.Background(), "", "delete", "crpe", evictions[0].Name) }) //nolint:errcheck // best effort
	c := meta.FindStatusCondition(evictions[0].Status.Conditions, api.EvictionConditionExecuted)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != api.EvictionNotExecutedReason || c.Message != blocked {
		t.Errorf("Executed of %s = %+v, want False %s %q", evictions[0].Name, c, api.EvictionNotExecutedReason, blocked)
	}
	if _, err := s.member("member-3").CoreV1().Namespaces().Get(t.Context(), "drain-demo", metav1.GetOptions{}); err != nil {
		t.Errorf("the refused eviction removed drain-demo from member-3: %v", err)
	}

	s.apply(t, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacementEviction
metadata: {name: evict-fixed}
spec: {placementName: crp-drain-fixed, clusterName: member-2}
`)
	var fixed api.ClusterResourcePlacementEviction
	poll.Every(t, step, patience, "evict-fixed to run", func() error {
		o, errOut, err := s.fleetctl(t.Context(), "", "get", "crpe", "evict-fixed", "-o", "json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		if err := json.Unmarshal([]byte(o), &fixed); err != nil {
			return err
		}
		if len(fixed.Status.Conditions) == 0 {
			return fmt.Errorf("no conditions yet")
		}
		return nil
	})
	c = meta.FindStatusCondition(fixed.Status.Conditions, api.EvictionConditionValid)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != api.EvictionInvalidReason || c.Message != api.EvictionInvalidPickFixedCRPMessage {
		t.Errorf("Valid of evict-fixed = %+v, want False %s %q", c, api.EvictionInvalidReason, api.EvictionInvalidPickFixedCRPMessage)
	}
	if _, err := s.member("member-2").CoreV1().Namespaces().Get(t.Context(), "drain-fixed", metav1.GetOptions{}); err != nil {
		t.Errorf("the invalid eviction removed drain-fixed from member-2: %v", err)
	}
	if out := s.run(t, "describe", "crpe", "evict-fixed"); !strings.Contains(out, api.EvictionInvalidPickFixedCRPMessage) {
		t.Errorf("fleetctl describe crpe evict-fixed:\n%s", out)
	}
}

// cordonOnHub sets the cordon taint of a member on the hub cluster, as fleetctl drain asks
// for a member kept there, and waits until the status service shows it.
func (s *stack) cordonOnHub(t *testing.T, member string) {
	t.Helper()
	taint := fmt.Sprintf(`{"spec":{"taints":[{"key":%q,"value":%q,"effect":%q}]}}`, api.CordonTaint.Key, api.CordonTaint.Value, api.CordonTaint.Effect)
	s.onHub(t, "", "patch", "membercluster", member, "--type", "merge", "-p", taint)
	poll.Every(t, step, patience, member+" cordoned", func() error {
		out, errOut, err := s.fleetctl(t.Context(), "", "get", "member", member, "-o", "json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		var mc api.MemberCluster
		if err := json.Unmarshal([]byte(out), &mc); err != nil {
			return err
		}
		if !slices.Contains(mc.Spec.Taints, api.CordonTaint) {
			return fmt.Errorf("taints %+v", mc.Spec.Taints)
		}
		return nil
	})
}
