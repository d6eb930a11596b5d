package fold_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/status/fold"
)

// Every placement-level condition with each status it can take, the reason and
// message the contract gives it, and the per-cluster conditions behind it.
func TestPlacementConditions(t *testing.T) {
	reportDiff := placement(api.WhenToTakeOverTypeAlways)
	reportDiff.Spec.Strategy.ApplyStrategy.Type = api.ApplyStrategyTypeReportDiff

	tests := []struct {
		name  string
		crp   api.ClusterResourcePlacement
		build func(w *world)
		// want lists the placement conditions in order.
		want []string
		// wantMessage is the message of the last placement condition.
		wantMessage string
		// wantCluster lists member-2's conditions in order.
		wantCluster []string
		// wantClusterMessage is the message of member-2's last condition.
		wantClusterMessage string
	}{
		{
			name:        "no decision yet: SchedulePending",
			build:       func(w *world) {},
			want:        []string{"ClusterResourcePlacementScheduled=Unknown/SchedulePending"},
			wantMessage: api.SchedulePendingMessage,
		},
		{
			name: "decision for an older generation: SchedulePending",
			build: func(w *world) {
				w.schedule("member-1", "member-2")
				crp := placement(api.WhenToTakeOverTypeNever)
				crp.Spec.RevisionHistoryLimit = new(int32(3)) // a new generation
				if _, err := w.in.Upsert(crp, t0); err != nil {
					w.t.Fatal(err)
				}
			},
			want:        []string{"ClusterResourcePlacementScheduled=Unknown/SchedulePending"},
			wantMessage: api.SchedulePendingMessage,
		},
		{
			name: "invalid resource selectors",
			build: func(w *world) {
				w.schedule("member-1", "member-2")
				w.rollout(0, events.ClusterRollout{Reason: api.InvalidResourceSelectorsReason,
					Message: "the selector of kind Deployment is invalid: a ClusterResourcePlacement selects cluster-scoped resources"})
			},
			want:        []string{"ClusterResourcePlacementScheduled=False/InvalidResourceSelectors"},
			wantMessage: "the selector of kind Deployment is invalid: a ClusterResourcePlacement selects cluster-scoped resources",
		},
		{
			name: "invalid resource selectors with no cluster scheduled",
			build: func(w *world) {
				w.schedule()
				w.progress(events.RolloutProgressedV2{Placement: "web-2-crp", Generation: w.gen(),
					Reason: api.InvalidResourceSelectorsReason, Message: "spec.resourceSelectors[0]: kind Pod is namespaced; select its Namespace"})
			},
			want:        []string{"ClusterResourcePlacementScheduled=False/InvalidResourceSelectors"},
			wantMessage: "spec.resourceSelectors[0]: kind Pod is namespaced; select its Namespace",
		},
		{
			name:  "scheduled, rollout not reported: RolloutStartedUnknown",
			build: func(w *world) { w.schedule("member-1", "member-2").snapshot(1) },
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=Unknown/RolloutStartedUnknown"},
			wantMessage:        "There are still 2 cluster(s) in the process of deciding whether to roll out the latest resources or not",
			wantCluster:        []string{"Scheduled=True/Scheduled", "RolloutStarted=Unknown/RolloutStartedUnknown"},
			wantClusterMessage: fold.RolloutStartedUnknownMessage,
		},
		{
			name: "rollout blocked on one cluster: RolloutNotStartedYet with the blocking reason",
			build: func(w *world) {
				w.schedule("member-1", "member-2").snapshot(2).rollout(2, started("member-1", 2),
					events.ClusterRollout{Cluster: "member-2", ResourceIndex: 1, Reason: api.RolloutNotStartedYetReason,
						Message: "waiting for member-1 to become available (maxUnavailable 1)"})
			},
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=False/RolloutNotStartedYet"},
			wantMessage:        "The rollout is being blocked by the rollout strategy in 1 cluster(s)",
			wantCluster:        []string{"Scheduled=True/Scheduled", "RolloutStarted=False/RolloutNotStartedYet"},
			wantClusterMessage: "waiting for member-1 to become available (maxUnavailable 1)",
		},
		{
			name: "overrides apply on one cluster: OverriddenSucceeded",
			build: func(w *world) {
				m2 := started("member-2", 1)
				m2.Overrides = &events.ClusterOverrides{ResourceOverrides: []api.NamespacedName{{Name: "web-image-0", Namespace: "web-2"}}}
				w.schedule("member-1", "member-2").snapshot(1).rollout(1, started("member-1", 1), m2).
					report(applied("member-1", 1)).report(applied("member-2", 1))
			},
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=True/RolloutStarted",
				"ClusterResourcePlacementOverridden=True/OverriddenSucceeded",
				"ClusterResourcePlacementWorkSynchronized=True/WorkSynchronized",
				"ClusterResourcePlacementApplied=True/ApplySucceeded",
				"ClusterResourcePlacementAvailable=True/ResourceAvailable"},
			wantCluster: []string{"Scheduled=True/Scheduled", "RolloutStarted=True/RolloutStarted", "Overridden=True/OverriddenSucceeded",
				"WorkSynchronized=True/WorkSynchronized", "Applied=True/ApplySucceeded", "Available=True/ResourceAvailable"},
			wantMessage:        "The selected resources in 2 cluster(s) are available now",
			wantClusterMessage: fold.AvailableMessage,
		},
		{
			name: "overrides failed on one cluster: OverriddenFailed with the patch and path",
			build: func(w *world) {
				m2 := started("member-2", 1)
				m2.Overrides = &events.ClusterOverrides{ResourceOverrides: []api.NamespacedName{{Name: "web-image-0", Namespace: "web-2"}},
					Failed: `ResourceOverrideSnapshot "web-image-0" failed to apply on Deployment "web" in namespace "web-2": ` +
						`overrideRules[0].jsonPatchOverrides[0] (replace /spec/template/spec/containers/0/image): label key region not found on cluster member-2`}
				w.schedule("member-1", "member-2").snapshot(1).rollout(1, started("member-1", 1), m2).report(applied("member-1", 1))
			},
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=True/RolloutStarted",
				"ClusterResourcePlacementOverridden=False/OverriddenFailed"},
			wantMessage: "Failed to override resources in 1 cluster(s)",
			wantCluster: []string{"Scheduled=True/Scheduled", "RolloutStarted=True/RolloutStarted", "Overridden=False/OverriddenFailed"},
			wantClusterMessage: `Failed to apply the override rules on the resources: ResourceOverrideSnapshot "web-image-0" failed to apply on Deployment "web" in namespace "web-2": ` +
				`overrideRules[0].jsonPatchOverrides[0] (replace /spec/template/spec/containers/0/image): label key region not found on cluster member-2`,
		},
		{
			name: "work not synchronized yet on one cluster",
			build: func(w *world) {
				w.schedule("member-1", "member-2").snapshot(1).rollout(1, started("member-1", 1),
					events.ClusterRollout{Cluster: "member-2", Started: true, ResourceIndex: 1, Reason: api.WorkNotSynchronizedYetReason})
			},
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=True/RolloutStarted",
				"ClusterResourcePlacementOverridden=True/NoOverrideSpecified",
				"ClusterResourcePlacementWorkSynchronized=False/WorkNotSynchronizedYet"},
			wantMessage: "There are 1 cluster(s) which have not finished creating or updating work(s) yet",
			wantCluster: []string{"Scheduled=True/Scheduled", "RolloutStarted=True/RolloutStarted", "Overridden=True/NoOverrideSpecified",
				"WorkSynchronized=False/WorkNotSynchronizedYet"},
			wantClusterMessage: fold.WorkNotSynchronizedYetMessage,
		},
		{
			name: "work synchronization unknown on one cluster",
			build: func(w *world) {
				w.schedule("member-1", "member-2").snapshot(1).rollout(1, started("member-1", 1),
					events.ClusterRollout{Cluster: "member-2", Started: true, ResourceIndex: 1, Reason: api.WorkSynchronizedUnknownReason})
			},
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=True/RolloutStarted",
				"ClusterResourcePlacementOverridden=True/NoOverrideSpecified",
				"ClusterResourcePlacementWorkSynchronized=Unknown/WorkSynchronizedUnknown"},
			wantMessage: "There are still 1 cluster(s) in the process of creating or updating the work object(s)",
			wantCluster: []string{"Scheduled=True/Scheduled", "RolloutStarted=True/RolloutStarted", "Overridden=True/NoOverrideSpecified",
				"WorkSynchronized=Unknown/WorkSynchronizedUnknown"},
			wantClusterMessage: fold.WorkSynchronizedUnknownMessage,
		},
		{
			name: "started, no apply report yet: ApplyPending",
			build: func(w *world) {
				w.schedule("member-1", "member-2").snapshot(1).rollout(1, started("member-1", 1), started("member-2", 1))
			},
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=True/RolloutStarted",
				"ClusterResourcePlacementOverridden=True/NoOverrideSpecified",
				"ClusterResourcePlacementWorkSynchronized=True/WorkSynchronized",
				"ClusterResourcePlacementApplied=Unknown/ApplyPending"},
			wantMessage: "There are still 2 cluster(s) in the process of applying the resources on the member cluster",
			wantCluster: []string{"Scheduled=True/Scheduled", "RolloutStarted=True/RolloutStarted", "Overridden=True/NoOverrideSpecified",
				"WorkSynchronized=True/WorkSynchronized", "Applied=Unknown/ApplyPending"},
			wantClusterMessage: fold.ApplyPendingMessage,
		},
		{
			name: "apply failed on one cluster: ApplyFailed",
			build: func(w *world) {
				w.schedule("member-1", "member-2").snapshot(1).rollout(1, started("member-1", 1), started("member-2", 1)).
					report(applied("member-1", 1)).report(refused("member-2", 1, api.ManifestNotTakenOverReason, "web-2"))
			},
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=True/RolloutStarted",
				"ClusterResourcePlacementOverridden=True/NoOverrideSpecified",
				"ClusterResourcePlacementWorkSynchronized=True/WorkSynchronized",
				"ClusterResourcePlacementApplied=False/ApplyFailed"},
			wantMessage: "Failed to apply resources to 1 cluster(s), please check the `failedPlacements` status",
			wantCluster: []string{"Scheduled=True/Scheduled", "RolloutStarted=True/RolloutStarted", "Overridden=True/NoOverrideSpecified",
				"WorkSynchronized=True/WorkSynchronized", "Applied=False/ApplyFailed"},
			wantClusterMessage: "1 manifest failed to apply",
		},
		{
			name: "applied, availability being checked: ResourceAvailableUnknown",
			build: func(w *world) {
				r := applied("member-2", 1)
				r.Available = cond("Unknown", api.AvailableUnknownReason, "")
				w.schedule("member-1", "member-2").snapshot(1).rollout(1, started("member-1", 1), started("member-2", 1)).
					report(applied("member-1", 1)).report(r)
			},
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=True/RolloutStarted",
				"ClusterResourcePlacementOverridden=True/NoOverrideSpecified",
				"ClusterResourcePlacementWorkSynchronized=True/WorkSynchronized",
				"ClusterResourcePlacementApplied=True/ApplySucceeded",
				"ClusterResourcePlacementAvailable=Unknown/ResourceAvailableUnknown"},
			wantMessage: "There are still 1 cluster(s) in the process of checking the availability of the selected resources",
			wantCluster: []string{"Scheduled=True/Scheduled", "RolloutStarted=True/RolloutStarted", "Overridden=True/NoOverrideSpecified",
				"WorkSynchronized=True/WorkSynchronized", "Applied=True/ApplySucceeded", "Available=Unknown/ResourceAvailableUnknown"},
			wantClusterMessage: fold.AvailableUnknownMessage,
		},
		{
			name: "applied, not available: ResourceNotAvailableYet",
			build: func(w *world) {
				r := applied("member-2", 1)
				r.Manifests[0].Available = cond("False", api.ManifestNotAvailableYetReason, "0 of 3 replicas are available")
				r.Available = cond("False", api.NotAvailableYetReason, "")
				w.schedule("member-1", "member-2").snapshot(1).rollout(1, started("member-1", 1), started("member-2", 1)).
					report(applied("member-1", 1)).report(r)
			},
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=True/RolloutStarted",
				"ClusterResourcePlacementOverridden=True/NoOverrideSpecified",
				"ClusterResourcePlacementWorkSynchronized=True/WorkSynchronized",
				"ClusterResourcePlacementApplied=True/ApplySucceeded",
				"ClusterResourcePlacementAvailable=False/ResourceNotAvailableYet"},
			wantMessage: "The selected resources in 1 cluster(s) are still not available yet",
			wantCluster: []string{"Scheduled=True/Scheduled", "RolloutStarted=True/RolloutStarted", "Overridden=True/NoOverrideSpecified",
				"WorkSynchronized=True/WorkSynchronized", "Applied=True/ApplySucceeded", "Available=False/ResourceNotAvailableYet"},
			wantClusterMessage: fold.NotAvailableYetMessage,
		},
		{
			name: "applied and available everywhere",
			build: func(w *world) {
				w.schedule("member-1", "member-2").snapshot(1).rollout(1, started("member-1", 1), started("member-2", 1)).
					report(applied("member-1", 1)).report(applied("member-2", 1))
			},
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=True/RolloutStarted",
				"ClusterResourcePlacementOverridden=True/NoOverrideSpecified",
				"ClusterResourcePlacementWorkSynchronized=True/WorkSynchronized",
				"ClusterResourcePlacementApplied=True/ApplySucceeded",
				"ClusterResourcePlacementAvailable=True/ResourceAvailable"},
			wantMessage: "The selected resources in 2 cluster(s) are available now",
			wantCluster: []string{"Scheduled=True/Scheduled", "RolloutStarted=True/RolloutStarted", "Overridden=True/NoOverrideSpecified",
				"WorkSynchronized=True/WorkSynchronized", "Applied=True/ApplySucceeded", "Available=True/ResourceAvailable"},
			wantClusterMessage: fold.AvailableMessage,
		},
		{
			name: "ReportDiff: diff reporting pending",
			crp:  reportDiff,
			build: func(w *world) {
				w.schedule("member-1", "member-2").snapshot(1).rollout(1, started("member-1", 1), started("member-2", 1))
			},
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=True/RolloutStarted",
				"ClusterResourcePlacementOverridden=True/NoOverrideSpecified",
				"ClusterResourcePlacementWorkSynchronized=True/WorkSynchronized",
				"ClusterResourcePlacementDiffReported=Unknown/DiffReportingPending"},
			wantMessage: "There are still 2 cluster(s) in the process of reporting diffs",
			wantCluster: []string{"Scheduled=True/Scheduled", "RolloutStarted=True/RolloutStarted", "Overridden=True/NoOverrideSpecified",
				"WorkSynchronized=True/WorkSynchronized", "DiffReported=Unknown/DiffReportingPending"},
			wantClusterMessage: fold.DiffReportingPendingMessage,
		},
		{
			name: "ReportDiff: diff reporting failed on one cluster",
			crp:  reportDiff,
			build: func(w *world) {
				ok, bad := applied("member-1", 1), applied("member-2", 1)
				ok.DiffReported = &events.Condition{Status: "True", Reason: api.DiffReportedStatusTrueReason}
				bad.DiffReported = &events.Condition{Status: "False", Reason: api.DiffReportedStatusFalseReason, Message: "the member API server timed out"}
				w.schedule("member-1", "member-2").snapshot(1).rollout(1, started("member-1", 1), started("member-2", 1)).report(ok).report(bad)
			},
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=True/RolloutStarted",
				"ClusterResourcePlacementOverridden=True/NoOverrideSpecified",
				"ClusterResourcePlacementWorkSynchronized=True/WorkSynchronized",
				"ClusterResourcePlacementDiffReported=False/DiffReportingIncompleteOrFailed"},
			wantMessage: "Diff reporting in 1 cluster(s) is still in progress or has failed",
			wantCluster: []string{"Scheduled=True/Scheduled", "RolloutStarted=True/RolloutStarted", "Overridden=True/NoOverrideSpecified",
				"WorkSynchronized=True/WorkSynchronized", "DiffReported=False/DiffReportingIncompleteOrFailed"},
			wantClusterMessage: "the member API server timed out",
		},
		{
			name: "ReportDiff: diff reporting completed",
			crp:  reportDiff,
			build: func(w *world) {
				a, b := applied("member-1", 1), applied("member-2", 1)
				a.DiffReported = &events.Condition{Status: "True", Reason: api.DiffReportedStatusTrueReason}
				b.DiffReported = &events.Condition{Status: "True", Reason: api.DiffReportedStatusTrueReason}
				w.schedule("member-1", "member-2").snapshot(1).rollout(1, started("member-1", 1), started("member-2", 1)).report(a).report(b)
			},
			want: []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
				"ClusterResourcePlacementRolloutStarted=True/RolloutStarted",
				"ClusterResourcePlacementOverridden=True/NoOverrideSpecified",
				"ClusterResourcePlacementWorkSynchronized=True/WorkSynchronized",
				"ClusterResourcePlacementDiffReported=True/DiffReportingCompleted"},
			wantMessage: "Diff reporting in 2 cluster(s) has been completed",
			wantCluster: []string{"Scheduled=True/Scheduled", "RolloutStarted=True/RolloutStarted", "Overridden=True/NoOverrideSpecified",
				"WorkSynchronized=True/WorkSynchronized", "DiffReported=True/DiffReportingCompleted"},
			wantClusterMessage: fold.DiffReportedMessage,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			crp := tc.crp
			if crp.Name == "" {
				crp = placement(api.WhenToTakeOverTypeNever)
			}
			w := newWorld(t, crp)
			tc.build(w)
			st := w.status(api.PlacementStatus{}, t0)
			if got := conds(st.Conditions); !slices.Equal(got, tc.want) {
				t.Fatalf("placement conditions:\n got %q\nwant %q", got, tc.want)
			}
			last := st.Conditions[len(st.Conditions)-1]
			if last.Message != tc.wantMessage {
				t.Errorf("%s message = %q, want %q", last.Type, last.Message, tc.wantMessage)
			}
			for _, c := range st.Conditions {
				if c.ObservedGeneration != w.gen() || !c.LastTransitionTime.Time.Equal(t0) {
					t.Errorf("%s: observedGeneration %d, lastTransitionTime %v; want %d, %v", c.Type, c.ObservedGeneration, c.LastTransitionTime, w.gen(), t0)
				}
			}
			if tc.wantCluster == nil {
				if len(st.PlacementStatuses) != 0 {
					t.Errorf("placementStatuses = %s, want none", mustJSON(t, st.PlacementStatuses))
				}
				return
			}
			m2 := clusterStatus(t, st, "member-2")
			if got := conds(m2.Conditions); !slices.Equal(got, tc.wantCluster) {
				t.Fatalf("member-2 conditions:\n got %q\nwant %q", got, tc.wantCluster)
			}
			if last := m2.Conditions[len(m2.Conditions)-1]; last.Message != tc.wantClusterMessage {
				t.Errorf("member-2 %s message = %q, want %q", last.Type, last.Message, tc.wantClusterMessage)
			}
			for _, c := range m2.Conditions {
				if c.ObservedGeneration != w.gen() {
					t.Errorf("member-2 %s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, w.gen())
				}
			}
		})
	}
}

