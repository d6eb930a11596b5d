package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/rollout/stage"
)

// A staged update run decides which clusters of an External placement get
// which snapshot when; the placement's reconcile does the rest, as for a
// rolling update. The newest run of a placement drives it: while it is
// unfinished, the pass rolls out the run's snapshot to the clusters the run
// released (plan.Strategy.Released); once it succeeded, its snapshot stays
// the placement's target until a newer run. The run's state is its status
// and its progress (runProgress), both in staged_updates, and the next time
// it must look again is the placement's wake_at: waits survive restarts.

// Reasons of a run's conditions (upstream's where it has one).
const (
	reasonInitialized     = "UpdateRunInitializedSuccessfully"
	reasonInitFailed      = "UpdateRunInitializedFailed"
	reasonInitializing    = "UpdateRunInitializing"
	reasonNotStarted      = "UpdateRunNotStarted"
	reasonStarted         = "UpdateRunStarted"
	reasonWaiting         = "UpdateRunWaiting"
	reasonStopped         = "UpdateRunStopped"
	reasonStuck           = "UpdateRunStuck"
	reasonSucceeded       = "UpdateRunSucceeded"
	reasonClusterLeft     = "ClusterLeftDuringRun"
	reasonClusterStarted  = "ClusterUpdatingStarted"
	reasonClusterDone     = "ClusterUpdatingSucceeded"
	reasonStageWaiting    = "StageUpdatingWaiting"
	reasonStageProgress   = "StageUpdatingStarted"
	reasonStageSucceeded  = "StageUpdatingSucceeded"
	reasonApprovalCreated = "ApprovalRequestCreated"
	reasonApproved        = "ApprovalRequestApproved"
	reasonWaitElapsed     = "AfterStageTaskWaitTimeElapsed"
	reasonWaitPending     = "AfterStageTaskWaitTimeNotElapsed"
)

// runProgress is a run's engine state beside its status.
type runProgress struct {
	// Index and Hash name the snapshot the run rolls out.
	Index int64  `json:"index"`
	Hash  string `json:"hash"`
	// Stages are the clusters of each stage, in update order, and Deletion
	// the clusters the placement leaves; fixed at initialisation.
	Stages   [][]string `json:"stages"`
	Deletion []string   `json:"deletion,omitempty"`
	// StuckAfter is the strategy's stuck threshold, 0 for the service's.
	StuckAfter time.Duration `json:"stuckAfter,omitempty"`
	// Started is when each cluster's update began; Done when each stage's
	// clusters were all updated (a TimedWait counts from it).
	Started map[string]time.Time `json:"started,omitempty"`
	Done    map[string]time.Time `json:"done,omitempty"`
	// Failed is set when the run failed to initialise: it does nothing more.
	Failed bool `json:"failed,omitempty"`
}

// stagedRun is the run driving a placement in this pass.
type stagedRun struct {
	run      api.ClusterStagedUpdateRun
	progress runProgress
	before   []byte // the object and progress as read, to write only a change
	finished bool
	pending  bool // waits for the placement's decision or first snapshot
	// why is what the run waits for, for the progress of the clusters it
	// has not released.
	why string
}

// loadNewestRun reads the newest live run of a placement; nil when none.
func loadNewestRun(ctx context.Context, tx pgx.Tx, placement string) (*stagedRun, error) {
	var object, progress []byte
	err := tx.QueryRow(ctx, `select object, progress from staged_updates
		where kind = $1 and placement = $2 and not deleted order by created_seq desc limit 1 for update`,
		api.ClusterStagedUpdateRunKind, placement).Scan(&object, &progress)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("runs of %s: %w", placement, err)
	}
	sr := &stagedRun{}
	if err := json.Unmarshal(object, &sr.run); err != nil {
		return nil, fmt.Errorf("runs of %s: %w", placement, err)
	}
	if progress != nil {
		if err := json.Unmarshal(progress, &sr.progress); err != nil {
			return nil, fmt.Errorf("progress of run %s: %w", sr.run.Name, err)
		}
	}
	if sr.before, err = sr.encode(); err != nil {
		return nil, err
	}
	sr.finished = sr.progress.Failed || meta.IsStatusConditionTrue(sr.run.Status.Conditions, api.UpdateRunConditionSucceeded)
	return sr, nil
}

