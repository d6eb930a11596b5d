package api

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterResourcePlacementConditionType is a placement-level condition type.
type ClusterResourcePlacementConditionType string

// Placement-level condition types, in the order a placement progresses.
const (
	ClusterResourcePlacementScheduledConditionType        ClusterResourcePlacementConditionType = "ClusterResourcePlacementScheduled"
	ClusterResourcePlacementRolloutStartedConditionType   ClusterResourcePlacementConditionType = "ClusterResourcePlacementRolloutStarted"
	ClusterResourcePlacementOverriddenConditionType       ClusterResourcePlacementConditionType = "ClusterResourcePlacementOverridden"
	ClusterResourcePlacementWorkSynchronizedConditionType ClusterResourcePlacementConditionType = "ClusterResourcePlacementWorkSynchronized"
	ClusterResourcePlacementAppliedConditionType          ClusterResourcePlacementConditionType = "ClusterResourcePlacementApplied"
	ClusterResourcePlacementAvailableConditionType        ClusterResourcePlacementConditionType = "ClusterResourcePlacementAvailable"
	// ClusterResourcePlacementDiffReportedConditionType is set with the ReportDiff apply strategy only.
	ClusterResourcePlacementDiffReportedConditionType ClusterResourcePlacementConditionType = "ClusterResourcePlacementDiffReported"

	// ClusterResourcePlacementSynchronizedConditionType appears in older docs
	// (with reason SynchronizeSucceeded); Flotilla reads it but does not set it.
	ClusterResourcePlacementSynchronizedConditionType ClusterResourcePlacementConditionType = "ClusterResourcePlacementSynchronized"
)

// PerClusterPlacementConditionType is a condition type in placementStatuses[].conditions.
type PerClusterPlacementConditionType string

// Per-cluster condition types.
const (
	PerClusterScheduledConditionType        PerClusterPlacementConditionType = "Scheduled"
	PerClusterRolloutStartedConditionType   PerClusterPlacementConditionType = "RolloutStarted"
	PerClusterOverriddenConditionType       PerClusterPlacementConditionType = "Overridden"
	PerClusterWorkSynchronizedConditionType PerClusterPlacementConditionType = "WorkSynchronized"
	PerClusterAppliedConditionType          PerClusterPlacementConditionType = "Applied"
	PerClusterAvailableConditionType        PerClusterPlacementConditionType = "Available"
	PerClusterDiffReportedConditionType     PerClusterPlacementConditionType = "DiffReported"
)

// Condition reasons shared by the placement-level and per-cluster conditions.
const (
	// Scheduled.
	SchedulingPolicyFulfilledReason   = "SchedulingPolicyFulfilled"
	SchedulingPolicyUnfulfilledReason = "SchedulingPolicyUnfulfilled"
	InvalidResourceSelectorsReason    = "InvalidResourceSelectors"
	SchedulePendingReason             = "SchedulePending"

	// RolloutStarted.
	RolloutStartedReason        = "RolloutStarted"
	RolloutNotStartedYetReason  = "RolloutNotStartedYet"
	RolloutStartedUnknownReason = "RolloutStartedUnknown"

	// Overridden.
	OverriddenSucceededReason  = "OverriddenSucceeded"
	OverrideNotSpecifiedReason = "NoOverrideSpecified"
	OverriddenFailedReason     = "OverriddenFailed"
	OverriddenPendingReason    = "OverriddenPending"

	// WorkSynchronized.
	WorkSynchronizedReason        = "WorkSynchronized"
	WorkNotSynchronizedYetReason  = "WorkNotSynchronizedYet"
	WorkSynchronizedUnknownReason = "WorkSynchronizedUnknown"

	// Applied.
	ApplySucceededReason = "ApplySucceeded"
	ApplyFailedReason    = "ApplyFailed"
	ApplyPendingReason   = "ApplyPending"

	// Available.
	AvailableReason        = "ResourceAvailable"
	NotAvailableYetReason  = "ResourceNotAvailableYet"
	AvailableUnknownReason = "ResourceAvailableUnknown"

	// DiffReported.
	DiffReportedStatusTrueReason    = "DiffReportingCompleted"
	DiffReportedStatusFalseReason   = "DiffReportingIncompleteOrFailed"
	DiffReportedStatusUnknownReason = "DiffReportingPending"

	// SynchronizeSucceededReason belongs to the legacy Synchronized condition.
	SynchronizeSucceededReason = "SynchronizeSucceeded"
)

