package scenarios

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// The placement of the staged update scenario: External, on member-1 (east), member-2
// (west) and member-3 (central); west is the staging stage, east and central production,
// with an approval before production and a timed wait after it.
const stagedScenario = `
apiVersion: v1
kind: Namespace
metadata:
  name: staged-demo
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: release
  namespace: staged-demo
data:
  version: "1"
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: crp-staged
spec:
  resourceSelectors:
  - group: ""
    version: v1
    kind: Namespace
    name: staged-demo
  policy:
    placementType: PickFixed
    clusterNames: [member-1, member-2, member-3]
  strategy:
    type: External
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateStrategy
metadata:
  name: staging-then-production
spec:
  stages:
  - name: staging
    labelSelector:
      matchLabels: {region: west}
  - name: production
    labelSelector:
      matchExpressions:
      - {key: region, operator: In, values: [east, central]}
    maxConcurrency: 1
    beforeStageTasks:
    - type: Approval
    afterStageTasks:
    - type: TimedWait
      waitTime: 5s
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateStrategy
metadata:
  name: all-at-once
spec:
  stages:
  - name: all
    labelSelector: {}
    maxConcurrency: 100%
`

func stagedRun(name, index, strategy string) string {
	return fmt.Sprintf(`apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateRun
metadata:
  name: %s
spec:
  placementName: crp-staged
  resourceSnapshotIndex: %q
  stagedRolloutStrategyName: %s
  state: Run
`, name, index, strategy)
}

// TestStagedUpdateRunWithApprovalThenRollback: a run rolls the first revision out to the
// staging stage and stops at the approval before production; fleetctl shows the request and
// what the run waits for; after fleetctl approve, production is updated one cluster at a
// time, the timed wait passes and the run succeeds. A second revision goes out with a
// second run, and a third run with the first revision's index rolls it back.
func TestStagedUpdateRunWithApprovalThenRollback(t *testing.T) {
	s := fleetFor(t)
	s.deleteAtEnd(t, "crp-staged")
	t.Cleanup(func() {
		for _, args := range [][]string{{"delete", "csur", "staged-1", "staged-2", "staged-3"},
			{"delete", "csus", "staging-then-production", "all-at-once"}} {
			if out, errOut, err := s.fleetctl(context.Background(), "", args...); err != nil {
				t.Logf("fleetctl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
			}
		}
	})
	s.apply(t, stagedScenario)
	s.placementWhen(t, "crp-staged", "scheduled on three members", func(crp *api.ClusterResourcePlacement) error {
		if got := scheduledClusters(crp); len(got) != 3 {
			return fmt.Errorf("scheduled on %v", got)
		}
		return nil
	})
	for _, m := range []string{"member-1", "member-2", "member-3"} {
		if _, err := s.member(m).CoreV1().Namespaces().Get(t.Context(), "staged-demo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s has the namespace before any run (External): %v", m, err)
		}
	}

	s.apply(t, stagedRun("staged-1", "0", "staging-then-production"))
	s.releaseOn(t, "member-2", "1")
	run := s.runWhen(t, "staged-1", "waiting for the approval before production", func(r *api.ClusterStagedUpdateRun) error {
		c := meta.FindStatusCondition(r.Status.Conditions, api.UpdateRunConditionProgressing)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "staged-1-before-production") {
			return fmt.Errorf("progressing %+v", c)
		}
		return nil
	})
	if got := meta.FindStatusCondition(run.Status.Conditions, api.UpdateRunConditionInitialized); got == nil || got.Status != metav1.ConditionTrue {
		t.Errorf("Initialized = %+v", got)
	}
	for _, m := range []string{"member-1", "member-3"} {
		if _, err := s.member(m).CoreV1().ConfigMaps("staged-demo").Get(t.Context(), "release", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s was updated before the approval: %v", m, err)
		}
	}
	requests := s.run(t, "get", "clusterapprovalrequests")
	t.Logf("fleetctl get clusterapprovalrequests:\n%s", requests)
	if !strings.Contains(requests, "staged-1-before-production") || !strings.Contains(requests, "production") {
		t.Errorf("the approval request is not listed:\n%s", requests)
	}
	describe := s.run(t, "describe", "csur", "staged-1")
	t.Logf("fleetctl describe csur staged-1:\n%s", describe)
	for _, want := range []string{"Current Stage:", "production", "fleetctl approve clusterapprovalrequest staged-1-before-production"} {
		if !strings.Contains(describe, want) {
			t.Errorf("describe lacks %q", want)
		}
	}

	t.Log(s.run(t, "approve", "clusterapprovalrequest", "staged-1-before-production"))
	s.releaseOn(t, "member-1", "1")
	s.releaseOn(t, "member-3", "1")
	s.runWhen(t, "staged-1", "succeeded", runSucceeded)
	t.Logf("fleetctl get csur -o wide:\n%s", s.run(t, "get", "csur", "-o", "wide"))

	// A second revision, rolled out by a second run.
	s.apply(t, strings.Replace(stagedScenario[:strings.Index(stagedScenario, "---\napiVersion: placement")], `version: "1"`, `version: "2"`, 1))
	s.applyRunWhenSnapshot(t, "staged-2", "1", "all-at-once")
	for _, m := range []string{"member-1", "member-2", "member-3"} {
		s.releaseOn(t, m, "2")
	}
	s.runWhen(t, "staged-2", "succeeded", runSucceeded)

	// Rollback: a run with the first revision's index.
	s.apply(t, stagedRun("staged-3", "0", "all-at-once"))
	for _, m := range []string{"member-1", "member-2", "member-3"} {
		s.releaseOn(t, m, "1")
	}
	s.runWhen(t, "staged-3", "succeeded", runSucceeded)

	// The history says which run put which revision where.
	history := s.run(t, "history", "crp", "crp-staged")
	t.Logf("fleetctl history crp crp-staged:\n%s", history)
	for _, run := range []struct{ name, index string }{{"staged-1", "0"}, {"staged-2", "1"}, {"staged-3", "0"}} {
		if !regexp.MustCompile(run.name + `\s+` + run.index + `\s+\S+\s+Succeeded\s+\S*member-`).MatchString(history) {
			t.Errorf("history does not show %s rolling out revision %s", run.name, run.index)
		}
	}
}

