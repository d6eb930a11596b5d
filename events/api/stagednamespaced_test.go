package api

import (
	"strings"
	"testing"
)

const surYAML = `apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: StagedUpdateRun
metadata: {name: rollout-1, namespace: team-a}
spec:
  placementName: app
  resourceSnapshotIndex: "0"
  stagedRolloutStrategyName: staging-first
`

// TestNamespacedStagedKinds: a StagedUpdateRun travels under keys of its
// namespace (its name and the names it refers to) and comes back as written;
// the rules of scope hold both ways.
func TestNamespacedStagedKinds(t *testing.T) {
	obj, err := Decode([]byte(surYAML))
	if err != nil {
		t.Fatal(err)
	}
	run := obj.(*ClusterStagedUpdateRun)
	if errs := Validate(run); len(errs) > 0 {
		t.Fatalf("a valid StagedUpdateRun is refused: %v", errs)
	}
	internal := InternalStaged(run).(*ClusterStagedUpdateRun)
	if internal.Name != "team-a..rollout-1" || internal.Spec.PlacementName != "team-a..app" || internal.Spec.StagedUpdateStrategyName != "team-a..staging-first" {
		t.Fatalf("internal: %s placement %s strategy %s", internal.Name, internal.Spec.PlacementName, internal.Spec.StagedUpdateStrategyName)
	}
	if run.Name != "rollout-1" {
		t.Error("InternalStaged changed its argument")
	}
	if errs := Validate(internal); len(errs) > 0 {
		t.Errorf("the internal form is refused: %v", errs)
	}
	internal.Status.StagesStatus = []StageUpdatingStatus{{StageName: "production",
		BeforeStageTaskStatus: []StageTaskStatus{{Type: StageTaskTypeApproval, ApprovalRequestName: ApprovalRequestName(internal.Name, "production", true)}}}}
	ext := ExternalStaged(internal).(*ClusterStagedUpdateRun)
	if ext.Kind != StagedUpdateRunKind || ext.Namespace != "team-a" || ext.Name != "rollout-1" || ext.Spec.PlacementName != "app" ||
		ext.Spec.StagedUpdateStrategyName != "staging-first" || ext.Status.StagesStatus[0].BeforeStageTaskStatus[0].ApprovalRequestName != "rollout-1-before-production" {
		t.Errorf("external: %+v", ext)
	}

	// An approval request the rollout made for the run (cluster kind, key name).
	req := &ClusterApprovalRequest{Spec: ApprovalRequestSpec{TargetUpdateRun: internal.Name, TargetStage: "production"}}
	req.Kind, req.Name = ClusterApprovalRequestKind, ApprovalRequestName(internal.Name, "production", true)
	areq := ExternalStaged(req).(*ClusterApprovalRequest)
	if areq.Kind != ApprovalRequestKind || areq.Namespace != "team-a" || areq.Name != "rollout-1-before-production" || areq.Spec.TargetUpdateRun != "rollout-1" {
		t.Errorf("approval request: %s %s/%s run %s", areq.Kind, areq.Namespace, areq.Name, areq.Spec.TargetUpdateRun)
	}

	for _, tt := range []struct{ edit, want string }{
		{"  namespace: team-a}=>}", "metadata.namespace: is required: a StagedUpdateRun is namespaced"},
		{"kind: StagedUpdateRun\nmetadata: {name: rollout-1, namespace: team-a}=>kind: ClusterStagedUpdateRun\nmetadata: {name: rollout-1, namespace: team-a}",
			"metadata.namespace: must be empty: ClusterStagedUpdateRun is cluster-scoped"},
		{"kind: StagedUpdateRun\nmetadata: {name: rollout-1, namespace: team-a}\nspec:\n  placementName: app=>kind: ClusterStagedUpdateRun\nmetadata: {name: rollout-1}\nspec:\n  placementName: team-a..app",
			`spec.placementName: "team-a..app" is not a ClusterResourcePlacement name`},
	} {
		from, to, _ := strings.Cut(tt.edit, "=>")
		in := strings.Replace(surYAML, from, to, 1)
		if from == "  namespace: team-a}" {
			in = strings.Replace(surYAML, ", namespace: team-a}", "}", 1)
		}
		obj, err := Decode([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if got := Validate(obj).Error(); !strings.Contains(got, tt.want) {
			t.Errorf("%q: errors %s, want %s", to, got, tt.want)
		}
	}
}