// stagedTarget reads the run driving the placement, initialises it when it
// is new, and makes its snapshot the one the pass rolls out. A run of a
// placement that is not External fails to initialise.
func (ps *pass) stagedTarget(ctx context.Context) error {
	sr, err := loadNewestRun(ctx, ps.tx, ps.p.name)
	if err != nil || sr == nil {
		return err
	}
	ps.run = sr
	if !meta.IsStatusConditionTrue(sr.run.Status.Conditions, api.UpdateRunConditionInitialized) && !sr.progress.Failed {
		if err := ps.initialiseRun(ctx, sr); err != nil {
			return err
		}
	}
	if sr.progress.Failed || sr.pending {
		return nil
	}
	ps.latest = &latestSnapshot{index: sr.progress.Index, hash: sr.progress.Hash}
	return nil
}

// initialiseRun computes a run's stages from its strategy and the clusters
// the placement is scheduled on, as upstream: every scheduled cluster in one
// stage exactly, the clusters the placement leaves in the deletion stage.
func (ps *pass) initialiseRun(ctx context.Context, sr *stagedRun) error {
	run := &sr.run
	fail := func(format string, args ...any) error {
		sr.progress.Failed = true
		msg := fmt.Sprintf(format, args...)
		ps.setRunCondition(run, api.UpdateRunConditionInitialized, metav1.ConditionFalse, reasonInitFailed, msg)
		ps.setRunCondition(run, api.UpdateRunConditionSucceeded, metav1.ConditionFalse, reasonInitFailed, msg)
		return nil
	}
	if ps.p.spec.Strategy.Type != api.ExternalRolloutStrategyType {
		return fail("placement %s does not use the External rollout strategy type; a staged update run drives only External placements", ps.p.name)
	}
	// A run applied with its placement waits for the placement's first
	// decision and snapshot: their arrival reconciles the placement again.
	wait := func(what string) error {
		sr.pending = true
		ps.setRunCondition(run, api.UpdateRunConditionInitialized, metav1.ConditionFalse, reasonInitializing,
			fmt.Sprintf("waiting for the %s of placement %s", what, ps.p.name))
		return nil
	}
	if ps.p.decision == nil || len(ps.scheduled) == 0 && !ps.p.decision.Fulfilled {
		return wait("scheduling decision")
	}
	var strategy api.ClusterStagedUpdateStrategy
	var raw []byte
	err := ps.tx.QueryRow(ctx, `select object from staged_updates where kind = $1 and name = $2 and not deleted`,
		api.ClusterStagedUpdateStrategyKind, run.Spec.StagedUpdateStrategyName).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return fail("the ClusterStagedUpdateStrategy %s does not exist", run.Spec.StagedUpdateStrategyName)
	}
	if err != nil {
		return fmt.Errorf("strategy of run %s: %w", run.Name, err)
	}
	if err := json.Unmarshal(raw, &strategy); err != nil {
		return fmt.Errorf("strategy of run %s: %w", run.Name, err)
	}
	snap := ps.latest
	if idx := run.Spec.ResourceSnapshotIndex; idx != "" {
		n, _ := strconv.ParseInt(idx, 10, 64)
		var hash string
		err := ps.tx.QueryRow(ctx, `select content_hash from resource_snapshots where placement = $1 and snapshot_index = $2 and manifests is not null`,
			ps.p.name, n).Scan(&hash)
		if errors.Is(err, pgx.ErrNoRows) {
			return fail("placement %s has no resource snapshot %s (see fleetctl history %s)", ps.p.name, idx, ps.p.name)
		}
		if err != nil {
			return fmt.Errorf("snapshot of run %s: %w", run.Name, err)
		}
		snap = &latestSnapshot{index: n, hash: hash}
	}
	if snap == nil {
		return wait("first resource snapshot")
	}
	scheduled := sortedKeys(ps.scheduled)
	labels, err := memberLabels(ctx, ps.tx, scheduled)
	if err != nil {
		return err
	}
	clusters := make([]stage.Cluster, 0, len(scheduled))
	for _, n := range scheduled {
		clusters = append(clusters, stage.Cluster{Name: n, Labels: labels[n]})
	}
	stages, err := stage.Assign(strategy.Spec.Stages, clusters)
	if err != nil {
		return fail("%v", err)
	}
	stuck, _ := api.StuckThreshold(&strategy)
	sr.progress = runProgress{Index: snap.index, Hash: snap.hash, Stages: stages, StuckAfter: stuck,
		Started: map[string]time.Time{}, Done: map[string]time.Time{}}
	for _, n := range sortedKeys(ps.clusters) {
		if c := ps.clusters[n]; c.holds() && !ps.scheduled[n] {
			sr.progress.Deletion = append(sr.progress.Deletion, n)
		}
	}
	run.Status.PolicySnapshotIndexUsed = strconv.FormatInt(ps.p.decision.Revision, 10)
	run.Status.PolicyObservedClusterCount = len(scheduled)
	run.Status.ResourceSnapshotIndexUsed = strconv.FormatInt(snap.index, 10)
	run.Status.ApplyStrategy = ps.p.spec.Strategy.ApplyStrategy
	run.Status.UpdateStrategySnapshot = &strategy.Spec
	ps.setRunCondition(run, api.UpdateRunConditionInitialized, metav1.ConditionTrue, reasonInitialized,
		fmt.Sprintf("%d stage(s), %d cluster(s), resource snapshot %d", len(stages), len(scheduled), snap.index))
	return nil
}

