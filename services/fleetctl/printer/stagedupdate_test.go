package printer

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/golden"
)

func cond(t, status, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: msg,
		LastTransitionTime: metav1.NewTime(clock().Add(-time.Minute))}
}

// stagedFixtures: a strategy of two stages, a run stopped at the approval
// before production, and that approval request.
func stagedFixtures() ([]api.ClusterStagedUpdateStrategy, []api.ClusterStagedUpdateRun, []api.ClusterApprovalRequest) {
	created := metav1.NewTime(clock().Add(-10 * time.Minute))
	one := intstr.FromInt32(1)
	strategy := api.ClusterStagedUpdateStrategy{
		ObjectMeta: metav1.ObjectMeta{Name: "staging-then-production", CreationTimestamp: created},
		Spec: api.UpdateStrategySpec{Stages: []api.StageConfig{
			{Name: "staging", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"environment": "staging"}}, MaxConcurrency: &one},
			{Name: "production", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"environment": "production"}}, MaxConcurrency: &one,
				BeforeStageTasks: []api.StageTask{{Type: api.StageTaskTypeApproval}},
				AfterStageTasks:  []api.StageTask{{Type: api.StageTaskTypeTimedWait, WaitTime: &metav1.Duration{Duration: time.Minute}}}},
		}},
	}
	waiting := "waiting for approval: fleetctl approve clusterapprovalrequest web-run-before-production"
	run := api.ClusterStagedUpdateRun{
		ObjectMeta: metav1.ObjectMeta{Name: "web-run", CreationTimestamp: created},
		Spec:       api.UpdateRunSpec{PlacementName: "web", ResourceSnapshotIndex: "1", StagedUpdateStrategyName: strategy.Name, State: api.UpdateRunStateRun},
		Status: api.UpdateRunStatus{
			PolicySnapshotIndexUsed: "0", ResourceSnapshotIndexUsed: "1", PolicyObservedClusterCount: 3,
			UpdateStrategySnapshot: &strategy.Spec,
			StagesStatus: []api.StageUpdatingStatus{
				{StageName: "staging", Clusters: []api.ClusterUpdatingStatus{{ClusterName: "member-1", Conditions: []metav1.Condition{
					cond(api.ClusterUpdatingConditionStarted, "True", "ClusterUpdatingStarted", ""),
					cond(api.ClusterUpdatingConditionSucceeded, "True", "ClusterUpdatingSucceeded", "")}}},
					Conditions: []metav1.Condition{cond(api.StageConditionSucceeded, "True", "StageUpdatingSucceeded", "")}},
				{StageName: "production",
					BeforeStageTaskStatus: []api.StageTaskStatus{{Type: api.StageTaskTypeApproval, ApprovalRequestName: "web-run-before-production",
						Conditions: []metav1.Condition{cond(api.StageTaskConditionApprovalRequestCreated, "True", "ApprovalRequestCreated", "")}}},
					Clusters:   []api.ClusterUpdatingStatus{{ClusterName: "member-2"}, {ClusterName: "member-3"}},
					Conditions: []metav1.Condition{cond(api.StageConditionProgressing, "False", "StageUpdatingWaiting", waiting)}},
			},
			DeletionStageStatus: &api.StageUpdatingStatus{StageName: api.UpdateRunDeletionStageName, Clusters: []api.ClusterUpdatingStatus{}},
			Conditions: []metav1.Condition{
				cond(api.UpdateRunConditionInitialized, "True", "UpdateRunInitializedSuccessfully", ""),
				cond(api.UpdateRunConditionProgressing, "False", "UpdateRunWaiting", waiting),
			},
		},
	}
	req := api.ClusterApprovalRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "web-run-before-production", CreationTimestamp: metav1.NewTime(clock().Add(-time.Minute)),
			Labels: map[string]string{api.TargetUpdateRunLabel: "web-run", api.TargetUpdatingStageLabel: "production"}},
		Spec: api.ApprovalRequestSpec{TargetUpdateRun: "web-run", TargetStage: "production"},
	}
	return []api.ClusterStagedUpdateStrategy{strategy}, []api.ClusterStagedUpdateRun{run}, []api.ClusterApprovalRequest{req}
}

func TestStagedUpdatePrinters(t *testing.T) {
	strategies, runs, requests := stagedFixtures()
	outputs := []struct{ name, output string }{
		{"table", ""}, {"wide", "wide"}, {"yaml", "yaml"}, {"json", "json"}, {"name", "name"},
		{"jsonpath", `jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`},
		{"jsonpath-as-json", `jsonpath-as-json={.items[*].metadata.name}`},
	}
	for _, kind := range []struct {
		name  string
		print func(Printer, *bytes.Buffer) error
	}{
		{"csus", func(p Printer, b *bytes.Buffer) error { return p.StagedUpdateStrategies(b, strategies, false) }},
		{"csur", func(p Printer, b *bytes.Buffer) error { return p.StagedUpdateRuns(b, runs, false) }},
		{"careq", func(p Printer, b *bytes.Buffer) error { return p.ApprovalRequests(b, requests, false) }},
	} {
		for _, o := range outputs {
			t.Run(kind.name+"-"+o.name, func(t *testing.T) {
				out, err := ParseOutput(o.output)
				if err != nil {
					t.Fatal(err)
				}
				var buf bytes.Buffer
				if err := kind.print(Printer{Output: out, Now: clock}, &buf); err != nil {
					t.Fatal(err)
				}
				golden.Check(t, "testdata/golden/"+kind.name+"-"+o.name+".txt", buf.Bytes())
			})
		}
	}
}

func TestRunShowsWhereItStandsAndWhatItWaitsFor(t *testing.T) {
	_, runs, _ := stagedFixtures()
	out, _ := ParseOutput("wide")
	var buf bytes.Buffer
	if err := (Printer{Output: out, Now: clock}).StagedUpdateRuns(&buf, runs, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"production", "fleetctl approve clusterapprovalrequest web-run-before-production"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("wide output lacks %q:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	if err := (Printer{Now: clock}).DescribeStagedUpdateRun(&buf, &runs[0]); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/golden/csur-describe.txt", buf.Bytes())
}

// An External placement's history says which run put which revision where.
func TestHistoryListsStagedUpdateRuns(t *testing.T) {
	h := historyFixture()
	ended := now.Add(-time.Minute)
	h.Runs = []events.RunRecord{
		{Name: "web-run", Strategy: "staging-then-production", ResourceIndex: "1", Outcome: "Succeeded", Message: "resource snapshot 1 rolled out to every stage",
			Clusters: []string{"member-2", "member-1", "member-3"}, CreatedAt: now.Add(-10 * time.Minute), EndedAt: &ended},
		{Name: "web-rollback", Strategy: "all-at-once", ResourceIndex: "0", Outcome: "Waiting", Message: "stage all: 0 of 3 cluster(s) updated",
			CreatedAt: now.Add(-30 * time.Second)},
	}
	table, _ := ParseOutput("")
	var buf bytes.Buffer
	if err := (Printer{Output: table, Now: clock}).History(&buf, h); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/golden/history-runs-table.txt", buf.Bytes())
}