// The clusters on which overrides apply list them, as upstream lists its
// override snapshots; the others say no override is specified.
func TestApplicableOverridesPerCluster(t *testing.T) {
	w := newWorld(t, placement(api.WhenToTakeOverTypeAlways))
	m1 := started("member-1", 1)
	m1.Overrides = &events.ClusterOverrides{ClusterResourceOverrides: []string{"web-labels-2"},
		ResourceOverrides: []api.NamespacedName{{Name: "web-image-0", Namespace: "web-2"}}}
	w.schedule("member-1", "member-2").snapshot(1).rollout(1, m1, started("member-2", 1))
	st := w.status(api.PlacementStatus{}, t0)

	one := clusterStatus(t, st, "member-1")
	if !reflect.DeepEqual(one.ApplicableClusterResourceOverrides, []string{"web-labels-2"}) ||
		!reflect.DeepEqual(one.ApplicableResourceOverrides, []api.NamespacedName{{Name: "web-image-0", Namespace: "web-2"}}) {
		t.Errorf("member-1 lists %v and %v", one.ApplicableClusterResourceOverrides, one.ApplicableResourceOverrides)
	}
	if c := getCond(t, one.Conditions, "Overridden"); c.Reason != api.OverriddenSucceededReason || c.Message != fold.OverriddenSucceededMessage {
		t.Errorf("member-1 Overridden = %s: %s", c.Reason, c.Message)
	}
	two := clusterStatus(t, st, "member-2")
	if two.ApplicableClusterResourceOverrides != nil || two.ApplicableResourceOverrides != nil {
		t.Errorf("member-2 lists overrides: %+v", two)
	}
	if c := getCond(t, two.Conditions, "Overridden"); c.Reason != api.OverrideNotSpecifiedReason {
		t.Errorf("member-2 Overridden = %s", c.Reason)
	}
	if c := getCond(t, st.Conditions, "ClusterResourcePlacementOverridden"); c.Reason != api.OverriddenSucceededReason ||
		c.Message != "The selected resources are successfully overridden in 2 cluster(s)" {
		t.Errorf("ClusterResourcePlacementOverridden = %s: %s", c.Reason, c.Message)
	}
}