// advanceRun moves the run on as far as it can now: it starts clusters
// within each stage's maxConcurrency, completes stages whose clusters are
// applied and available, runs their tasks (approval requests, timed waits),
// and writes the run's status. The clusters it released get the run's
// snapshot in this pass.
func (ps *pass) advanceRun(ctx context.Context) error {
	sr := ps.run
	if sr == nil {
		return nil
	}
	defer func() { ps.runWhy = sr.why }()
	if !sr.progress.Failed && !sr.finished && !sr.pending {
		if err := ps.walkStages(ctx, sr); err != nil {
			return err
		}
	}
	return ps.saveRun(ctx, sr)
}

// walkStages is advanceRun for an initialised run.
func (ps *pass) walkStages(ctx context.Context, sr *stagedRun) error {
	run, pr := &sr.run, &sr.progress
	if pr.Started == nil {
		pr.Started = map[string]time.Time{}
	}
	if pr.Done == nil {
		pr.Done = map[string]time.Time{}
	}
	strategy := run.Status.UpdateStrategySnapshot
	running := run.Spec.State == api.UpdateRunStateRun
	stuckAfter := pr.StuckAfter
	if stuckAfter == 0 {
		stuckAfter = ps.r.stuckAfter
	}
	ps.released = map[string]bool{}
	old := map[string]api.StageUpdatingStatus{}
	for _, s := range run.Status.StagesStatus {
		old[s.StageName] = s
	}
	var (
		statuses []api.StageUpdatingStatus
		waiting  string // what the run waits for, "" when it progresses
		stuck    string
		blocked  bool // an earlier stage is not done: later ones wait
	)
	scheduledInRun := map[string]bool{}
	for i, cfg := range strategy.Stages {
		names := pr.Stages[i]
		for _, n := range names {
			scheduledInRun[n] = true
		}
		prev := old[cfg.Name]
		s := api.StageUpdatingStatus{StageName: cfg.Name, Clusters: []api.ClusterUpdatingStatus{},
			StartTime: prev.StartTime, EndTime: prev.EndTime, Conditions: prev.Conditions}
		byName := map[string]api.ClusterUpdatingStatus{}
		for _, c := range prev.Clusters {
			byName[c.ClusterName] = c
		}
		for _, n := range names {
			c := byName[n]
			c.ClusterName = n
			s.Clusters = append(s.Clusters, c)
		}
		s.BeforeStageTaskStatus = ps.taskStatuses(cfg.BeforeStageTasks, prev.BeforeStageTaskStatus)
		s.AfterStageTaskStatus = ps.taskStatuses(cfg.AfterStageTasks, prev.AfterStageTaskStatus)
		if meta.IsStatusConditionTrue(s.Conditions, api.StageConditionSucceeded) {
			for _, n := range names {
				ps.released[n] = true
			}
			statuses = append(statuses, s)
			continue
		}
		if blocked {
			statuses = append(statuses, s)
			continue
		}
		blocked = true
		// Before the stage: its approval.
		if ok, err := ps.approvals(ctx, run, cfg.Name, true, s.BeforeStageTaskStatus); err != nil {
			return err
		} else if !ok {
			waiting = fmt.Sprintf("stage %s waits for approval: %s", cfg.Name, approveCommand(api.ApprovalRequestName(run.Name, cfg.Name, true)))
			ps.setStageCondition(&s, api.StageConditionProgressing, metav1.ConditionFalse, reasonStageWaiting, waiting)
			statuses = append(statuses, s)
			continue
		}
		if s.StartTime == nil && running {
			t := metav1.NewTime(ps.now)
			s.StartTime = &t
		}
		// The clusters, in order, at most maxConcurrency at a time.
		limit := stage.Concurrency(cfg.MaxConcurrency, len(names))
		inFlight, done := 0, 0
		var pending []int
		for j := range s.Clusters {
			c := &s.Clusters[j]
			n := c.ClusterName
			switch {
			case meta.IsStatusConditionTrue(c.Conditions, api.ClusterUpdatingConditionSucceeded):
				done++
				ps.released[n] = true
			case !ps.scheduled[n] || ps.left(n):
				// Left the fleet or the placement mid-run: dropped from the
				// stage; the run goes on without it.
				ps.setClusterCondition(c, api.ClusterUpdatingConditionStarted, metav1.ConditionFalse, reasonClusterLeft,
					"the cluster left the fleet or the placement during the run: dropped from the stage")
				done++
			case meta.IsStatusConditionTrue(c.Conditions, api.ClusterUpdatingConditionStarted):
				ps.released[n] = true
				if ps.succeeded(n) {
					ps.setClusterCondition(c, api.ClusterUpdatingConditionSucceeded, metav1.ConditionTrue, reasonClusterDone, "applied and available")
					done++
					continue
				}
				inFlight++
				since := pr.Started[n]
				if deadline := since.Add(stuckAfter); !ps.now.Before(deadline) {
					stuck = fmt.Sprintf("cluster %s of stage %s has not been applied and available within %s: %s", n, cfg.Name, stuckAfter, ps.clusterWhy(n))
				} else {
					ps.later(deadline)
				}
			default:
				pending = append(pending, j)
			}
		}
		if running {
			for _, j := range pending {
				if inFlight >= limit {
					break
				}
				c := &s.Clusters[j]
				ps.setClusterCondition(c, api.ClusterUpdatingConditionStarted, metav1.ConditionTrue, reasonClusterStarted, "")
				pr.Started[c.ClusterName] = ps.now
				ps.released[c.ClusterName] = true
				ps.later(ps.now.Add(stuckAfter))
				inFlight++
			}
		}
		if done < len(s.Clusters) {
			ps.setStageCondition(&s, api.StageConditionProgressing, metav1.ConditionTrue, reasonStageProgress,
				fmt.Sprintf("%d of %d cluster(s) updated", done, len(s.Clusters)))
			if waiting == "" {
				waiting = fmt.Sprintf("stage %s: %d of %d cluster(s) updated", cfg.Name, done, len(s.Clusters))
			}
			statuses = append(statuses, s)
			continue
		}
		// Every cluster done: the tasks after the stage.
		doneAt, ok := pr.Done[cfg.Name]
		if !ok {
			doneAt = ps.now
			pr.Done[cfg.Name] = doneAt
		}
		tasksDone := true
		for k := range s.AfterStageTaskStatus {
			t := &s.AfterStageTaskStatus[k]
			if t.Type != api.StageTaskTypeTimedWait {
				continue
			}
			wait := taskWait(cfg.AfterStageTasks, api.StageTaskTypeTimedWait)
			end := doneAt.Add(wait)
			if ps.now.Before(end) {
				tasksDone = false
				ps.later(end)
				msg := fmt.Sprintf("waiting %s more, until %s", end.Sub(ps.now).Round(time.Second), end.UTC().Format(time.RFC3339))
				ps.setTaskCondition(t, api.StageTaskConditionWaitTimeElapsed, metav1.ConditionFalse, reasonWaitPending, msg)
				waiting = fmt.Sprintf("stage %s: timed wait of %s, %s", cfg.Name, wait, msg)
			} else {
				ps.setTaskCondition(t, api.StageTaskConditionWaitTimeElapsed, metav1.ConditionTrue, reasonWaitElapsed, fmt.Sprintf("waited %s", wait))
			}
		}
		if ok, err := ps.approvals(ctx, run, cfg.Name, false, s.AfterStageTaskStatus); err != nil {
			return err
		} else if !ok {
			tasksDone = false
			if waiting == "" {
				waiting = fmt.Sprintf("stage %s waits for approval: %s", cfg.Name, approveCommand(api.ApprovalRequestName(run.Name, cfg.Name, false)))
			}
		}
		if !tasksDone {
			ps.setStageCondition(&s, api.StageConditionProgressing, metav1.ConditionFalse, reasonStageWaiting, waiting)
			statuses = append(statuses, s)
			continue
		}
		t := metav1.NewTime(ps.now)
		s.EndTime = &t
		ps.setStageCondition(&s, api.StageConditionProgressing, metav1.ConditionFalse, reasonStageSucceeded, "")
		ps.setStageCondition(&s, api.StageConditionSucceeded, metav1.ConditionTrue, reasonStageSucceeded, "")
		blocked = false
		statuses = append(statuses, s)
	}
	run.Status.StagesStatus = statuses
	deletion, deletionDone := ps.deletionStage(run, pr, blocked)
	run.Status.DeletionStageStatus = &deletion

	// Clusters scheduled after the run began are not the run's: reported.
	var joined []string
	for _, n := range sortedKeys(ps.scheduled) {
		if !scheduledInRun[n] {
			joined = append(joined, n)
		}
	}
	note := ""
	if len(joined) > 0 {
		note = fmt.Sprintf("; cluster(s) %s joined after the run began and are not updated by it (start a new run to update them)", strings.Join(joined, ", "))
	}
	switch {
	case !blocked && deletionDone:
		ps.setRunCondition(run, api.UpdateRunConditionProgressing, metav1.ConditionFalse, reasonSucceeded, "the run completed"+note)
		ps.setRunCondition(run, api.UpdateRunConditionSucceeded, metav1.ConditionTrue, reasonSucceeded,
			fmt.Sprintf("resource snapshot %d rolled out to every stage%s", pr.Index, note))
		sr.why = ""
	case run.Spec.State == api.UpdateRunStateInitialize:
		ps.setRunCondition(run, api.UpdateRunConditionProgressing, metav1.ConditionFalse, reasonNotStarted, "the run is initialized; set its state to Run to start it"+note)
		sr.why = "staged update run " + run.Name + " is initialized and not started"
	case run.Spec.State == api.UpdateRunStateStop:
		ps.setRunCondition(run, api.UpdateRunConditionProgressing, metav1.ConditionFalse, reasonStopped, "the run is stopped; set its state to Run to resume it"+note)
		sr.why = "staged update run " + run.Name + " is stopped"
	case stuck != "":
		ps.setRunCondition(run, api.UpdateRunConditionProgressing, metav1.ConditionFalse, reasonStuck, stuck+note)
		sr.why = "staged update run " + run.Name + ": " + stuck
	case strings.Contains(waiting, "waits for approval") || strings.Contains(waiting, "timed wait"):
		ps.setRunCondition(run, api.UpdateRunConditionProgressing, metav1.ConditionFalse, reasonWaiting, waiting+note)
		sr.why = "staged update run " + run.Name + ": " + waiting
	default:
		ps.setRunCondition(run, api.UpdateRunConditionProgressing, metav1.ConditionTrue, reasonStarted, waiting+note)
		sr.why = "staged update run " + run.Name + ": " + waiting
	}
	return nil
}

