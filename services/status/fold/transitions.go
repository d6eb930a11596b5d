package fold

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Transition is one condition that changed status or reason between two
// statuses of a placement: placement-wide when Cluster is empty, else on
// that cluster.
type Transition struct {
	Cluster   string
	Condition metav1.Condition
}

// Transitions lists the conditions of next that are new or whose status or
// reason differs from prev: placement-wide first, then per cluster in
// placementStatuses order. A condition that merely disappears (a later stage
// not reached any more) is not a transition; it is one when it comes back.
func Transitions(prev, next api.PlacementStatus) []Transition {
	var out []Transition
	for _, c := range changed(prev.Conditions, next.Conditions) {
		out = append(out, Transition{Condition: c})
	}
	prevClusters := map[string][]metav1.Condition{}
	for _, p := range prev.PlacementStatuses {
		prevClusters[p.ClusterName] = p.Conditions
	}
	for _, n := range next.PlacementStatuses {
		for _, c := range changed(prevClusters[n.ClusterName], n.Conditions) {
			out = append(out, Transition{Cluster: n.ClusterName, Condition: c})
		}
	}
	return out
}

func changed(prev, next []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range next {
		p := meta.FindStatusCondition(prev, c.Type)
		if p == nil || p.Status != c.Status || p.Reason != c.Reason {
			out = append(out, c)
		}
	}
	return out
}