func TestScheduledPerCluster(t *testing.T) {
	crp := placement(api.WhenToTakeOverTypeAlways)
	crp.Spec.Policy = &api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: new(int32(3))}
	w := newWorld(t, crp)
	w.decide(events.PlacementScheduledV2{
		Placement: "web-2-crp", Generation: 1, PlacementType: api.PickNPlacementType, Wanted: 3, ChosenCount: 2,
		Clusters: []events.ClusterDecision{
			{Cluster: "member-1", Action: events.ActionAdded, AffinityScore: 20, TopologySpreadScore: 0},
			{Cluster: "member-3", Action: events.ActionAdded, AffinityScore: 5, TopologySpreadScore: 1},
			{Cluster: "member-4", Reason: "the cluster does not match required affinity"},
			{Cluster: "member-5", Reason: "the cluster is tainted"},
		},
		Message: "could not find all the clusters needed as specified by the scheduling policy: found 2 of 3",
	})
	st := w.status(api.PlacementStatus{}, t0)

	sched := getCond(t, st.Conditions, string(api.ClusterResourcePlacementScheduledConditionType))
	if sched.Status != metav1.ConditionFalse || sched.Reason != api.SchedulingPolicyUnfulfilledReason ||
		sched.Message != "could not find all the clusters needed as specified by the scheduling policy: found 2 of 3" {
		t.Errorf("Scheduled = %+v", sched)
	}
	got := getCond(t, clusterStatus(t, st, "member-3").Conditions, "Scheduled")
	want := `Successfully scheduled resources for placement in "member-3" (affinity score: 5, topology spread score: 1): picked by scheduling policy`
	if got.Status != metav1.ConditionTrue || got.Reason != api.ScheduleSucceededReason || got.Message != want {
		t.Errorf("member-3 Scheduled = %+v, want True/Scheduled %q", got, want)
	}
	// One cluster is missing, so one not-chosen cluster says why.
	var names []string
	for _, p := range st.PlacementStatuses {
		names = append(names, p.ClusterName)
	}
	if !slices.Equal(names, []string{"member-1", "member-3", "member-4"}) {
		t.Fatalf("placementStatuses clusters = %v", names)
	}
	failed := getCond(t, clusterStatus(t, st, "member-4").Conditions, "Scheduled")
	if failed.Status != metav1.ConditionFalse || failed.Reason != api.ScheduleFailedReason || failed.Message != "the cluster does not match required affinity" {
		t.Errorf("member-4 Scheduled = %+v", failed)
	}
	// The unfulfilled placement still reports the progress of what was chosen.
	if got := getCond(t, st.Conditions, string(api.ClusterResourcePlacementRolloutStartedConditionType)); got.Status != metav1.ConditionUnknown {
		t.Errorf("RolloutStarted = %+v", got)
	}
}