func runSucceeded(r *api.ClusterStagedUpdateRun) error {
	if c := meta.FindStatusCondition(r.Status.Conditions, api.UpdateRunConditionSucceeded); c == nil || c.Status != metav1.ConditionTrue {
		return fmt.Errorf("succeeded %+v, progressing %+v", c, meta.FindStatusCondition(r.Status.Conditions, api.UpdateRunConditionProgressing))
	}
	return nil
}

// applyRunWhenSnapshot applies a run once the placement has the snapshot it names.
func (s *stack) applyRunWhenSnapshot(t *testing.T, name, index, strategy string) {
	t.Helper()
	poll.Every(t, step, patience, "snapshot "+index+" of crp-staged", func() error {
		out, errOut, err := s.fleetctl(t.Context(), "", "history", "crp", "crp-staged", "-o", "json")
		if err != nil {
			return fmt.Errorf("fleetctl history: %v %s", err, errOut)
		}
		if !strings.Contains(out, `"index": `+index) {
			return fmt.Errorf("no snapshot %s yet", index)
		}
		return nil
	})
	s.apply(t, stagedRun(name, index, strategy))
}

// releaseOn waits for the ConfigMap release of the version on a member.
func (s *stack) releaseOn(t *testing.T, member, version string) {
	t.Helper()
	poll.Every(t, step, patience, "release "+version+" on "+member, func() error {
		cm, err := s.member(member).CoreV1().ConfigMaps("staged-demo").Get(t.Context(), "release", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := cm.Data["version"]; got != version {
			return fmt.Errorf("version %q", got)
		}
		return nil
	})
}

// runWhen waits until `fleetctl get csur NAME -o json` passes check.
func (s *stack) runWhen(t *testing.T, name, what string, check func(*api.ClusterStagedUpdateRun) error) *api.ClusterStagedUpdateRun {
	t.Helper()
	var run *api.ClusterStagedUpdateRun
	poll.Every(t, step, patience, "run "+name+" "+what, func() error {
		out, errOut, err := s.fleetctl(t.Context(), "", "get", "csur", name, "-o", "json")
		if err != nil {
			return fmt.Errorf("fleetctl get csur: %v %s", err, errOut)
		}
		var r api.ClusterStagedUpdateRun
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			return fmt.Errorf("decode %s: %v", out, err)
		}
		run = &r
		return check(&r)
	})
	return run
}