// Reasons of the per-cluster Scheduled condition.
const (
	ScheduleSucceededReason = "Scheduled"
	ScheduleFailedReason    = "ScheduleFailed"
)

// Per-manifest reasons, found in failedPlacements[].condition.reason (condition
// type Applied or Available).
const (
	// Applied=False.
	ManifestNotTakenOverReason              = "NotTakenOver"
	ManifestFailedToTakeOverReason          = "FailedToTakeOver"
	ManifestFoundDriftsReason               = "FoundDrifts"
	ManifestDecodingErredReason             = "DecodingErred"
	ManifestFoundGenerateNameReason         = "FoundGenerateName"
	ManifestDuplicatedReason                = "Duplicated"
	ManifestApplyFailedReason               = "ManifestApplyFailed"
	ManifestFailedToRunDriftDetectionReason = "FailedToRunDriftDetection"

	// Available.
	ManifestAvailableReason       = "Available"
	ManifestNotAvailableYetReason = "ManifestNotAvailableYet"
	ManifestNotTrackableReason    = "NotTrackable"
)

// Error texts that go inside ManifestApplyFailedMessage.
const (
	// NotTakenOverError: the object exists, is not ours, and whenToTakeOver is Never.
	NotTakenOverError = "no ownership of the object in the member cluster; takeover is needed"
	// FailedToTakeOverError: whenToTakeOver is IfNoDiff and the object differs, or
	// others own it and co-ownership is off.
	FailedToTakeOverError = "cannot take over object: configuration differences are found between the manifest object and the corresponding object in the member cluster"
	// FoundDriftsError: whenToApply is IfNotDrifted and the object drifted.
	FoundDriftsError = "cannot apply manifest: drifts are found between the manifest and the object from the member cluster"
)

// ManifestApplyFailedMessage is the message of a failed per-manifest Applied
// condition, e.g. ManifestApplyFailedMessage(NotTakenOverError).
func ManifestApplyFailedMessage(text string) string {
	return fmt.Sprintf("Failed to apply the manifest (error: %s)", text)
}

// ApplyFailedMessage is the message of ClusterResourcePlacementApplied=False.
func ApplyFailedMessage(clusters int) string {
	return fmt.Sprintf("Failed to apply resources to %d cluster(s), please check the `failedPlacements` status", clusters)
}

// ScheduledMessage is the message of a per-cluster Scheduled=True condition.
func ScheduledMessage(cluster string, affinityScore, topologySpreadScore int32) string {
	return fmt.Sprintf("Successfully scheduled resources for placement in %q (affinity score: %d, topology spread score: %d): picked by scheduling policy",
		cluster, affinityScore, topologySpreadScore)
}

// Scheduling messages of ClusterResourcePlacementScheduled.
const (
	SchedulingPolicyFulfilledMessage = "found all the clusters needed as specified by the scheduling policy"
	SchedulePendingMessage           = "Scheduling has not completed"
)

// SchedulingPolicyUnfulfilledMessage says how many clusters were found of those wanted.
func SchedulingPolicyUnfulfilledMessage(found, wanted int) string {
	return fmt.Sprintf("could not find all the clusters needed as specified by the scheduling policy: found %d of %d", found, wanted)
}

// OverriddenSucceededPlacementMessage is the message of a True
// ClusterResourcePlacementOverridden condition when overrides apply on some cluster.
func OverriddenSucceededPlacementMessage(clusters int) string {
	return fmt.Sprintf("The selected resources are successfully overridden in %d cluster(s)", clusters)
}