func TestNoClusterScheduledLeavesOnlyScheduled(t *testing.T) {
	w := newWorld(t, placement(api.WhenToTakeOverTypeAlways)).schedule().snapshot(1)
	st := w.status(api.PlacementStatus{}, t0)
	if got := conds(st.Conditions); !slices.Equal(got, []string{"ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled"}) {
		t.Errorf("conditions = %v", got)
	}
	if st.ObservedResourceIndex != "1" || len(st.SelectedResources) != 1 {
		t.Errorf("selectedResources %v, observedResourceIndex %q", st.SelectedResources, st.ObservedResourceIndex)
	}
}

// jqFailed is the seed's jq filter:
// [.[] | select (.failedPlacements != null)] | map({clusterName, failedPlacements}).
func jqFailed(t *testing.T, st api.PlacementStatus) []map[string]any {
	t.Helper()
	b, err := json.Marshal(st.PlacementStatuses)
	if err != nil {
		t.Fatal(err)
	}
	var entries []map[string]any
	if err := json.Unmarshal(b, &entries); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range entries {
		if e["failedPlacements"] != nil {
			out = append(out, map[string]any{"clusterName": e["clusterName"], "failedPlacements": e["failedPlacements"]})
		}
	}
	return out
}

// seedSample reads a seed JSON sample, with its "..." lastTransitionTime
// replaced by at.
func seedSample(t *testing.T, file string, at time.Time) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.ReplaceAll(string(data), `"lastTransitionTime": "..."`, `"lastTransitionTime": "`+at.Format(time.RFC3339)+`"`))
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Seed 000: the jq command prints exactly the seed's entry, for member-2 only.
func TestSeed000FailedPlacements(t *testing.T) {
	tests := []struct {
		name   string
		mode   api.WhenToTakeOverType
		reason string
		object string
		sample string
	}{
		{"Never: NotTakenOver", api.WhenToTakeOverTypeNever, api.ManifestNotTakenOverReason, "web-2", "seed-000-not-taken-over.json"},
		{"IfNoDiff with a diff: FailedToTakeOver", api.WhenToTakeOverTypeIfNoDiff, api.ManifestFailedToTakeOverReason, "work-2", "seed-000-failed-to-take-over.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The apply worker may leave the per-manifest message to the
			// contract, or write it out: both give the seed's message.
			for _, withMessage := range []bool{false, true} {
				bad := refused("member-2", 1, tc.reason, tc.object)
				if withMessage {
					text := map[string]string{api.ManifestNotTakenOverReason: api.NotTakenOverError, api.ManifestFailedToTakeOverReason: api.FailedToTakeOverError}[tc.reason]
					bad.Manifests[0].Applied.Message = api.ManifestApplyFailedMessage(text)
				}
				w := newWorld(t, placement(tc.mode)).schedule("member-1", "member-2", "member-3").snapshot(1).
					rollout(1, started("member-1", 1), started("member-2", 1), started("member-3", 1)).
					report(applied("member-1", 1)).report(bad).report(applied("member-3", 1))
				at := t0.Add(5 * time.Minute)
				st := w.status(api.PlacementStatus{}, at)

				got := jqFailed(t, st)
				want := []map[string]any{seedSample(t, tc.sample, at)}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("jq output:\n%s\nwant the seed's:\n%s", mustJSON(t, got), mustJSON(t, want))
				}
				applied := getCond(t, st.Conditions, string(api.ClusterResourcePlacementAppliedConditionType))
				if applied.Message != "Failed to apply resources to 1 cluster(s), please check the `failedPlacements` status" {
					t.Errorf("Applied message = %q", applied.Message)
				}
			}
		})
	}
}

