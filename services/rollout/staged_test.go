package rollout_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/rollout"
)

// joinMember publishes a member joining with labels.
func (f *fixture) joinMember(name string, labels map[string]string) {
	f.t.Helper()
	subj, _ := events.MemberSubject(name)
	f.publish(events.TypeMemberJoined, subj, events.MemberJoined{Member: api.MemberCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1beta1", Kind: "MemberCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: api.MemberClusterSpec{HeartbeatPeriodSeconds: 60}}})
}

func (f *fixture) staged(obj api.Object) {
	f.t.Helper()
	var p events.StagedUpdateUpserted
	switch o := obj.(type) {
	case *api.ClusterStagedUpdateStrategy:
		p.ClusterStagedUpdateStrategy = o
	case *api.ClusterStagedUpdateRun:
		p.ClusterStagedUpdateRun = o
	}
	subj, err := events.StagedUpdateSubject(p.Key())
	if err != nil {
		f.t.Fatal(err)
	}
	f.publish(events.TypeStagedUpdateUpserted, subj, p)
}

func (f *fixture) approve(name string) {
	f.t.Helper()
	subj, _ := events.StagedUpdateSubject(events.StagedUpdateKey{Kind: api.ClusterApprovalRequestKind, Name: name})
	f.publish(events.TypeApprovalRequestApproved, subj, events.ApprovalRequestApproved{Name: name})
}

func strategyOf(name string, stages ...api.StageConfig) *api.ClusterStagedUpdateStrategy {
	return &api.ClusterStagedUpdateStrategy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: api.ClusterStagedUpdateStrategyKind},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: api.UpdateStrategySpec{Stages: stages}}
}

