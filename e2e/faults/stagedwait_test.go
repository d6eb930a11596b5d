package faults

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

const stagedWaitManifests = `
apiVersion: v1
kind: Namespace
metadata:
  name: staged-wait
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: staged-wait
spec:
  resourceSelectors:
  - {group: "", version: v1, kind: Namespace, name: staged-wait}
  strategy:
    type: External
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateStrategy
metadata:
  name: wait-after-all
spec:
  stages:
  - name: all
    labelSelector: {}
    maxConcurrency: 100%
    afterStageTasks:
    - type: TimedWait
      waitTime: 30s
`

const stagedWaitRun = `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateRun
metadata:
  name: staged-wait-1
spec:
  placementName: staged-wait
  stagedRolloutStrategyName: wait-after-all
  state: Run
`

// TestTimedWaitSurvivesKillingTheRollout: kill -9 of the rollout during a staged run's
// timed wait. The restarted rollout says the wait ends when it said before (the time
// counts from when the stage's clusters were done, kept in PostgreSQL) and the run succeeds
// then, not a whole wait after the restart.
func TestTimedWaitSurvivesKillingTheRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the services with three member clusters")
	}
	s := startStack(t)
	s.apply(t, stagedWaitManifests)
	poll.Every(t, time.Second, patience, "staged-wait scheduled", func() error {
		crp, err := s.placementStatus(t.Context(), "staged-wait")
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(crp.Status.Conditions, string(api.ClusterResourcePlacementScheduledConditionType)); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("scheduled %+v", c)
		}
		return nil
	})
	s.apply(t, stagedWaitRun)

	var before string
	s.waitRun(t, "waiting", func(r *api.ClusterStagedUpdateRun) (err error) {
		before, err = waitUntil(r)
		return err
	})
	end, err := time.Parse(time.RFC3339, before)
	if err != nil {
		t.Fatal(err)
	}
	// Kill it late in the wait: a wait that started over would end a whole wait later.
	time.Sleep(time.Until(end.Add(-10 * time.Second)))
	t.Logf("the wait ends at %s; killing the rollout at %s", before, time.Now().UTC().Format(time.RFC3339))
	killService("rollout")(t, s, "")
	s.waitRun(t, "still waiting after the restart", func(r *api.ClusterStagedUpdateRun) error {
		after, err := waitUntil(r)
		if err != nil {
			return err
		}
		if after != before {
			t.Fatalf("after the restart the wait ends at %s, before it at %s", after, before)
		}
		return nil
	})
	r := s.waitRun(t, "succeeded", func(r *api.ClusterStagedUpdateRun) error {
		if c := meta.FindStatusCondition(r.Status.Conditions, api.UpdateRunConditionSucceeded); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("succeeded %+v", c)
		}
		return nil
	})
	at := meta.FindStatusCondition(r.Status.Conditions, api.UpdateRunConditionSucceeded).LastTransitionTime.Time
	if at.Before(end.Add(-time.Second)) {
		t.Errorf("the run succeeded at %s, before its wait ended at %s", at, end)
	}
	// A wait started over by the restart would end 20 s after end at the earliest.
	if at.After(end.Add(15 * time.Second)) {
		t.Errorf("the run succeeded at %s: the wait, due to end at %s, started over after the restart", at, end)
	}
	t.Logf("the wait was to end at %s; the run succeeded at %s", end.Format(time.RFC3339), at.UTC().Format(time.RFC3339))
}

// waitUntil reads when a run's TimedWait ends from its WaitTimeElapsed condition.
func waitUntil(r *api.ClusterStagedUpdateRun) (string, error) {
	for _, st := range r.Status.StagesStatus {
		for _, task := range st.AfterStageTaskStatus {
			if c := meta.FindStatusCondition(task.Conditions, api.StageTaskConditionWaitTimeElapsed); c != nil && c.Status == metav1.ConditionFalse {
				if _, until, ok := strings.Cut(c.Message, "until "); ok {
					return until, nil
				}
			}
		}
	}
	return "", fmt.Errorf("not in a timed wait")
}

func (s *stack) waitRun(t *testing.T, what string, check func(*api.ClusterStagedUpdateRun) error) *api.ClusterStagedUpdateRun {
	t.Helper()
	var run *api.ClusterStagedUpdateRun
	poll.Every(t, time.Second, patience, "run staged-wait-1 "+what, func() error {
		out, errOut, err := s.fleetctl(t.Context(), "", "get", "csur", "staged-wait-1", "-o", "json")
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