// A refused IfNoDiff takeover lists the differing fields under diffedPlacements.
func TestDiffedAndDriftedPlacements(t *testing.T) {
	first := t0.Add(-time.Hour)
	bad := refused("member-2", 1, api.ManifestFailedToTakeOverReason, "web-2")
	bad.Manifests[0].ObservedGeneration = 0
	bad.Manifests[0].Diffs = []api.PatchDetail{{Path: "/metadata/labels/team", ValueInMember: "blue", ValueInHub: "green"}}
	bad.Manifests[0].FirstDiffedAt = &first
	drift := applied("member-1", 1)
	drift.Manifests[0].ObservedGeneration = 4
	drift.Manifests[0].Drifts = []api.PatchDetail{{Path: "/metadata/labels/owner", ValueInMember: "ops", ValueInHub: "dev"}}
	drift.Manifests[0].FirstDriftedAt = &first
	missing := applied("member-3", 1)
	missing.Manifests[0].Diffs = []api.PatchDetail{{Path: "/"}}

	w := newWorld(t, placement(api.WhenToTakeOverTypeIfNoDiff)).schedule("member-1", "member-2", "member-3").snapshot(1).
		rollout(1, started("member-1", 1), started("member-2", 1), started("member-3", 1)).report(drift).report(bad).report(missing)
	st := w.status(api.PlacementStatus{}, t0)

	observed := metav1.NewTime(t0.Add(time.Minute))
	wantDiffed := []api.DiffedResourcePlacement{{
		ResourceIdentifier: api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web-2"},
		ObservationTime:    observed, FirstDiffedObservedTime: metav1.NewTime(first),
		ObservedDiffs: []api.PatchDetail{{Path: "/metadata/labels/team", ValueInMember: "blue", ValueInHub: "green"}},
	}}
	if got := clusterStatus(t, st, "member-2").DiffedPlacements; !reflect.DeepEqual(got, wantDiffed) {
		t.Errorf("member-2 diffedPlacements = %s", mustJSON(t, got))
	}
	wantDrifted := []api.DriftedResourcePlacement{{
		ResourceIdentifier: namespace, ObservationTime: observed, TargetClusterObservedGeneration: 4,
		FirstDriftedObservedTime: metav1.NewTime(first),
		ObservedDrifts:           []api.PatchDetail{{Path: "/metadata/labels/owner", ValueInMember: "ops", ValueInHub: "dev"}},
	}}
	if got := clusterStatus(t, st, "member-1").DriftedPlacements; !reflect.DeepEqual(got, wantDrifted) {
		t.Errorf("member-1 driftedPlacements = %s", mustJSON(t, got))
	}
	// A missing object has no generation on the member: null in JSON.
	m3 := clusterStatus(t, st, "member-3").DiffedPlacements
	if len(m3) != 1 || m3[0].TargetClusterObservedGeneration != nil || !strings.Contains(mustJSON(t, m3), `"targetClusterObservedGeneration": null`) {
		t.Errorf("member-3 diffedPlacements = %s", mustJSON(t, m3))
	}
}