// deletionStage reports the clusters the placement leaves: done once none
// holds it. Before the update stages end it has not started.
func (ps *pass) deletionStage(run *api.ClusterStagedUpdateRun, pr *runProgress, blocked bool) (api.StageUpdatingStatus, bool) {
	prev := run.Status.DeletionStageStatus
	s := api.StageUpdatingStatus{StageName: api.UpdateRunDeletionStageName, Clusters: []api.ClusterUpdatingStatus{}}
	byName := map[string]api.ClusterUpdatingStatus{}
	if prev != nil {
		s.StartTime, s.EndTime, s.Conditions = prev.StartTime, prev.EndTime, prev.Conditions
		for _, c := range prev.Clusters {
			byName[c.ClusterName] = c
		}
	}
	done := true
	for _, n := range pr.Deletion {
		c := byName[n]
		c.ClusterName = n
		if cr := ps.clusters[n]; cr != nil && cr.holds() && !ps.scheduled[n] {
			done = false
		} else if !blocked {
			ps.setClusterCondition(&c, api.ClusterUpdatingConditionStarted, metav1.ConditionTrue, reasonClusterStarted, "")
			ps.setClusterCondition(&c, api.ClusterUpdatingConditionSucceeded, metav1.ConditionTrue, reasonClusterDone, "the placement's resources were removed")
		}
		s.Clusters = append(s.Clusters, c)
	}
	if !blocked {
		if s.StartTime == nil {
			t := metav1.NewTime(ps.now)
			s.StartTime = &t
		}
		if done {
			if s.EndTime == nil {
				t := metav1.NewTime(ps.now)
				s.EndTime = &t
			}
			ps.setStageCondition(&s, api.StageConditionSucceeded, metav1.ConditionTrue, reasonStageSucceeded, "")
		} else {
			ps.setStageCondition(&s, api.StageConditionProgressing, metav1.ConditionTrue, reasonStageProgress, "removing the placement from the clusters it leaves")
		}
	}
	return s, done
}

