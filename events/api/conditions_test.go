package api

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestContractMessages(t *testing.T) {
	tests := []struct{ got, want string }{
		{ApplyFailedMessage(2), "Failed to apply resources to 2 cluster(s), please check the `failedPlacements` status"},
		{ScheduledMessage("member-1", 20, 0), `Successfully scheduled resources for placement in "member-1" (affinity score: 20, topology spread score: 0): picked by scheduling policy`},
		{ManifestApplyFailedMessage(NotTakenOverError), "Failed to apply the manifest (error: no ownership of the object in the member cluster; takeover is needed)"},
		{ManifestApplyFailedMessage(FailedToTakeOverError), "Failed to apply the manifest (error: cannot take over object: configuration differences are found between the manifest object and the corresponding object in the member cluster)"},
		{ManifestApplyFailedMessage(FoundDriftsError), "Failed to apply the manifest (error: cannot apply manifest: drifts are found between the manifest and the object from the member cluster)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got  %q\nwant %q", tt.got, tt.want)
		}
	}
}

func TestPlacementCondition(t *testing.T) {
	tests := []struct {
		t              ClusterResourcePlacementConditionType
		s              metav1.ConditionStatus
		reason, prefix string
	}{
		{ClusterResourcePlacementRolloutStartedConditionType, metav1.ConditionTrue, RolloutStartedReason, "All 3 cluster(s)"},
		{ClusterResourcePlacementRolloutStartedConditionType, metav1.ConditionFalse, RolloutNotStartedYetReason, "The rollout is being blocked"},
		{ClusterResourcePlacementRolloutStartedConditionType, metav1.ConditionUnknown, RolloutStartedUnknownReason, "There are still 3"},
		{ClusterResourcePlacementOverriddenConditionType, metav1.ConditionTrue, OverrideNotSpecifiedReason, "No override rules"},
		{ClusterResourcePlacementOverriddenConditionType, metav1.ConditionFalse, OverriddenFailedReason, "Failed to override"},
		{ClusterResourcePlacementOverriddenConditionType, metav1.ConditionUnknown, OverriddenPendingReason, "There are still 3"},
		{ClusterResourcePlacementWorkSynchronizedConditionType, metav1.ConditionTrue, WorkSynchronizedReason, "Works(s) are successfully"},
		{ClusterResourcePlacementWorkSynchronizedConditionType, metav1.ConditionFalse, WorkNotSynchronizedYetReason, "There are 3 cluster(s)"},
		{ClusterResourcePlacementWorkSynchronizedConditionType, metav1.ConditionUnknown, WorkSynchronizedUnknownReason, "There are still 3"},
		{ClusterResourcePlacementAppliedConditionType, metav1.ConditionTrue, ApplySucceededReason, "The selected resources are successfully applied to 3"},
		{ClusterResourcePlacementAppliedConditionType, metav1.ConditionFalse, ApplyFailedReason, ApplyFailedMessage(3)},
		{ClusterResourcePlacementAppliedConditionType, metav1.ConditionUnknown, ApplyPendingReason, "There are still 3"},
		{ClusterResourcePlacementAvailableConditionType, metav1.ConditionTrue, AvailableReason, "The selected resources in 3 cluster(s) are available now"},
		{ClusterResourcePlacementAvailableConditionType, metav1.ConditionFalse, NotAvailableYetReason, "The selected resources in 3"},
		{ClusterResourcePlacementAvailableConditionType, metav1.ConditionUnknown, AvailableUnknownReason, "There are still 3"},
		{ClusterResourcePlacementDiffReportedConditionType, metav1.ConditionTrue, DiffReportedStatusTrueReason, "Diff reporting in 3"},
		{ClusterResourcePlacementDiffReportedConditionType, metav1.ConditionFalse, DiffReportedStatusFalseReason, "Diff reporting in 3"},
		{ClusterResourcePlacementDiffReportedConditionType, metav1.ConditionUnknown, DiffReportedStatusUnknownReason, "There are still 3"},
	}
	for _, tt := range tests {
		c := PlacementCondition(tt.t, tt.s, 3, 7)
		if c.Type != string(tt.t) || c.Status != tt.s || c.Reason != tt.reason || c.ObservedGeneration != 7 || len(c.Message) < len(tt.prefix) || c.Message[:len(tt.prefix)] != tt.prefix {
			t.Errorf("PlacementCondition(%s, %s) = %+v, want reason %s and a message starting %q", tt.t, tt.s, c, tt.reason, tt.prefix)
		}
	}
	if c := PlacementCondition(ClusterResourcePlacementScheduledConditionType, metav1.ConditionTrue, 1, 1); c.Reason != "" {
		t.Errorf("Scheduled has no standard condition, got %+v", c)
	}
}