func TestReportedPlacementsAreCapped(t *testing.T) {
	r := &events.WorkReported{Cluster: "member-1", Placement: "web-2-crp", ResourceIndex: 1,
		Applied: cond("False", api.ApplyFailedReason, ""), Available: cond("Unknown", "", "")}
	for i := range 150 {
		r.Manifests = append(r.Manifests, events.ManifestResult{
			Resource: api.ResourceIdentifier{Version: "v1", Kind: "ConfigMap", Namespace: "web-2", Name: "cm-" + string(rune('a'+i%26)) + string(rune('a'+i/26))},
			Applied:  cond("False", api.ManifestApplyFailedReason, "Failed to apply the manifest (error: boom)"),
			Drifts:   []api.PatchDetail{{Path: "/data/x"}},
			Diffs:    []api.PatchDetail{{Path: "/data/y"}},
		})
	}
	w := newWorld(t, placement(api.WhenToTakeOverTypeAlways)).schedule("member-1").snapshot(1).rollout(1, started("member-1", 1)).report(r)
	m1 := clusterStatus(t, w.status(api.PlacementStatus{}, t0), "member-1")
	if len(m1.FailedPlacements) != api.MaxReportedPlacements || len(m1.DriftedPlacements) != api.MaxReportedPlacements || len(m1.DiffedPlacements) != api.MaxReportedPlacements {
		t.Errorf("failed %d, drifted %d, diffed %d; want %d each", len(m1.FailedPlacements), len(m1.DriftedPlacements), len(m1.DiffedPlacements), api.MaxReportedPlacements)
	}
}

