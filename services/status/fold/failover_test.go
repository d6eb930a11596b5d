package fold_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// failedOver is a decision that moved the placement from member-1 (lost, still holding
// a copy) to member-3, member-2 kept.
func failedOver(w *world) events.PlacementScheduledV2 {
	return events.PlacementScheduledV2{Placement: "web-2-crp", Generation: w.gen(), PlacementType: api.PickNPlacementType,
		Wanted: 2, ChosenCount: 2, Fulfilled: true, Clusters: []events.ClusterDecision{
			{Cluster: "member-1", Action: events.ActionLost, Reason: "member-1 is lost: ...", FailoverReason: api.ClusterLostReason, FailoverMessage: "member-1 is lost: ..."},
			{Cluster: "member-2", Action: events.ActionKept},
			{Cluster: "member-3", Action: events.ActionAdded, FailoverReason: api.FailoverReplacementScheduledReason,
				FailoverMessage: "the placement failed over to member-3 from member-1"},
		}}
}

func TestFailoverConditionSaysEachStep(t *testing.T) {
	w := newWorld(t, placement(api.WhenToTakeOverTypeAlways))
	w.decide(failedOver(w)).snapshot(1).rollout(1, started("member-2", 1), started("member-3", 1)).report(applied("member-2", 1))

	st := w.status(api.PlacementStatus{}, t0)
	lost := getCond(t, clusterStatus(t, st, "member-1").Conditions, api.FailoverConditionType)
	if lost.Status != metav1.ConditionFalse || lost.Reason != api.ClusterLostReason {
		t.Errorf("member-1: %s/%s, want False/%s", lost.Status, lost.Reason, api.ClusterLostReason)
	}
	if n := len(clusterStatus(t, st, "member-1").Conditions); n != 1 {
		t.Errorf("the lost member-1 has %d conditions, want its Failover condition only", n)
	}
	moving := getCond(t, clusterStatus(t, st, "member-3").Conditions, api.FailoverConditionType)
	if moving.Status != metav1.ConditionUnknown || moving.Reason != api.FailoverReplacementScheduledReason {
		t.Errorf("member-3 before it is available: %s/%s", moving.Status, moving.Reason)
	}

	w.report(applied("member-3", 1))
	st = w.status(st, t0)
	done := getCond(t, clusterStatus(t, st, "member-3").Conditions, api.FailoverConditionType)
	if done.Status != metav1.ConditionTrue || done.Reason != api.FailedOverReason || !strings.Contains(done.Message, "member-1") {
		t.Errorf("member-3 once available: %+v, want True/%s naming member-1", done, api.FailedOverReason)
	}
	if got := getCond(t, clusterStatus(t, st, "member-2").Conditions, string(api.PerClusterAvailableConditionType)); got.Status != metav1.ConditionTrue {
		t.Errorf("member-2 is not available: %+v", got)
	}
}