func envStage(name, env string, concurrency intstr.IntOrString) api.StageConfig {
	return api.StageConfig{Name: name, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": env}}, MaxConcurrency: &concurrency}
}

func runOf(name, placement, index, strategy string) *api.ClusterStagedUpdateRun {
	return &api.ClusterStagedUpdateRun{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: api.ClusterStagedUpdateRunKind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       api.UpdateRunSpec{PlacementName: placement, ResourceSnapshotIndex: index, StagedUpdateStrategyName: strategy, State: api.UpdateRunStateRun}}
}

// runNow reads a run as the rollout stored it.
func (f *fixture) runNow(name string) (api.ClusterStagedUpdateRun, error) {
	var r api.ClusterStagedUpdateRun
	var raw []byte
	err := f.Pool.QueryRow(f.t.Context(), `select object from staged_updates where kind = $1 and name = $2`, api.ClusterStagedUpdateRunKind, name).Scan(&raw)
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(raw, &r)
}

// waitRun waits until ok accepts the run.
func (f *fixture) waitRun(name, what string, ok func(api.ClusterStagedUpdateRun) error) api.ClusterStagedUpdateRun {
	f.t.Helper()
	var got api.ClusterStagedUpdateRun
	poll.Until(f.t, patience, "run "+name+": "+what, func() error {
		r, err := f.runNow(name)
		if err != nil {
			return err
		}
		got = r
		return ok(r)
	})
	return got
}

func condition(r api.ClusterStagedUpdateRun, t string) metav1.Condition {
	if c := meta.FindStatusCondition(r.Status.Conditions, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func succeeded(r api.ClusterStagedUpdateRun) error {
	if c := condition(r, api.UpdateRunConditionSucceeded); c.Status != metav1.ConditionTrue {
		return fmt.Errorf("not succeeded: %+v; progressing: %+v", c, condition(r, api.UpdateRunConditionProgressing))
	}
	return nil
}

// ready reports the latest work of each cluster applied and available.
func (f *fixture) readyAt(placement string, index int64, clusters ...string) {
	f.t.Helper()
	for _, c := range clusters {
		f.report(f.waitWork(c, placement, index), applied, available)
	}
}

// externalPlacement sets up an External placement on m1 (staging), m2 and
// m3 (production) selecting the namespace of its name.
func externalPlacement(f *fixture, name string) {
	f.joinMember("m1", map[string]string{"env": "staging"})
	f.joinMember("m2", map[string]string{"env": "production", "order": "2"})
	f.joinMember("m3", map[string]string{"env": "production", "order": "1"})
	f.hub(namespaceManifest(name))
	p := crp(name, namespace(name))
	p.Spec.Strategy.Type = api.ExternalRolloutStrategyType
	f.place(p)
	f.schedule(name, 1, []string{"m1", "m2", "m3"}, nil)
	poll.Until(f.t, patience, "first snapshot", func() error {
		if len(f.snapshots(name)) == 0 {
			return errors.New("none yet")
		}
		return nil
	})
}

func TestStagedRunStopsAtApprovalWaitsAndRollsBack(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	externalPlacement(f, "st")
	prod := envStage("production", "production", intstr.FromInt32(1))
	prod.SortingLabelKey = ptrTo("order")
	prod.BeforeStageTasks = []api.StageTask{{Type: api.StageTaskTypeApproval}}
	prod.AfterStageTasks = []api.StageTask{{Type: api.StageTaskTypeTimedWait, WaitTime: &metav1.Duration{Duration: 2 * time.Second}}}
	f.staged(strategyOf("two-stages", envStage("staging", "staging", intstr.FromInt32(1)), prod))
	f.staged(runOf("r1", "st", "", "two-stages"))

	f.readyAt("st", 0, "m1")
	r := f.waitRun("r1", "waiting for the approval before production", func(r api.ClusterStagedUpdateRun) error {
		if c := condition(r, api.UpdateRunConditionProgressing); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "fleetctl approve clusterapprovalrequest r1-before-production") {
			return fmt.Errorf("progressing %+v", c)
		}
		return nil
	})
	if c := condition(r, api.UpdateRunConditionInitialized); c.Status != metav1.ConditionTrue {
		t.Errorf("Initialized = %+v", c)
	}
	for _, c := range []string{"m2", "m3"} {
		if n := len(f.works(c, "st")); n != 0 {
			t.Errorf("%s was sent work %d time(s) before the approval", c, n)
		}
	}
	f.approve("r1-before-production")
	// maxConcurrency 1, sorted by the label order: m3 (1) before m2 (2).
	m3 := f.waitWork("m3", "st", 0)
	if n := len(f.works("m2", "st")); n != 0 {
		t.Errorf("m2 was sent work before m3 was ready (maxConcurrency 1)")
	}
	f.report(m3, applied, available)
	f.readyAt("st", 0, "m2")
	f.waitRun("r1", "the timed wait", func(r api.ClusterStagedUpdateRun) error {
		if c := condition(r, api.UpdateRunConditionProgressing); !strings.Contains(c.Message, "timed wait of 2s") {
			return fmt.Errorf("progressing %+v", c)
		}
		return nil
	})
	r = f.waitRun("r1", "success", succeeded)
	if idx := r.Status.ResourceSnapshotIndexUsed; idx != "0" {
		t.Errorf("resourceSnapshotIndexUsed %q, want 0", idx)
	}

	// A new revision, rolled out by r2 in one stage; then r3 rolls back to 0.
	f.hub(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"st","labels":{"rev":"1"}}}`)
	poll.Until(t, patience, "second snapshot", func() error {
		if len(f.snapshots("st")) < 2 {
			return errors.New("one snapshot")
		}
		return nil
	})
	all := api.StageConfig{Name: "all", LabelSelector: &metav1.LabelSelector{}, MaxConcurrency: ptrTo(intstr.FromString("100%"))}
	f.staged(strategyOf("at-once", all))
	f.staged(runOf("r2", "st", "1", "at-once"))
	f.readyAt("st", 1, "m1", "m2", "m3")
	f.waitRun("r2", "success", succeeded)
	f.staged(runOf("r3", "st", "0", "at-once"))
	f.readyAt("st", 0, "m1", "m2", "m3")
	f.waitRun("r3", "rollback success", succeeded)

	// A run that has not finished when a newer one is created is superseded.
	stopped := runOf("r4", "st", "1", "at-once")
	stopped.Spec.State = api.UpdateRunStateInitialize
	f.staged(stopped)
	f.waitRun("r4", "initialized", func(r api.ClusterStagedUpdateRun) error {
		if c := condition(r, api.UpdateRunConditionInitialized); c.Status != metav1.ConditionTrue {
			return fmt.Errorf("initialized %+v", c)
		}
		return nil
	})
	f.staged(runOf("r5", "st", "1", "at-once"))
	f.waitRun("r4", "superseded", func(r api.ClusterStagedUpdateRun) error {
		if c := condition(r, api.UpdateRunConditionSucceeded); c.Reason != "UpdateRunSuperseded" || !strings.Contains(c.Message, "r5") {
			return fmt.Errorf("succeeded %+v", c)
		}
		return nil
	})
	f.readyAt("st", 1, "m1", "m2", "m3")
	f.waitRun("r5", "success", succeeded)
}

func TestStagedRunSurvivesClustersJoiningAndLeaving(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	externalPlacement(f, "churn")
	f.staged(strategyOf("prod-only", envStage("staging", "staging", intstr.FromInt32(1)), envStage("production", "production", intstr.FromInt32(1))))
	f.staged(runOf("c1", "churn", "", "prod-only"))
	f.readyAt("churn", 0, "m1")
	// m3 (order ignored: no sortingLabelKey, so by name m2 first) starts;
	// then m3 leaves and m4 joins.
	w := f.waitWork("m2", "churn", 0)
	f.joinMember("m4", map[string]string{"env": "production"})
	f.leave("m3", events.LeaveKeep)
	f.schedule("churn", 1, []string{"m1", "m2", "m4"}, map[string]string{"m3": "the member left the fleet"})
	f.report(w, applied, available)
	r := f.waitRun("c1", "success without m3", succeeded)
	if c := condition(r, api.UpdateRunConditionSucceeded); !strings.Contains(c.Message, "m4 joined after the run began and are not updated by it") {
		t.Errorf("Succeeded message %q does not report m4", c.Message)
	}
	if n := len(f.works("m4", "churn")); n != 0 {
		t.Errorf("m4 joined mid-run and was sent work %d time(s) by the run", n)
	}
	var dropped bool
	for _, s := range r.Status.StagesStatus {
		for _, c := range s.Clusters {
			if c.ClusterName == "m3" {
				dropped = meta.FindStatusCondition(c.Conditions, api.ClusterUpdatingConditionStarted).Reason == "ClusterLeftDuringRun"
			}
		}
	}
	if !dropped {
		t.Errorf("m3 not reported dropped: %+v", r.Status.StagesStatus)
	}
}

func TestStagedRunReportsStuckWithTheStrategysThreshold(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	externalPlacement(f, "stuck")
	s := strategyOf("quick", api.StageConfig{Name: "all", LabelSelector: &metav1.LabelSelector{}, MaxConcurrency: ptrTo(intstr.FromString("100%"))})
	s.Annotations = map[string]string{api.StuckThresholdAnnotation: "1s"}
	f.staged(s)
	f.staged(runOf("s1", "stuck", "", "quick"))
	f.report(f.waitWork("m1", "stuck", 0), applyFail, notYet)
	f.waitRun("s1", "stuck", func(r api.ClusterStagedUpdateRun) error {
		if c := condition(r, api.UpdateRunConditionProgressing); c.Reason != "UpdateRunStuck" || !strings.Contains(c.Message, "within 1s") {
			return fmt.Errorf("progressing %+v", c)
		}
		return nil
	})
}

// A TimedWait counts from when its stage's clusters were done, in
// PostgreSQL: a rollout restarted during the wait ends it at the same time.
func TestTimedWaitSurvivesARestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	stop := f.start()
	externalPlacement(f, "tw")
	all := api.StageConfig{Name: "all", LabelSelector: &metav1.LabelSelector{}, MaxConcurrency: ptrTo(intstr.FromString("100%")),
		AfterStageTasks: []api.StageTask{{Type: api.StageTaskTypeTimedWait, WaitTime: &metav1.Duration{Duration: 4 * time.Second}}}}
	f.staged(strategyOf("wait", all))
	f.staged(runOf("w1", "tw", "", "wait"))
	f.readyAt("tw", 0, "m1", "m2", "m3")
	until := func(r api.ClusterStagedUpdateRun) (string, error) {
		for _, s := range r.Status.StagesStatus {
			for _, task := range s.AfterStageTaskStatus {
				if c := meta.FindStatusCondition(task.Conditions, api.StageTaskConditionWaitTimeElapsed); c != nil && c.Status == metav1.ConditionFalse {
					_, u, _ := strings.Cut(c.Message, "until ")
					return u, nil
				}
			}
		}
		return "", errors.New("not waiting")
	}
	var before string
	f.waitRun("w1", "the wait", func(r api.ClusterStagedUpdateRun) (err error) {
		before, err = until(r)
		return err
	})
	stop()
	time.Sleep(1500 * time.Millisecond)
	f.start()
	// The woken rollout says the wait ends when it said before the restart.
	f.waitRun("w1", "the wait after the restart", func(r api.ClusterStagedUpdateRun) error {
		if err := succeeded(r); err == nil {
			return errors.New("succeeded before it was seen waiting after the restart")
		}
		after, err := until(r)
		if err != nil {
			return err
		}
		if after != before {
			return fmt.Errorf("the wait ends at %s after the restart, %s before", after, before)
		}
		return nil
	})
	r := f.waitRun("w1", "success", succeeded)
	end, err := time.Parse(time.RFC3339, before)
	if err != nil {
		t.Fatal(err)
	}
	if at := condition(r, api.UpdateRunConditionSucceeded).LastTransitionTime.Time; at.Before(end.Add(-time.Second)) {
		t.Errorf("succeeded at %s, before the wait ended at %s", at, end)
	}
}

func ptrTo[T any](v T) *T { return &v }

// A run in state Initialize computes its stages and sends nothing; set to
// Run, it goes, and an Approval after the stage holds its end.
func TestStagedRunInitializeThenRunWithApprovalAfter(t *testing.T) {
	t.Parallel()
	f := newFixture(t, rollout.Config{})
	f.start()
	externalPlacement(f, "later")
	all := api.StageConfig{Name: "all", LabelSelector: &metav1.LabelSelector{}, MaxConcurrency: ptrTo(intstr.FromString("100%")),
		AfterStageTasks: []api.StageTask{{Type: api.StageTaskTypeApproval}}}
	f.staged(strategyOf("gate-after", all))
	run := runOf("i1", "later", "", "gate-after")
	run.Spec.State = api.UpdateRunStateInitialize
	f.staged(run)
	r := f.waitRun("i1", "initialized, not started", func(r api.ClusterStagedUpdateRun) error {
		if c := condition(r, api.UpdateRunConditionProgressing); c.Reason != "UpdateRunNotStarted" {
			return fmt.Errorf("progressing %+v", c)
		}
		return nil
	})
	if got := r.Status.StagesStatus[0].Clusters; len(got) != 3 {
		t.Errorf("stage all has clusters %+v, want m1, m2 and m3", got)
	}
	if n := len(f.works("m1", "later")); n != 0 {
		t.Errorf("an initialized run sent work %d time(s)", n)
	}
	run.Spec.State = api.UpdateRunStateRun
	f.staged(run)
	f.readyAt("later", 0, "m1", "m2", "m3")
	f.waitRun("i1", "waiting for the approval after the stage", func(r api.ClusterStagedUpdateRun) error {
		if c := condition(r, api.UpdateRunConditionProgressing); !strings.Contains(c.Message, "fleetctl approve clusterapprovalrequest i1-after-all") {
			return fmt.Errorf("progressing %+v", c)
		}
		return nil
	})
	f.approve("i1-after-all")
	f.waitRun("i1", "success", succeeded)
	var accepted bool
	var raw []byte
	if err := f.Pool.QueryRow(t.Context(), `select object from staged_updates where kind = $1 and name = 'i1-after-all'`, api.ClusterApprovalRequestKind).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var req api.ClusterApprovalRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	accepted = meta.IsStatusConditionTrue(req.Status.Conditions, api.ApprovalRequestConditionApprovalAccepted)
	if !accepted || req.Labels[api.TargetUpdateRunLabel] != "i1" || req.Spec.TargetStage != "all" {
		t.Errorf("approval request %+v", req)
	}
}