// approvals creates the approval request of a stage's Approval task when
// there is one, and reports whether it is approved (true when the stage has
// no such task); an approved request is marked ApprovalAccepted.
func (ps *pass) approvals(ctx context.Context, run *api.ClusterStagedUpdateRun, stageName string, before bool, tasks []api.StageTaskStatus) (bool, error) {
	for k := range tasks {
		t := &tasks[k]
		if t.Type != api.StageTaskTypeApproval {
			continue
		}
		name := api.ApprovalRequestName(run.Name, stageName, before)
		t.ApprovalRequestName = name
		row, err := lockStaged(ctx, ps.tx, api.ClusterApprovalRequestKind, name)
		if err != nil {
			return false, err
		}
		key := events.StagedUpdateKey{Kind: api.ClusterApprovalRequestKind, Name: name}
		placement := ps.p.name
		if row == nil || row.deleted {
			taskType := "afterStage"
			if before {
				taskType = "beforeStage"
			}
			req := api.ClusterApprovalRequest{
				TypeMeta: metav1.TypeMeta{APIVersion: api.PlacementGroupVersion.String(), Kind: api.ClusterApprovalRequestKind},
				ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(ps.now.UTC().Truncate(time.Second)),
					Labels: map[string]string{api.TargetUpdateRunLabel: run.Name, api.TargetUpdatingStageLabel: stageName,
						api.IsLatestUpdateRunApprovalLabel: "true", "kubernetes-fleet.io/taskType": taskType}},
				Spec: api.ApprovalRequestSpec{TargetUpdateRun: run.Name, TargetStage: stageName},
			}
			if err := storeStaged(ctx, ps.tx, key, &req, &placement, nil, 0, 0); err != nil {
				return false, err
			}
			ps.setTaskCondition(t, api.StageTaskConditionApprovalRequestCreated, metav1.ConditionTrue, reasonApprovalCreated, "")
			return false, nil
		}
		var req api.ClusterApprovalRequest
		if err := json.Unmarshal(row.object, &req); err != nil {
			return false, fmt.Errorf("read approval request %s: %w", name, err)
		}
		ps.setTaskCondition(t, api.StageTaskConditionApprovalRequestCreated, metav1.ConditionTrue, reasonApprovalCreated, "")
		if !meta.IsStatusConditionTrue(req.Status.Conditions, api.ApprovalRequestConditionApproved) {
			return false, nil
		}
		if meta.SetStatusCondition(&req.Status.Conditions, metav1.Condition{Type: api.ApprovalRequestConditionApprovalAccepted,
			Status: metav1.ConditionTrue, Reason: "ApprovalRequestApprovalAccepted", Message: "the run goes on", LastTransitionTime: metav1.NewTime(ps.now)}) {
			if err := storeStaged(ctx, ps.tx, key, &req, &placement, nil, row.createdSeq, row.eventSeq); err != nil {
				return false, err
			}
		}
		ps.setTaskCondition(t, api.StageTaskConditionApprovalRequestApproved, metav1.ConditionTrue, reasonApproved, "")
	}
	return true, nil
}