// PlacementCondition returns the standard placement-level condition of type t
// with status s, for a placement whose condition concerns the given number of
// clusters: reason and message are the contract's. Scheduled is not covered
// (its messages depend on the decision; see the Scheduling* messages).
func PlacementCondition(t ClusterResourcePlacementConditionType, s metav1.ConditionStatus, clusters int, generation int64) metav1.Condition {
	c := metav1.Condition{Type: string(t), Status: s, ObservedGeneration: generation}
	c.Reason, c.Message = placementReasonMessage(t, s, clusters)
	return c
}

func placementReasonMessage(t ClusterResourcePlacementConditionType, s metav1.ConditionStatus, n int) (string, string) {
	type key struct {
		t ClusterResourcePlacementConditionType
		s metav1.ConditionStatus
	}
	const (
		yes = metav1.ConditionTrue
		no  = metav1.ConditionFalse
		unk = metav1.ConditionUnknown
	)
	table := map[key]struct{ reason, format string }{
		{ClusterResourcePlacementRolloutStartedConditionType, yes}:   {RolloutStartedReason, "All %d cluster(s) start rolling out the latest resource"},
		{ClusterResourcePlacementRolloutStartedConditionType, no}:    {RolloutNotStartedYetReason, "The rollout is being blocked by the rollout strategy in %d cluster(s)"},
		{ClusterResourcePlacementRolloutStartedConditionType, unk}:   {RolloutStartedUnknownReason, "There are still %d cluster(s) in the process of deciding whether to roll out the latest resources or not"},
		{ClusterResourcePlacementOverriddenConditionType, yes}:       {OverrideNotSpecifiedReason, "No override rules are configured for the selected resources in %d cluster(s)"},
		{ClusterResourcePlacementOverriddenConditionType, no}:        {OverriddenFailedReason, "Failed to override resources in %d cluster(s)"},
		{ClusterResourcePlacementOverriddenConditionType, unk}:       {OverriddenPendingReason, "There are still %d cluster(s) in the process of overriding the selected resources if there is any override defined"},
		{ClusterResourcePlacementWorkSynchronizedConditionType, yes}: {WorkSynchronizedReason, "Works(s) are successfully created or updated in %d target cluster(s)"},
		{ClusterResourcePlacementWorkSynchronizedConditionType, no}:  {WorkNotSynchronizedYetReason, "There are %d cluster(s) which have not finished creating or updating work(s) yet"},
		{ClusterResourcePlacementWorkSynchronizedConditionType, unk}: {WorkSynchronizedUnknownReason, "There are still %d cluster(s) in the process of creating or updating the work object(s)"},
		{ClusterResourcePlacementAppliedConditionType, yes}:          {ApplySucceededReason, "The selected resources are successfully applied to %d cluster(s)"},
		{ClusterResourcePlacementAppliedConditionType, no}:           {ApplyFailedReason, "Failed to apply resources to %d cluster(s), please check the `failedPlacements` status"},
		{ClusterResourcePlacementAppliedConditionType, unk}:          {ApplyPendingReason, "There are still %d cluster(s) in the process of applying the resources on the member cluster"},
		{ClusterResourcePlacementAvailableConditionType, yes}:        {AvailableReason, "The selected resources in %d cluster(s) are available now"},
		{ClusterResourcePlacementAvailableConditionType, no}:         {NotAvailableYetReason, "The selected resources in %d cluster(s) are still not available yet"},
		{ClusterResourcePlacementAvailableConditionType, unk}:        {AvailableUnknownReason, "There are still %d cluster(s) in the process of checking the availability of the selected resources"},
		{ClusterResourcePlacementDiffReportedConditionType, yes}:     {DiffReportedStatusTrueReason, "Diff reporting in %d cluster(s) has been completed"},
		{ClusterResourcePlacementDiffReportedConditionType, no}:      {DiffReportedStatusFalseReason, "Diff reporting in %d cluster(s) is still in progress or has failed"},
		{ClusterResourcePlacementDiffReportedConditionType, unk}:     {DiffReportedStatusUnknownReason, "There are still %d cluster(s) in the process of reporting diffs"},
	}
	e, ok := table[key{t, s}]
	if !ok {
		return "", ""
	}
	return e.reason, fmt.Sprintf(e.format, n)
}