// lastTransitionTime moves only when a condition's status changes.
func TestLastTransitionTimeChangesOnlyOnTransition(t *testing.T) {
	w := newWorld(t, placement(api.WhenToTakeOverTypeNever)).schedule("member-1", "member-2").snapshot(1).
		rollout(1, started("member-1", 1), started("member-2", 1)).
		report(applied("member-1", 1)).report(refused("member-2", 1, api.ManifestNotTakenOverReason, "web-2"))
	t1, t2, t3 := t0, t0.Add(time.Minute), t0.Add(2*time.Minute)
	st1 := roundTrip(t, w.status(api.PlacementStatus{}, t1))

	// A newer report with the same outcome: nothing transitions.
	again := refused("member-2", 1, api.ManifestNotTakenOverReason, "web-2")
	again.ObservedAt = t0.Add(90 * time.Second)
	w.report(again)
	st2 := roundTrip(t, w.status(st1, t2))
	if tr := fold.Transitions(st1, st2); len(tr) != 0 {
		t.Errorf("transitions after the same outcome: %v", tr)
	}
	for _, c := range st2.Conditions {
		if !c.LastTransitionTime.Time.Equal(t1) {
			t.Errorf("%s moved to %v without a transition", c.Type, c.LastTransitionTime)
		}
	}
	if fp := clusterStatus(t, st2, "member-2").FailedPlacements[0]; !fp.Condition.LastTransitionTime.Time.Equal(t1) {
		t.Errorf("failed placement condition moved to %v", fp.Condition.LastTransitionTime)
	}

	// The takeover succeeds: Applied goes True and Available appears.
	ok := applied("member-2", 1)
	ok.ObservedAt = t0.Add(2 * time.Minute)
	w.report(ok)
	st3 := roundTrip(t, w.status(st2, t3))
	appliedCond := getCond(t, st3.Conditions, string(api.ClusterResourcePlacementAppliedConditionType))
	if appliedCond.Status != metav1.ConditionTrue || !appliedCond.LastTransitionTime.Time.Equal(t3) {
		t.Errorf("Applied = %+v, want True since %v", appliedCond, t3)
	}
	if sched := getCond(t, st3.Conditions, string(api.ClusterResourcePlacementScheduledConditionType)); !sched.LastTransitionTime.Time.Equal(t1) {
		t.Errorf("Scheduled moved to %v", sched.LastTransitionTime)
	}
	if fp := clusterStatus(t, st3, "member-2").FailedPlacements; fp != nil {
		t.Errorf("failedPlacements after success = %s", mustJSON(t, fp))
	}
	var got []string
	for _, tr := range fold.Transitions(st2, st3) {
		got = append(got, tr.Cluster+":"+tr.Condition.Type+"="+string(tr.Condition.Status)+"/"+tr.Condition.Reason)
	}
	want := []string{
		":ClusterResourcePlacementApplied=True/ApplySucceeded",
		":ClusterResourcePlacementAvailable=True/ResourceAvailable",
		"member-2:Applied=True/ApplySucceeded",
		"member-2:Available=True/ResourceAvailable",
	}
	if !slices.Equal(got, want) {
		t.Errorf("transitions:\n got %q\nwant %q", got, want)
	}
}