func (ps *pass) left(n string) bool {
	_, gone := ps.gone[n]
	return gone
}

// succeeded reports whether a cluster holds the run's snapshot, applied and
// available.
func (ps *pass) succeeded(n string) bool {
	c := ps.clusters[n]
	return c != nil && c.holds() && c.workKey == ps.keyFor(n) && ps.readiness[n].Ready
}

func (ps *pass) clusterWhy(n string) string {
	if why := ps.readiness[n].Why; why != "" {
		return why
	}
	return "not yet applied and available"
}

// taskStatuses lines a stage's task statuses up with its tasks.
func (ps *pass) taskStatuses(tasks []api.StageTask, prev []api.StageTaskStatus) []api.StageTaskStatus {
	if len(tasks) == 0 {
		return nil
	}
	out := make([]api.StageTaskStatus, 0, len(tasks))
	for _, t := range tasks {
		s := api.StageTaskStatus{Type: t.Type}
		for _, p := range prev {
			if p.Type == t.Type {
				s = p
			}
		}
		out = append(out, s)
	}
	return out
}

func taskWait(tasks []api.StageTask, typ api.StageTaskType) time.Duration {
	for _, t := range tasks {
		if t.Type == typ && t.WaitTime != nil {
			return t.WaitTime.Duration
		}
	}
	return 0
}

