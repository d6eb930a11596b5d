package status

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
)

// The time to Available counts a generation when the status turns Available at
// it, whether through a transition or at once (a new generation whose change
// leaves the resources as they were).
func TestAGenerationCountsWhenItsStatusTurnsAvailable(t *testing.T) {
	available := func(status metav1.ConditionStatus, gen int64) []metav1.Condition {
		return []metav1.Condition{
			{Type: string(api.ClusterResourcePlacementScheduledConditionType), Status: metav1.ConditionTrue, ObservedGeneration: gen},
			{Type: string(api.ClusterResourcePlacementAvailableConditionType), Status: status, ObservedGeneration: gen},
		}
	}
	for _, c := range []struct {
		name       string
		prev, next []metav1.Condition
		gen        int64
		counts     bool
	}{
		{"turns Available", available(metav1.ConditionFalse, 1), available(metav1.ConditionTrue, 1), 1, true},
		{"first status Available", nil, available(metav1.ConditionTrue, 1), 1, true},
		{"a new generation Available at once", available(metav1.ConditionTrue, 1), available(metav1.ConditionTrue, 2), 2, true},
		{"stays Available", available(metav1.ConditionTrue, 2), available(metav1.ConditionTrue, 2), 2, false},
		{"not Available yet", available(metav1.ConditionTrue, 1), available(metav1.ConditionUnknown, 2), 2, false},
		{"Available at an older generation", nil, available(metav1.ConditionTrue, 1), 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := turnsAvailable(c.prev, c.next, c.gen); got != c.counts {
				t.Errorf("counts = %v, want %v", got, c.counts)
			}
		})
	}
}