// A status is stored as JSON and read back before the next fold.
func roundTrip(t *testing.T, st api.PlacementStatus) api.PlacementStatus {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var out api.PlacementStatus
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Changing whenToTakeOver makes the old reports stale until the apply
// workers answer the new strategy: `fleetctl wait --for=condition=Applied`
// must not see the old outcome as the new one.
func TestStrategyChangeMakesReportsStale(t *testing.T) {
	w := newWorld(t, placement(api.WhenToTakeOverTypeNever)).schedule("member-1", "member-2").snapshot(1).
		rollout(1, started("member-1", 1), started("member-2", 1)).
		report(applied("member-1", 1)).report(refused("member-2", 1, api.ManifestNotTakenOverReason, "web-2"))
	if _, err := w.in.Upsert(placement(api.WhenToTakeOverTypeIfNoDiff), t0); err != nil {
		t.Fatal(err)
	}
	if w.gen() != 2 || w.in.WorkGeneration != 2 {
		t.Fatalf("generation %d, work generation %d; want 2, 2", w.gen(), w.in.WorkGeneration)
	}
	w.schedule("member-1", "member-2")
	st := w.status(api.PlacementStatus{}, t0)
	if got := getCond(t, st.Conditions, string(api.ClusterResourcePlacementRolloutStartedConditionType)); got.Status != metav1.ConditionUnknown {
		t.Errorf("RolloutStarted with the old rollout = %+v", got)
	}
	w.rollout(1, started("member-1", 1), started("member-2", 1))
	st = w.status(api.PlacementStatus{}, t0)
	if got := getCond(t, st.Conditions, string(api.ClusterResourcePlacementAppliedConditionType)); got.Status != metav1.ConditionUnknown || got.Message != "There are still 2 cluster(s) in the process of applying the resources on the member cluster" {
		t.Errorf("Applied with reports of the old strategy = %+v", got)
	}
	if jq := jqFailed(t, st); jq != nil {
		t.Errorf("stale failures still shown: %v", jq)
	}
	// A policy-only change keeps the reports.
	crp := placement(api.WhenToTakeOverTypeIfNoDiff)
	crp.Spec.RevisionHistoryLimit = new(int32(5))
	w.report(applied("member-1", 1)).report(applied("member-2", 1))
	if _, err := w.in.Upsert(crp, t0); err != nil {
		t.Fatal(err)
	}
	w.schedule("member-1", "member-2")
	st = w.status(api.PlacementStatus{}, t0)
	if got := getCond(t, st.Conditions, string(api.ClusterResourcePlacementAvailableConditionType)); got.Status != metav1.ConditionTrue || got.ObservedGeneration != 3 {
		t.Errorf("Available after a change that does not touch the strategy = %+v", got)
	}
}

func TestStuckClusterSaysSo(t *testing.T) {
	const stuck = "The rollout on cluster member-1 is stuck: not applied and available within 5m0s: waiting for member-2"
	tests := []struct {
		name    string
		entry   events.ClusterRollout
		typ     string
		message string
	}{
		{"started, no report, with the rollout's reason",
			events.ClusterRollout{Cluster: "member-1", Started: true, ResourceIndex: 1, Stuck: true, Message: stuck},
			"Applied", fold.ApplyPendingMessage + "; " + stuck},
		{"started, no report, no reason given",
			events.ClusterRollout{Cluster: "member-1", Started: true, ResourceIndex: 1, Stuck: true},
			"Applied", fold.ApplyPendingMessage + "; " + fold.StuckNote},
		{"not started: the rollout's message says it once",
			events.ClusterRollout{Cluster: "member-1", ResourceIndex: 0, Stuck: true, Reason: api.RolloutNotStartedYetReason, Message: stuck},
			"RolloutStarted", stuck},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, placement(api.WhenToTakeOverTypeAlways)).schedule("member-1").snapshot(1).rollout(1, tc.entry)
			m1 := clusterStatus(t, w.status(api.PlacementStatus{}, t0), "member-1")
			last := m1.Conditions[len(m1.Conditions)-1]
			if last.Type != tc.typ || last.Status == metav1.ConditionTrue || last.Message != tc.message {
				t.Errorf("last condition = %+v\nwant %s with message %q", last, tc.typ, tc.message)
			}
		})
	}
}

func TestRolloutOfOlderSnapshotIsNotCurrent(t *testing.T) {
	w := newWorld(t, placement(api.WhenToTakeOverTypeAlways)).schedule("member-1").snapshot(1).
		rollout(1, started("member-1", 1)).report(applied("member-1", 1)).snapshot(2)
	st := w.status(api.PlacementStatus{}, t0)
	if got := conds(st.Conditions); got[len(got)-1] != "ClusterResourcePlacementRolloutStarted=Unknown/RolloutStartedUnknown" {
		t.Errorf("conditions after a new snapshot = %v", got)
	}
	if st.ObservedResourceIndex != "2" || clusterStatus(t, st, "member-1").ObservedResourceIndex != "1" {
		t.Errorf("observedResourceIndex %q, member-1's %q", st.ObservedResourceIndex, clusterStatus(t, st, "member-1").ObservedResourceIndex)
	}
}