func (ps *pass) condition(t string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: status, Reason: reason, Message: events.Truncate(msg, events.MaxMessageBytes),
		LastTransitionTime: metav1.NewTime(ps.now)}
}

func (ps *pass) setRunCondition(r *api.ClusterStagedUpdateRun, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&r.Status.Conditions, ps.condition(t, s, reason, msg))
}

func (ps *pass) setStageCondition(st *api.StageUpdatingStatus, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&st.Conditions, ps.condition(t, s, reason, msg))
}

func (ps *pass) setClusterCondition(c *api.ClusterUpdatingStatus, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&c.Conditions, ps.condition(t, s, reason, msg))
}

func (ps *pass) setTaskCondition(ts *api.StageTaskStatus, t string, s metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&ts.Conditions, ps.condition(t, s, reason, msg))
}

// encode is the run's object and progress as JSON, one after the other.
func (sr *stagedRun) encode() ([]byte, error) {
	object, err := json.Marshal(sr.run)
	if err != nil {
		return nil, fmt.Errorf("encode run %s: %w", sr.run.Name, err)
	}
	progress, err := json.Marshal(sr.progress)
	if err != nil {
		return nil, fmt.Errorf("encode run %s: %w", sr.run.Name, err)
	}
	return append(append(object, 0), progress...), nil
}

// saveRun writes the run's status and progress when they changed.
func (ps *pass) saveRun(ctx context.Context, sr *stagedRun) error {
	both, err := sr.encode()
	if err != nil {
		return err
	}
	if string(both) == string(sr.before) {
		return nil
	}
	i := slices.Index(both, 0)
	object, progress := both[:i], both[i+1:]
	_, err = ps.tx.Exec(ctx, `update staged_updates set object = $3, progress = $4, updated_at = now() where kind = $1 and name = $2`,
		api.ClusterStagedUpdateRunKind, sr.run.Name, object, progress)
	if err != nil {
		return fmt.Errorf("save run %s: %w", sr.run.Name, err)
	}
	return nil
}

// approveCommand is the fleetctl command that approves the request named key:
// a ClusterApprovalRequest, or the ApprovalRequest of a StagedUpdateRun.
func approveCommand(key string) string {
	if ns, name := api.SplitPlacementKey(key); ns != "" {
		return fmt.Sprintf("fleetctl approve approvalrequest %s -n %s", name, ns)
	}
	return "fleetctl approve clusterapprovalrequest " + key
}
