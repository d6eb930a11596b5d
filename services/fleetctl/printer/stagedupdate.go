package printer

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
)

// StagedUpdateStrategies prints ClusterStagedUpdateStrategies; single as for
// Placements. Upstream has no printer columns for them: NAME and AGE, and in
// wide output the stages in order.
func (p Printer) StagedUpdateStrategies(w io.Writer, ss []api.ClusterStagedUpdateStrategy, single bool) error {
	return printObjects(p, w, ss, single, kindInfo[api.ClusterStagedUpdateStrategy]{
		apiVersion: api.PlacementGroupVersion.String(), kind: api.ClusterStagedUpdateStrategyKind,
		resource:  "clusterstagedupdatestrategy." + api.PlacementGroupVersion.Group,
		typeMeta:  func(s *api.ClusterStagedUpdateStrategy) *metav1.TypeMeta { return &s.TypeMeta },
		name:      func(s *api.ClusterStagedUpdateStrategy) string { return s.Name },
		namespace: func(s *api.ClusterStagedUpdateStrategy) string { return s.Namespace },
		columns: func(wide bool) []string {
			if wide {
				return []string{"NAME", "AGE", "STAGES"}
			}
			return []string{"NAME", "AGE"}
		},
		row: func(s *api.ClusterStagedUpdateStrategy, now time.Time, wide bool) []string {
			row := []string{s.Name, Age(s.CreationTimestamp, now)}
			if wide {
				names := make([]string, 0, len(s.Spec.Stages))
				for _, st := range s.Spec.Stages {
					names = append(names, st.Name)
				}
				row = append(row, strings.Join(names, ","))
			}
			return row
		},
	})
}

// StagedUpdateRuns prints ClusterStagedUpdateRuns with upstream's printer
// columns; wide output adds the strategy (upstream's priority-1 column), the
// stage and clusters in progress and what the run waits for.
func (p Printer) StagedUpdateRuns(w io.Writer, rs []api.ClusterStagedUpdateRun, single bool) error {
	return printObjects(p, w, rs, single, kindInfo[api.ClusterStagedUpdateRun]{
		apiVersion: api.PlacementGroupVersion.String(), kind: api.ClusterStagedUpdateRunKind,
		resource:  "clusterstagedupdaterun." + api.PlacementGroupVersion.Group,
		typeMeta:  func(r *api.ClusterStagedUpdateRun) *metav1.TypeMeta { return &r.TypeMeta },
		name:      func(r *api.ClusterStagedUpdateRun) string { return r.Name },
		namespace: func(r *api.ClusterStagedUpdateRun) string { return r.Namespace },
		columns: func(wide bool) []string {
			c := []string{"NAME", "PLACEMENT", "RESOURCE-SNAPSHOT-INDEX", "POLICY-SNAPSHOT-INDEX", "INITIALIZED", "PROGRESSING", "SUCCEEDED", "AGE"}
			if wide {
				c = append(c, "STRATEGY", "STAGE", "CLUSTERS", "WAITING-FOR")
			}
			return c
		},
		row: func(r *api.ClusterStagedUpdateRun, now time.Time, wide bool) []string {
			row := []string{r.Name, r.Spec.PlacementName, r.Spec.ResourceSnapshotIndex, r.Status.PolicySnapshotIndexUsed,
				condStatus(r.Status.Conditions, api.UpdateRunConditionInitialized),
				condStatus(r.Status.Conditions, api.UpdateRunConditionProgressing),
				condStatus(r.Status.Conditions, api.UpdateRunConditionSucceeded),
				Age(r.CreationTimestamp, now)}
			if wide {
				at := RunPosition(r)
				row = append(row, r.Spec.StagedUpdateStrategyName, orNone(at.Stage), orNone(strings.Join(at.Clusters, ",")), orNone(at.WaitingFor))
			}
			return row
		},
	})
}

