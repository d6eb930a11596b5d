package events_test

import (
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

var exampleTime = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// examples holds one payload per event type. Their JSON forms are the golden
// files under testdata/payloads, which document the contract.
func examples() map[string]any {
	ns := api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web-2"}
	deploy := api.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "web-2", Name: "web"}
	strategy := api.ApplyStrategy{
		Type:             api.ApplyStrategyTypeClientSideApply,
		ComparisonOption: api.ComparisonOptionTypePartialComparison,
		WhenToApply:      api.WhenToApplyTypeAlways,
		WhenToTakeOver:   api.WhenToTakeOverTypeIfNoDiff,
	}
	diff := []api.PatchDetail{{Path: "/metadata/labels/team", ValueInMember: "blue", ValueInHub: "green"}}
	return map[string]any{
		events.TypePlacementUpserted: events.PlacementUpserted{Placement: api.ClusterResourcePlacement{
			TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
			ObjectMeta: metav1.ObjectMeta{Name: "web-2-crp"},
			Spec: api.PlacementSpec{
				ResourceSelectors: []api.ClusterResourceSelector{{Group: "", Version: "v1", Kind: "Namespace",
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web-2"}}}},
				Policy:   &api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: ptr(int32(2))},
				Strategy: api.RolloutStrategy{ApplyStrategy: &strategy},
			},
		}},
		events.TypePlacementDeleted: events.PlacementDeleted{Name: "web-2-crp"},
		events.TypeMemberJoined: events.MemberJoined{Member: api.MemberCluster{
			TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1beta1", Kind: "MemberCluster"},
			ObjectMeta: metav1.ObjectMeta{Name: "member-1", Labels: map[string]string{"region": "eastus", "environment": "production"}},
			Spec:       api.MemberClusterSpec{HeartbeatPeriodSeconds: 60, Taints: []api.Taint{{Key: "gpu", Value: "true", Effect: api.TaintEffectNoSchedule}}},
		}},
		events.TypeMemberUpdated: events.MemberUpdated{Member: api.MemberCluster{
			TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1beta1", Kind: "MemberCluster"},
			ObjectMeta: metav1.ObjectMeta{Name: "member-1", Labels: map[string]string{"region": "westus"}},
			Spec:       api.MemberClusterSpec{HeartbeatPeriodSeconds: 30},
		}},
		events.TypeMemberLeft: events.MemberLeft{Name: "member-1", LeavePolicy: events.LeaveKeep},
		events.TypeMemberHeartbeat: events.MemberHeartbeat{
			Name: "member-1", Healthy: true, ObservedAt: exampleTime,
			Properties: map[api.PropertyName]api.PropertyValue{
				"kubernetes-fleet.io/node-count": {Value: "3", ObservationTime: metav1.NewTime(exampleTime)},
			},
			ResourceUsage: api.ResourceUsage{
				Capacity:        api.ResourceList{"cpu": resource.MustParse("12"), "memory": resource.MustParse("48Gi")},
				Allocatable:     api.ResourceList{"cpu": resource.MustParse("11500m"), "memory": resource.MustParse("44Gi")},
				ObservationTime: metav1.NewTime(exampleTime),
			},
		},
		events.TypeHubResourceUpserted: events.HubResourceUpserted{Manifest: json.RawMessage(
			`{"apiVersion":"v1","kind":"Namespace","metadata":{"labels":{"app":"web-2"},"name":"web-2"}}`)},
		events.TypeHubResourceDeleted: events.HubResourceDeleted{Resource: ns},
		events.TypeOverrideUpserted: events.OverrideUpserted{ResourceOverride: &api.ResourceOverride{
			TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1alpha1", Kind: "ResourceOverride"},
			ObjectMeta: metav1.ObjectMeta{Name: "web-image", Namespace: "web-2"},
			Spec: api.ResourceOverrideSpec{
				Placement:         &api.PlacementRef{Name: "web-2-crp"},
				ResourceSelectors: []api.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}},
				Policy: &api.OverridePolicy{OverrideRules: []api.OverrideRule{{
					ClusterSelector: &api.ClusterSelector{ClusterSelectorTerms: []api.ClusterSelectorTerm{{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"environment": "production"}}}}},
					JSONPatchOverrides: []api.JSONPatchOverride{
						{Operator: api.JSONPatchOverrideOpReplace, Path: "/spec/template/spec/containers/0/image",
							Value: runtime.RawExtension{Raw: []byte(`"nginx:${MEMBER-CLUSTER-LABEL-KEY-region}"`)}},
						{Operator: api.JSONPatchOverrideOpAdd, Path: "/metadata/labels/cluster",
							Value: runtime.RawExtension{Raw: []byte(`"${MEMBER-CLUSTER-NAME}"`)}},
					},
				}, {
					ClusterSelector: &api.ClusterSelector{ClusterSelectorTerms: []api.ClusterSelectorTerm{{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"environment": "test"}}}}},
					OverrideType: api.DeleteOverrideType,
				}}},
			},
		}},
		events.TypeStagedUpdateUpserted: events.StagedUpdateUpserted{ClusterStagedUpdateStrategy: &api.ClusterStagedUpdateStrategy{
			TypeMeta: metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterStagedUpdateStrategy"},
			ObjectMeta: metav1.ObjectMeta{Name: "staging-then-production",
				Annotations: map[string]string{api.StuckThresholdAnnotation: "10m"}},
			Spec: api.UpdateStrategySpec{Stages: []api.StageConfig{
				{Name: "staging", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"environment": "staging"}},
					SortingLabelKey: ptr("order"), MaxConcurrency: ptr(intstr.FromInt32(1))},
				{Name: "production", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"environment": "production"}},
					MaxConcurrency:   ptr(intstr.FromString("50%")),
					BeforeStageTasks: []api.StageTask{{Type: api.StageTaskTypeApproval}},
					AfterStageTasks:  []api.StageTask{{Type: api.StageTaskTypeTimedWait, WaitTime: &metav1.Duration{Duration: time.Minute}}}},
			}},
		}},
		events.TypeStagedUpdateDeleted:     events.StagedUpdateDeleted{Object: events.StagedUpdateKey{Kind: api.ClusterStagedUpdateRunKind, Name: "web-rollout-2"}},
		events.TypeApprovalRequestApproved: events.ApprovalRequestApproved{Name: "web-rollout-2-before-production", Message: "approved by fleetctl"},
		events.TypeDisruptionUpserted: events.DisruptionUpserted{ClusterResourcePlacementEviction: &api.ClusterResourcePlacementEviction{
			TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: api.ClusterResourcePlacementEvictionKind},
			ObjectMeta: metav1.ObjectMeta{Name: "test-eviction"},
			Spec:       api.PlacementEvictionSpec{PlacementName: "test-crp", ClusterName: "kind-cluster-1"},
		}},
		events.TypeDisruptionDeleted: events.DisruptionDeleted{Object: events.DisruptionKey{Kind: api.ClusterResourcePlacementDisruptionBudgetKind, Name: "test-crp"}},
		events.TypeOverrideDeleted:   events.OverrideDeleted{Override: api.OverrideKey{Kind: api.ClusterResourceOverrideKind, Name: "web-2-labels"}},
		events.TypePlacementScheduled: events.PlacementScheduled{
			Placement: "web-2-crp", Generation: 3, PlacementType: api.PickNPlacementType, Wanted: 2,
			Chosen: []events.ClusterDecision{
				{Cluster: "member-1", Action: events.ActionKept, AffinityScore: 20, TopologySpreadScore: 0, Reason: "picked by scheduling policy"},
				{Cluster: "member-3", Action: events.ActionAdded, AffinityScore: 0, TopologySpreadScore: 1, Reason: "picked by scheduling policy"},
			},
			Removed:   []events.ClusterDecision{{Cluster: "member-2", Action: events.ActionRemoved, Reason: "the cluster left the fleet"}},
			NotChosen: []events.ClusterDecision{{Cluster: "member-4", Reason: "the cluster does not match required affinity"}},
			Fulfilled: true,
		},
		events.TypeSnapshotCreated: events.SnapshotCreated{Placement: "web-2-crp", Index: 4, Hash: "sha256:3b1f", Pieces: 1, ResourceCount: 1, SelectedResources: []api.ResourceIdentifier{ns}},
		events.TypeWorkDesired: events.WorkDesired{
			Cluster: "member-1", Placement: "web-2-crp", ResourceIndex: 4, ResourceHash: "sha256:3b1f", Generation: 3,
			Manifests:                []json.RawMessage{json.RawMessage(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"web-2"}}`)},
			ApplyStrategy:            strategy,
			DeleteStrategy:           api.DeleteStrategy{PropagationPolicy: api.DeletePropagationPolicyDelete},
			UnavailablePeriodSeconds: 60,
		},
		events.TypeWorkRemoved: events.WorkRemoved{Cluster: "member-2", Placement: "web-2-crp", TombstoneSequence: 42, RemovedAt: exampleTime},
		events.TypeWorkTombstoned: events.WorkTombstoned{Cluster: "member-2", Placement: "web-2-crp",
			DeleteStrategy: api.DeleteStrategy{PropagationPolicy: api.DeletePropagationPolicyAbandon}, Reason: "the cluster was unscheduled"},
		events.TypeRolloutProgressed: events.RolloutProgressed{Placement: "web-2-crp", Generation: 3, ResourceIndex: 4, Clusters: []events.ClusterRollout{
			{Cluster: "member-1", Started: true, ResourceIndex: 4},
			{Cluster: "member-3", Started: false, ResourceIndex: 3, Reason: "RolloutNotStartedYet", Message: "waiting for member-1 to become available (maxUnavailable 1)"},
		}},
		events.TypeWorkReported: events.WorkReported{
			Cluster: "member-2", Placement: "web-2-crp", ResourceIndex: 4, Generation: 3,
			Manifests: []events.ManifestResult{{
				Resource: deploy,
				Applied: events.Condition{Status: "False", Reason: "FailedToTakeOver",
					Message: "Failed to apply the manifest (error: cannot take over object: configuration differences are found between the manifest object and the corresponding object in the member cluster)"},
				Available: events.Condition{Status: "Unknown", Reason: "ManifestNotAvailableYet"},
				Diffs:     diff, FirstDiffedAt: ptr(exampleTime),
			}},
			Takeovers: []events.TakeoverDecision{{Resource: deploy, Mode: api.WhenToTakeOverTypeIfNoDiff,
				Comparison: api.ComparisonOptionTypePartialComparison, Outcome: "FailedToTakeOver", Diffs: diff, DecidedAt: exampleTime}},
			Counts:     &events.ManifestCounts{Total: 1, Diffed: 1},
			Applied:    events.Condition{Status: "False", Reason: "ApplyFailed", Message: "1 manifest failed to apply"},
			Available:  events.Condition{Status: "Unknown", Reason: "ResourceAvailableUnknown"},
			ObservedAt: exampleTime,
		},
		events.TypeTakeoversDecided: events.TakeoversDecided{
			Cluster: "member-2", Placement: "web-2-crp", ResourceIndex: 4, Generation: 3,
			Takeovers: []events.TakeoverDecision{{Resource: deploy, Mode: api.WhenToTakeOverTypeAlways,
				Comparison: api.ComparisonOptionTypePartialComparison, Outcome: "TakenOver", DecidedAt: exampleTime}},
		},
		events.TypePlacementStatusChanged: events.PlacementStatusChanged{Placement: api.ClusterResourcePlacement{
			TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
			ObjectMeta: metav1.ObjectMeta{Name: "web-2-crp", Generation: 3},
			Spec:       api.PlacementSpec{ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: "web-2"}}},
			Status: api.PlacementStatus{
				ObservedResourceIndex: "4",
				SelectedResources:     []api.ResourceIdentifier{ns},
				Conditions: []metav1.Condition{{Type: "ClusterResourcePlacementScheduled", Status: metav1.ConditionTrue,
					Reason: "SchedulingPolicyFulfilled", Message: "found all cluster needed as specified by the scheduling policy",
					ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(exampleTime)}},
			},
		}},
		events.TypePlacementScheduledV2: events.PlacementScheduledV2{
			Placement: "web-2-crp", Revision: 4, Piece: 0, Pieces: 1, Generation: 3, PlacementType: api.PickNPlacementType,
			Wanted: 3, ChosenCount: 3, Fulfilled: false,
			Message: "found 2 of 3 required clusters; 1 cluster was rejected: 1 did not match required affinity",
			Clusters: []events.ClusterDecision{
				{Cluster: "member-2", Action: events.ActionRemoved, Reason: "the cluster is no longer a member of the fleet"},
				{Cluster: "member-3", Action: events.ActionAdded, AffinityScore: 0, TopologySpreadScore: 1},
				{Cluster: "member-4", Reason: "the cluster does not match any required cluster selector term"},
				{Cluster: "member-5", Action: events.ActionAdded, FailoverReason: api.FailoverReplacementScheduledReason,
					FailoverMessage: "the placement failed over to member-5 from member-6, which is lost: it has been down since 2026-11-21T12:00:00Z (its heartbeats say its API server is unreachable), longer than the failover grace period of 30s"},
				{Cluster: "member-6", Action: events.ActionLost, Reason: "member-6 is lost: ...; the copy on member-6 is removed once member-5 is available and member-6 is back",
					FailoverReason: api.ClusterLostReason, FailoverMessage: "member-6 is lost: ...; the copy on member-6 is removed once member-5 is available and member-6 is back"},
			},
		},
		events.TypeRolloutProgressedV2: events.RolloutProgressedV2{
			Placement: "web-2-crp", Revision: 7, Piece: 0, Pieces: 1, Generation: 3, ResourceIndex: 4, ClusterCount: 2,
			Clusters: []events.ClusterProgress{
				{Cluster: "member-1", Started: true, ResourceIndex: 4, Reason: "RolloutStarted", Message: "Detected the new changes on the resources and started the rollout process",
					Overrides: &events.ClusterOverrides{ResourceOverrides: []api.NamespacedName{{Name: "web-image-0", Namespace: "web-2"}}}},
				{Cluster: "member-2", Removed: true},
				{Cluster: "member-3", Started: false, ResourceIndex: 3, Reason: "RolloutNotStartedYet", Message: "waiting for member-1 to become available (maxUnavailable 1)"},
			},
		},
		events.TypePlacementStatusChangedV2: events.PlacementStatusChangedV2{
			Placement: "web-2-crp", Revision: 12, Piece: 0, Pieces: 1, Generation: 3, ObservedResourceIndex: "4",
			SelectedResourceCount: 1, ClusterCount: 2,
			Conditions: []metav1.Condition{
				{Type: "ClusterResourcePlacementScheduled", Status: metav1.ConditionTrue, Reason: "SchedulingPolicyFulfilled",
					Message: "found all cluster needed as specified by the scheduling policy", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(exampleTime)},
				{Type: "ClusterResourcePlacementApplied", Status: metav1.ConditionFalse, Reason: "ApplyFailed",
					Message: "Failed to apply resources to 1 cluster(s), please check the `failedPlacements` status", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(exampleTime)},
			},
			Clusters: []events.ClusterStatus{
				{Cluster: "member-2", Removed: true},
				{Cluster: "member-3", ObservedResourceIndex: "4", FailedPlacements: 1, Conditions: []metav1.Condition{
					{Type: "Scheduled", Status: metav1.ConditionTrue, Reason: "Scheduled", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(exampleTime),
						Message: `Successfully scheduled resources for placement in "member-3" (affinity score: 0, topology spread score: 1): picked by scheduling policy`},
					{Type: "Applied", Status: metav1.ConditionFalse, Reason: "ApplyFailed", ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(exampleTime),
						Message: "Failed to apply the selected resources, please check the `failedPlacements` status"},
				}},
			},
		},
		events.TypeOutboxQuarantined: events.OutboxQuarantined{
			EventID: "0b8f1c52-2d4e-5b0a-9a43-6f3c2a1d7e90", Type: events.TypeWorkDesired, Subject: "flotilla.work.member-1.web-2-crp",
			Placement: "web-2-crp", Cluster: "member-1", Size: 1843977, Limit: 1048576,
			Reason:        "event 0b8f1c52-2d4e-5b0a-9a43-6f3c2a1d7e90 of type io.flotilla.work.desired.v1 for flotilla.work.member-1.web-2-crp is 1843977 bytes, over the bus limit of 1048576 bytes",
			QuarantinedAt: exampleTime,
		},
	}
}
