package printer

import (
	"bytes"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/golden"
)

// disruptionFixtures: an eviction the budget blocked and an invalid one, and
// a budget.
func disruptionFixtures() ([]api.ClusterResourcePlacementEviction, []api.ClusterResourcePlacementDisruptionBudget) {
	created := metav1.NewTime(clock().Add(-10 * time.Minute))
	blocked := api.ClusterResourcePlacementEviction{
		ObjectMeta: metav1.ObjectMeta{Name: "drain-eviction-web-member-1-1a2b3c4d", CreationTimestamp: created},
		Spec:       api.PlacementEvictionSpec{PlacementName: "web", ClusterName: "member-1"},
		Status: api.PlacementEvictionStatus{Conditions: []metav1.Condition{
			cond(api.EvictionConditionValid, "True", api.EvictionValidReason, api.EvictionValidMessage),
			cond(api.EvictionConditionExecuted, "False", api.EvictionNotExecutedReason,
				"Eviction is blocked by specified ClusterResourcePlacementDisruptionBudget, availablePlacements: 2, totalPlacements: 2"),
		}},
	}
	invalid := api.ClusterResourcePlacementEviction{
		ObjectMeta: metav1.ObjectMeta{Name: "evict-fixed", CreationTimestamp: created},
		Spec:       api.PlacementEvictionSpec{PlacementName: "fixed", ClusterName: "member-2"},
		Status: api.PlacementEvictionStatus{Conditions: []metav1.Condition{
			cond(api.EvictionConditionValid, "False", api.EvictionInvalidReason, api.EvictionInvalidPickFixedCRPMessage),
		}},
	}
	two := intstr.FromInt32(2)
	budget := api.ClusterResourcePlacementDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", CreationTimestamp: created},
		Spec:       api.PlacementDisruptionBudgetSpec{MinAvailable: &two},
	}
	return []api.ClusterResourcePlacementEviction{blocked, invalid}, []api.ClusterResourcePlacementDisruptionBudget{budget}
}

func TestDisruptionPrinters(t *testing.T) {
	evictions, budgets := disruptionFixtures()
	for _, tc := range []struct {
		name, output string
		print        func(Printer, *bytes.Buffer) error
	}{
		{"crpe-table", "", func(p Printer, b *bytes.Buffer) error { return p.Evictions(b, evictions, false) }},
		{"crpe-wide", "wide", func(p Printer, b *bytes.Buffer) error { return p.Evictions(b, evictions, false) }},
		{"crpe-yaml", "yaml", func(p Printer, b *bytes.Buffer) error { return p.Evictions(b, evictions[:1], true) }},
		{"crpe-describe", "", func(p Printer, b *bytes.Buffer) error { return p.DescribeEviction(b, &evictions[0]) }},
		{"crpdb-table", "", func(p Printer, b *bytes.Buffer) error { return p.DisruptionBudgets(b, budgets, false) }},
		{"crpdb-describe", "", func(p Printer, b *bytes.Buffer) error { return p.DescribeDisruptionBudget(b, &budgets[0]) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ParseOutput(tc.output)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := tc.print(Printer{Output: out, Now: clock}, &buf); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/golden/"+tc.name+".txt", buf.Bytes())
		})
	}
}
