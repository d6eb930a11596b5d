package api

import (
	"strings"
	"testing"
	"time"
)

// The strategy and run of upstream's staged update how-to.
const stagedDocs = `apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateStrategy
metadata:
  name: example-strategy
  annotations:
    flotilla.dev/stuck-threshold: 10m
spec:
  stages:
    - name: staging
      labelSelector:
        matchLabels:
          environment: staging
      sortingLabelKey: order
      maxConcurrency: 50%
      afterStageTasks:
        - type: TimedWait
          waitTime: 1m
    - name: production
      labelSelector:
        matchLabels:
          environment: production
      beforeStageTasks:
        - type: Approval
      afterStageTasks:
        - type: approval
        - type: TimedWait
          waitTime: 30s
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateRun
metadata:
  name: example-run
spec:
  placementName: example-placement
  resourceSnapshotIndex: "0"
  stagedRolloutStrategyName: example-strategy
  state: Run
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterApprovalRequest
metadata:
  name: example-run-before-production
spec:
  parentStageRollout: example-run
  targetStage: production
`

func TestDecodeStagedUpdateKinds(t *testing.T) {
	docs, err := DecodeAll(strings.NewReader(stagedDocs))
	if err != nil {
		t.Fatalf("DecodeAll: %v", err)
	}
	if len(docs) != 3 {
		t.Fatalf("decoded %d documents, want 3", len(docs))
	}
	s, ok := docs[0].Object.(*ClusterStagedUpdateStrategy)
	if !ok {
		t.Fatalf("first document is %T", docs[0].Object)
	}
	Default(s)
	if errs := Validate(s); len(errs) > 0 {
		t.Fatalf("Validate strategy: %v", errs)
	}
	if got := s.Spec.Stages[1].AfterStageTasks[0].Type; got != StageTaskTypeApproval {
		t.Errorf("task type read as %q, want Approval (case-insensitive)", got)
	}
	if got := s.Spec.Stages[1].MaxConcurrency.IntValue(); got != 1 {
		t.Errorf("default maxConcurrency = %d, want 1", got)
	}
	if d, err := StuckThreshold(s); err != nil || d != 10*time.Minute {
		t.Errorf("StuckThreshold = %v, %v; want 10m", d, err)
	}
	r, ok := docs[1].Object.(*ClusterStagedUpdateRun)
	if !ok {
		t.Fatalf("second document is %T", docs[1].Object)
	}
	if errs := Validate(r); len(errs) > 0 {
		t.Fatalf("Validate run: %v", errs)
	}
	a, ok := docs[2].Object.(*ClusterApprovalRequest)
	if !ok {
		t.Fatalf("third document is %T", docs[2].Object)
	}
	if errs := Validate(a); len(errs) > 0 {
		t.Fatalf("Validate approval request: %v", errs)
	}
	if got := ApprovalRequestName("example-run", "production", true); got != a.Name {
		t.Errorf("ApprovalRequestName = %q, want %q", got, a.Name)
	}
}

func TestValidateStagedUpdateStrategyRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, stages, want string
	}{
		{"no stages", "  stages: []", "spec.stages: at least one stage is required"},
		{"bad name", "  stages:\n    - name: Staging_1", `spec.stages[0].name: "Staging_1" must be lower-case letters and digits only`},
		{"duplicate name", "  stages:\n    - name: a\n    - name: a", "spec.stages[1].name: \"a\" is the name of stages[0] too"},
		{"zero concurrency", "  stages:\n    - name: a\n      maxConcurrency: 0", "maxConcurrency must be at least 1, not 0"},
		{"bad percentage", "  stages:\n    - name: a\n      maxConcurrency: 0%", `"0%" must be a number of at least 1 or a percentage`},
		{"wait without time", "  stages:\n    - name: a\n      afterStageTasks:\n        - type: TimedWait", "spec.stages[0].afterStageTasks[0].waitTime: is required for a TimedWait"},
		{"approval with time", "  stages:\n    - name: a\n      afterStageTasks:\n        - type: Approval\n          waitTime: 1m", "is not allowed for an Approval"},
		{"two waits", "  stages:\n    - name: a\n      afterStageTasks:\n        - type: TimedWait\n          waitTime: 1m\n        - type: TimedWait\n          waitTime: 2m", "at most one task of each type"},
		{"wait before", "  stages:\n    - name: a\n      beforeStageTasks:\n        - type: TimedWait\n          waitTime: 1m", "a before-stage task cannot be TimedWait"},
		{"milliseconds", "  stages:\n    - name: a\n      afterStageTasks:\n        - type: TimedWait\n          waitTime: 500ms", "only hours (h), minutes (m) and seconds (s) are accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterStagedUpdateStrategy\nmetadata:\n  name: s\nspec:\n" + tc.stages + "\n"
			obj, err := Decode([]byte(doc))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			errs := Validate(obj)
			if !strings.Contains(errs.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error containing %q", errs, tc.want)
			}
		})
	}
}

func TestStuckThresholdAnnotationMustBeADuration(t *testing.T) {
	s := &ClusterStagedUpdateStrategy{}
	s.Name = "s"
	s.Annotations = map[string]string{StuckThresholdAnnotation: "soon"}
	s.Spec.Stages = []StageConfig{{Name: "a"}}
	if errs := Validate(s); !strings.Contains(errs.Error(), "is not a positive duration") {
		t.Errorf("Validate = %v, want the annotation refused", errs)
	}
}

func TestValidateStagedUpdateRun(t *testing.T) {
	run := func(index string, state UpdateRunState) *ClusterStagedUpdateRun {
		r := &ClusterStagedUpdateRun{}
		r.Name = "run"
		r.Spec = UpdateRunSpec{PlacementName: "p", ResourceSnapshotIndex: index, StagedUpdateStrategyName: "s", State: state}
		return r
	}
	if errs := Validate(run("x", "")); !strings.Contains(errs.Error(), `"x" must be a non-negative integer`) {
		t.Errorf("Validate = %v, want the index refused", errs)
	}
	if errs := Validate(run("", "Go")); !strings.Contains(errs.Error(), `"Go" is not supported`) {
		t.Errorf("Validate = %v, want the state refused", errs)
	}
	for _, tc := range []struct {
		from, to UpdateRunState
		ok       bool
	}{
		{"", UpdateRunStateRun, true},
		{UpdateRunStateInitialize, UpdateRunStateStop, false},
		{UpdateRunStateRun, UpdateRunStateStop, true},
		{UpdateRunStateStop, UpdateRunStateRun, true},
		{UpdateRunStateRun, UpdateRunStateInitialize, false},
		{UpdateRunStateStop, UpdateRunStateInitialize, false},
	} {
		errs := ValidateStagedUpdateRunUpdate(run("1", tc.from), run("1", tc.to))
		if (len(errs) == 0) != tc.ok {
			t.Errorf("%s -> %s: %v, want ok=%v", tc.from, tc.to, errs, tc.ok)
		}
	}
	if errs := ValidateStagedUpdateRunUpdate(run("1", "Run"), run("2", "Run")); !strings.Contains(errs.Error(), "resourceSnapshotIndex is immutable") {
		t.Errorf("ValidateStagedUpdateRunUpdate = %v, want the index immutable", errs)
	}
}