// ApprovalRequests prints ClusterApprovalRequests with upstream's printer
// columns: NAME, UPDATE-RUN, STAGE, APPROVED, AGE.
func (p Printer) ApprovalRequests(w io.Writer, as []api.ClusterApprovalRequest, single bool) error {
	return printObjects(p, w, as, single, kindInfo[api.ClusterApprovalRequest]{
		apiVersion: api.PlacementGroupVersion.String(), kind: api.ClusterApprovalRequestKind,
		resource:  "clusterapprovalrequest." + api.PlacementGroupVersion.Group,
		typeMeta:  func(a *api.ClusterApprovalRequest) *metav1.TypeMeta { return &a.TypeMeta },
		name:      func(a *api.ClusterApprovalRequest) string { return a.Name },
		namespace: func(a *api.ClusterApprovalRequest) string { return a.Namespace },
		columns: func(wide bool) []string {
			c := []string{"NAME", "UPDATE-RUN", "STAGE", "APPROVED", "AGE"}
			if wide {
				c = append(c, "ACCEPTED")
			}
			return c
		},
		row: func(a *api.ClusterApprovalRequest, now time.Time, wide bool) []string {
			row := []string{a.Name, a.Spec.TargetUpdateRun, a.Spec.TargetStage,
				condStatus(a.Status.Conditions, api.ApprovalRequestConditionApproved), Age(a.CreationTimestamp, now)}
			if wide {
				row = append(row, condStatus(a.Status.Conditions, api.ApprovalRequestConditionApprovalAccepted))
			}
			return row
		},
	})
}

func condStatus(conds []metav1.Condition, t string) string {
	if c := meta.FindStatusCondition(conds, t); c != nil {
		return string(c.Status)
	}
	return ""
}

// Position is where a run stands: the stage in progress (or waiting for its
// tasks), the clusters being updated in it, and what it waits for.
type Position struct {
	Stage      string
	Clusters   []string
	WaitingFor string
}

// RunPosition reads a run's position from its status: the first stage that
// has not succeeded, and in it the clusters started and not succeeded; what
// it waits for is the Progressing condition's message when it is False and
// the run has not ended.
func RunPosition(r *api.ClusterStagedUpdateRun) Position {
	var pos Position
	stages := r.Status.StagesStatus
	if r.Status.DeletionStageStatus != nil {
		stages = append(stages[:len(stages):len(stages)], *r.Status.DeletionStageStatus)
	}
	for _, st := range stages {
		if meta.IsStatusConditionTrue(st.Conditions, api.StageConditionSucceeded) {
			continue
		}
		pos.Stage = st.StageName
		for _, c := range st.Clusters {
			if meta.IsStatusConditionTrue(c.Conditions, api.ClusterUpdatingConditionStarted) &&
				!meta.IsStatusConditionTrue(c.Conditions, api.ClusterUpdatingConditionSucceeded) {
				pos.Clusters = append(pos.Clusters, c.ClusterName)
			}
		}
		break
	}
	if c := meta.FindStatusCondition(r.Status.Conditions, api.UpdateRunConditionProgressing); c != nil && c.Status != metav1.ConditionTrue &&
		meta.FindStatusCondition(r.Status.Conditions, api.UpdateRunConditionSucceeded) == nil {
		pos.WaitingFor = c.Message
	}
	return pos
}

