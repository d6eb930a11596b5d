package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Staged updates drive the placements whose strategy type is External:
// Fleet's ClusterStagedUpdateStrategy, ClusterStagedUpdateRun and
// ClusterApprovalRequest (placement.kubernetes-fleet.io v1beta1 and v1, the
// same fields in each), field for field.

// ClusterStagedUpdateStrategy is a reusable order of stages in which a run
// updates the clusters a placement is scheduled on.
type ClusterStagedUpdateStrategy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec UpdateStrategySpec `json:"spec"`

	// Placeholders: see ClusterResourcePlacement.Placeholders.
	Placeholders []string `json:"-"`
}

// UpdateStrategySpec lists the stages, run in order (at most 31).
type UpdateStrategySpec struct {
	Stages []StageConfig `json:"stages"`
}

// StageConfig is one stage: the clusters its label selector picks, updated
// in the order of sortingLabelKey, at most maxConcurrency at a time.
type StageConfig struct {
	// Name is unique in the strategy: lower-case letters and digits, at most
	// 63 characters.
	Name string `json:"name"`
	// LabelSelector picks the stage's clusters among those the placement is
	// scheduled on: nil picks none, empty picks all. No cluster may be in two
	// stages.
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
	// SortingLabelKey orders the stage's clusters: ascending by the label's
	// value read as an integer, then by name.
	SortingLabelKey *string `json:"sortingLabelKey,omitempty"`
	// MaxConcurrency bounds the clusters updated at a time: a number of at
	// least 1 or a percentage of the stage's clusters (1%-100%, rounded down,
	// at least 1). Default 1.
	MaxConcurrency *intstr.IntOrString `json:"maxConcurrency,omitempty"`
	// AfterStageTasks run once every cluster of the stage is updated, at most
	// one of each type: a TimedWait with its waitTime, an Approval.
	AfterStageTasks []StageTask `json:"afterStageTasks,omitempty"`
	// BeforeStageTasks must complete before the stage starts: one Approval.
	BeforeStageTasks []StageTask `json:"beforeStageTasks,omitempty"`
}

// StageTaskType is the type of a stage task.
type StageTaskType string

// Stage task types.
const (
	StageTaskTypeTimedWait StageTaskType = "TimedWait"
	StageTaskTypeApproval  StageTaskType = "Approval"
)

// StageTask is a task before or after a stage.
type StageTask struct {
	Type StageTaskType `json:"type"`
	// WaitTime is how long a TimedWait waits (hours, minutes and seconds
	// only); not allowed on an Approval.
	WaitTime *metav1.Duration `json:"waitTime,omitempty"`
}

// UpdateRunState is the state a user asks a run to be in.
type UpdateRunState string

// Run states: Initialize computes the stages and waits; Run executes (or
// resumes); Stop pauses. Initialize cannot follow Run or Stop, nor Stop follow
// Initialize.
const (
	UpdateRunStateInitialize UpdateRunState = "Initialize"
	UpdateRunStateRun        UpdateRunState = "Run"
	UpdateRunStateStop       UpdateRunState = "Stop"
)

// ClusterStagedUpdateRun rolls one resource snapshot of a placement out stage
// by stage, as its strategy orders; clusters the placement is no longer
// scheduled on lose it in the deletion stage at the end.
type ClusterStagedUpdateRun struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   UpdateRunSpec   `json:"spec"`
	Status UpdateRunStatus `json:"status,omitempty"`

	// Placeholders: see ClusterResourcePlacement.Placeholders.
	Placeholders []string `json:"-"`
}

// UpdateRunSpec is what a run rolls out, with which strategy. Everything
// but State is immutable.
type UpdateRunSpec struct {
	PlacementName string `json:"placementName"`
	// ResourceSnapshotIndex is the snapshot to roll out; empty for the
	// latest when the run initializes. An older index rolls back.
	ResourceSnapshotIndex    string         `json:"resourceSnapshotIndex"`
	StagedUpdateStrategyName string         `json:"stagedRolloutStrategyName"`
	State                    UpdateRunState `json:"state,omitempty"`
}

