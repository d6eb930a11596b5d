package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// TestStagedUpdateRunOfResourcePlacement: upstream's namespaced staged update kinds drive a
// ResourcePlacement with strategy External. A StagedUpdateStrategy and a StagedUpdateRun in
// the placement's namespace roll its ConfigMap to member-2 (staging) and stop at the approval
// before production; fleetctl shows the run (sur), and the ApprovalRequest (areq) of that
// namespace; after fleetctl approve areq -n, member-1 gets it too and the run succeeds.
func TestStagedUpdateRunOfResourcePlacement(t *testing.T) {
	s := fleetFor(t)
	s.deleteAtEnd(t, "crp-rp-staged-ns")
	t.Cleanup(func() {
		for _, args := range [][]string{{"delete", "sur", "rollout-1", "-n", "rp-staged"},
			{"delete", "sus", "staging-first", "-n", "rp-staged"}, {"delete", "rp", "settings", "-n", "rp-staged"}} {
			if out, errOut, err := s.fleetctl(context.Background(), "", args...); err != nil {
				t.Logf("fleetctl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
			}
		}
	})
	s.apply(t, `
apiVersion: v1
kind: Namespace
metadata: {name: rp-staged}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: rp-staged}
data: {version: "1"}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: crp-rp-staged-ns}
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: Namespace, name: rp-staged, selectionScope: NamespaceOnly}
  policy:
    placementType: PickFixed
    clusterNames: [member-1, member-2]
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourcePlacement
metadata: {name: settings, namespace: rp-staged}
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: ConfigMap, name: settings}
  strategy:
    type: External
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: StagedUpdateStrategy
metadata: {name: staging-first, namespace: rp-staged}
spec:
  stages:
  - name: staging
    labelSelector: {matchLabels: {region: west}}
  - name: production
    labelSelector: {matchLabels: {region: east}}
    beforeStageTasks:
    - type: Approval
`)
	s.converged(t, "crp-rp-staged-ns", 1)
	poll.Every(t, step, patience, "the ResourcePlacement scheduled on member-1 and member-2", func() error {
		rp, err := s.tryResourcePlacement(t, "rp-staged", "settings")
		if err != nil {
			return err
		}
		if got := scheduledClusters(rp); strings.Join(got, ",") != "member-1,member-2" {
			return fmt.Errorf("scheduled on %v", got)
		}
		return nil
	})
	s.apply(t, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: StagedUpdateRun
metadata: {name: rollout-1, namespace: rp-staged}
spec:
  placementName: settings
  resourceSnapshotIndex: "0"
  stagedRolloutStrategyName: staging-first
  state: Run
`)
	settingsOn := func(m string) error {
		cm, err := s.member(m).CoreV1().ConfigMaps("rp-staged").Get(t.Context(), "settings", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["version"] != "1" {
			return fmt.Errorf("settings on %s: %v", m, cm.Data)
		}
		return nil
	}
	poll.Every(t, step, patience, "settings on member-2 (staging)", func() error { return settingsOn("member-2") })

	var run api.ClusterStagedUpdateRun
	poll.Every(t, step, patience, "the run waiting for the approval before production", func() error {
		out, errOut, err := s.fleetctl(t.Context(), "", "get", "sur", "rollout-1", "-n", "rp-staged", "-o", "json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		if err := json.Unmarshal([]byte(out), &run); err != nil {
			return err
		}
		c := meta.FindStatusCondition(run.Status.Conditions, api.UpdateRunConditionProgressing)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "fleetctl approve approvalrequest rollout-1-before-production -n rp-staged") {
			return fmt.Errorf("progressing %+v", c)
		}
		return nil
	})
	if run.Kind != api.StagedUpdateRunKind || run.Namespace != "rp-staged" || run.Spec.PlacementName != "settings" || run.Spec.StagedUpdateStrategyName != "staging-first" {
		t.Errorf("fleetctl get sur -o json: %s %s/%s placement %q strategy %q", run.Kind, run.Namespace, run.Name, run.Spec.PlacementName, run.Spec.StagedUpdateStrategyName)
	}
	if _, err := s.member("member-1").CoreV1().ConfigMaps("rp-staged").Get(t.Context(), "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("member-1 (production) was updated before the approval: %v", err)
	}
	areqs := s.run(t, "get", "areq", "-n", "rp-staged")
	if !strings.Contains(areqs, "rollout-1-before-production") || !strings.Contains(areqs, "rollout-1") {
		t.Errorf("fleetctl get areq -n rp-staged:\n%s", areqs)
	}
	if csur := s.run(t, "get", "csur"); strings.Contains(csur, "rollout-1") {
		t.Errorf("fleetctl get csur lists the namespaced run:\n%s", csur)
	}

	s.run(t, "approve", "areq", "rollout-1-before-production", "-n", "rp-staged")
	poll.Every(t, step, patience, "settings on member-1 and the run succeeded", func() error {
		if err := settingsOn("member-1"); err != nil {
			return err
		}
		out, errOut, err := s.fleetctl(t.Context(), "", "get", "sur", "rollout-1", "-n", "rp-staged", "-o", "json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, errOut)
		}
		var r api.ClusterStagedUpdateRun
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(r.Status.Conditions, api.UpdateRunConditionSucceeded); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("succeeded %+v", c)
		}
		return nil
	})
	if d := s.run(t, "describe", "sur", "rollout-1", "-n", "rp-staged"); !strings.Contains(d, "Namespace:") || !strings.Contains(d, "settings") {
		t.Errorf("fleetctl describe sur:\n%s", d)
	}
}