// DescribeStagedUpdateRun prints a run for people: its spec, conditions, where
// it stands, then every stage with its tasks and clusters.
func (p Printer) DescribeStagedUpdateRun(w io.Writer, r *api.ClusterStagedUpdateRun) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	now := p.now()
	fmt.Fprintf(tw, "Name:\t%s\n", r.Name)
	if r.Namespace != "" {
		fmt.Fprintf(tw, "Namespace:\t%s\n", r.Namespace)
	}
	fmt.Fprintf(tw, "Placement:\t%s\n", r.Spec.PlacementName)
	fmt.Fprintf(tw, "Strategy:\t%s\n", r.Spec.StagedUpdateStrategyName)
	index := r.Spec.ResourceSnapshotIndex
	if index == "" {
		index = "<latest>"
	}
	fmt.Fprintf(tw, "Resource Snapshot Index:\t%s (used: %s)\n", index, orNone(r.Status.ResourceSnapshotIndexUsed))
	fmt.Fprintf(tw, "State:\t%s\n", r.Spec.State)
	fmt.Fprintf(tw, "Age:\t%s\n", Age(r.CreationTimestamp, now))
	pos := RunPosition(r)
	fmt.Fprintf(tw, "Current Stage:\t%s\n", orNone(pos.Stage))
	fmt.Fprintf(tw, "Updating Clusters:\t%s\n", orNone(strings.Join(pos.Clusters, ", ")))
	fmt.Fprintf(tw, "Waiting For:\t%s\n", orNone(pos.WaitingFor))
	fmt.Fprintln(tw, "Conditions:")
	describeConditions(tw, "  ", r.Status.Conditions)
	stages := r.Status.StagesStatus
	if r.Status.DeletionStageStatus != nil {
		stages = append(stages[:len(stages):len(stages)], *r.Status.DeletionStageStatus)
	}
	if len(stages) > 0 {
		fmt.Fprintln(tw, "Stages:")
	}
	for _, st := range stages {
		fmt.Fprintf(tw, "  %s:\t%s\n", st.StageName, stageState(st))
		for _, t := range st.BeforeStageTaskStatus {
			fmt.Fprintf(tw, "    before: %s\t%s\n", taskLabel(t), taskState(t))
		}
		for _, c := range st.Clusters {
			fmt.Fprintf(tw, "    %s\t%s\n", c.ClusterName, clusterState(c))
		}
		for _, t := range st.AfterStageTaskStatus {
			fmt.Fprintf(tw, "    after: %s\t%s\n", taskLabel(t), taskState(t))
		}
	}
	return tw.Flush()
}

func describeConditions(w io.Writer, indent string, conds []metav1.Condition) {
	if len(conds) == 0 {
		fmt.Fprintf(w, "%s<none>\n", indent)
	}
	for _, c := range conds {
		fmt.Fprintf(w, "%s%s\t%s\t%s\t%s\n", indent, c.Type, c.Status, c.Reason, c.Message)
	}
}

func stageState(st api.StageUpdatingStatus) string {
	switch {
	case meta.IsStatusConditionTrue(st.Conditions, api.StageConditionSucceeded):
		return "Succeeded"
	case meta.IsStatusConditionFalse(st.Conditions, api.StageConditionSucceeded):
		return "Failed: " + meta.FindStatusCondition(st.Conditions, api.StageConditionSucceeded).Message
	case meta.IsStatusConditionTrue(st.Conditions, api.StageConditionProgressing):
		return "Progressing"
	case meta.IsStatusConditionFalse(st.Conditions, api.StageConditionProgressing):
		return "Waiting: " + meta.FindStatusCondition(st.Conditions, api.StageConditionProgressing).Message
	}
	return "NotStarted"
}

func clusterState(c api.ClusterUpdatingStatus) string {
	switch {
	case meta.IsStatusConditionTrue(c.Conditions, api.ClusterUpdatingConditionSucceeded):
		return "Succeeded"
	case meta.IsStatusConditionFalse(c.Conditions, api.ClusterUpdatingConditionSucceeded):
		return "Failed: " + meta.FindStatusCondition(c.Conditions, api.ClusterUpdatingConditionSucceeded).Message
	case meta.IsStatusConditionTrue(c.Conditions, api.ClusterUpdatingConditionStarted):
		return "Updating"
	case meta.IsStatusConditionFalse(c.Conditions, api.ClusterUpdatingConditionStarted):
		return "Skipped: " + meta.FindStatusCondition(c.Conditions, api.ClusterUpdatingConditionStarted).Message
	}
	return "NotStarted"
}

func taskLabel(t api.StageTaskStatus) string {
	if t.ApprovalRequestName != "" {
		return string(t.Type) + " " + t.ApprovalRequestName
	}
	return string(t.Type)
}

func taskState(t api.StageTaskStatus) string {
	for _, ct := range []string{api.StageTaskConditionApprovalRequestApproved, api.StageTaskConditionWaitTimeElapsed, api.StageTaskConditionApprovalRequestCreated} {
		if c := meta.FindStatusCondition(t.Conditions, ct); c != nil {
			s := ct + "=" + string(c.Status)
			if c.Message != "" {
				s += ": " + c.Message
			}
			return s
		}
	}
	return "NotStarted"
}