// UpdateRunStatus is what a run did and does.
type UpdateRunStatus struct {
	PolicySnapshotIndexUsed    string                `json:"policySnapshotIndexUsed,omitempty"`
	PolicyObservedClusterCount int                   `json:"policyObservedClusterCount,omitempty"`
	ResourceSnapshotIndexUsed  string                `json:"resourceSnapshotIndexUsed,omitempty"`
	ApplyStrategy              *ApplyStrategy        `json:"appliedStrategy,omitempty"`
	UpdateStrategySnapshot     *UpdateStrategySpec   `json:"stagedUpdateStrategySnapshot,omitempty"`
	StagesStatus               []StageUpdatingStatus `json:"stagesStatus,omitempty"`
	DeletionStageStatus        *StageUpdatingStatus  `json:"deletionStageStatus,omitempty"`
	// Conditions: Initialized, Progressing, Succeeded.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// StageUpdatingStatus is the progress of one stage (or of the deletion stage).
type StageUpdatingStatus struct {
	StageName             string                  `json:"stageName"`
	Clusters              []ClusterUpdatingStatus `json:"clusters"`
	AfterStageTaskStatus  []StageTaskStatus       `json:"afterStageTaskStatus,omitempty"`
	BeforeStageTaskStatus []StageTaskStatus       `json:"beforeStageTaskStatus,omitempty"`
	StartTime             *metav1.Time            `json:"startTime,omitempty"`
	EndTime               *metav1.Time            `json:"endTime,omitempty"`
	// Conditions: Progressing, Succeeded.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterUpdatingStatus is the progress of one cluster of a stage.
type ClusterUpdatingStatus struct {
	ClusterName                      string           `json:"clusterName"`
	ResourceOverrideSnapshots        []NamespacedName `json:"resourceOverrideSnapshots,omitempty"`
	ClusterResourceOverrideSnapshots []string         `json:"clusterResourceOverrideSnapshots,omitempty"`
	// Conditions: Started, Succeeded.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// StageTaskStatus is the progress of one task of a stage.
type StageTaskStatus struct {
	Type                StageTaskType `json:"type"`
	ApprovalRequestName string        `json:"approvalRequestName,omitempty"`
	// Conditions: ApprovalRequestCreated, ApprovalRequestApproved,
	// WaitTimeElapsed.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterApprovalRequest asks a user to approve a stage of a run, before it
// starts (<run>-before-<stage>) or after it ends (<run>-after-<stage>). The
// user sets the condition Approved (fleetctl approve); the run then sets
// ApprovalAccepted and goes on.
type ClusterApprovalRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ApprovalRequestSpec   `json:"spec"`
	Status ApprovalRequestStatus `json:"status,omitempty"`

	// Placeholders: see ClusterResourcePlacement.Placeholders.
	Placeholders []string `json:"-"`
}

// ApprovalRequestSpec names the run and stage a request is for; immutable.
type ApprovalRequestSpec struct {
	TargetUpdateRun string `json:"parentStageRollout"`
	TargetStage     string `json:"targetStage"`
}

// ApprovalRequestStatus holds the conditions Approved and ApprovalAccepted.
type ApprovalRequestStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Condition types and reasons of staged updates (upstream's names).
const (
	UpdateRunConditionInitialized = "Initialized"
	UpdateRunConditionProgressing = "Progressing"
	UpdateRunConditionSucceeded   = "Succeeded"

	StageConditionProgressing = "Progressing"
	StageConditionSucceeded   = "Succeeded"

	ClusterUpdatingConditionStarted   = "Started"
	ClusterUpdatingConditionSucceeded = "Succeeded"

	StageTaskConditionApprovalRequestCreated  = "ApprovalRequestCreated"
	StageTaskConditionApprovalRequestApproved = "ApprovalRequestApproved"
	StageTaskConditionWaitTimeElapsed         = "WaitTimeElapsed"

	ApprovalRequestConditionApproved         = "Approved"
	ApprovalRequestConditionApprovalAccepted = "ApprovalAccepted"

	// UpdateRunDeletionStageName names the deletion stage in a run's status.
	UpdateRunDeletionStageName = "kubernetes-fleet.io/deleteStage"
)

// Labels upstream puts on a ClusterApprovalRequest.
const (
	TargetUpdateRunLabel           = "kubernetes-fleet.io/targetupdaterun"
	TargetUpdatingStageLabel       = "kubernetes-fleet.io/targetUpdatingStage"
	IsLatestUpdateRunApprovalLabel = "kubernetes-fleet.io/isLatestUpdateRunApproval"
)

// StuckThresholdAnnotation, on a ClusterStagedUpdateStrategy, is how long (a
// Go duration, such as 10m) a cluster of a run may take to be applied and
// available before the run reports itself stuck (condition Progressing False,
// reason UpdateRunStuck). Upstream hard-codes 5 minutes; an annotation keeps
// the strategy valid for upstream too.
const StuckThresholdAnnotation = "flotilla.dev/stuck-threshold"

// ApprovalRequestName is upstream's name of the approval request of a
// stage's task: <run>-before-<stage> or <run>-after-<stage>.
func ApprovalRequestName(run, stage string, before bool) string {
	if before {
		return run + "-before-" + stage
	}
	return run + "-after-" + stage
}
