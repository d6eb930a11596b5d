package printer

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
)

// TestResourcePlacements: a ResourcePlacement's table reads its
// ResourcePlacement* conditions, with a NAMESPACE column for -A, and describe
// names its namespace.
func TestResourcePlacements(t *testing.T) {
	created := metav1.NewTime(clock().Add(-5 * time.Minute))
	rp := api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: api.PlacementGroupVersion.String(), Kind: api.ResourcePlacementKind},
		ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: "team-a", Generation: 2, CreationTimestamp: created},
		Spec:       api.PlacementSpec{ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: "app-config"}}},
		Status: api.PlacementStatus{Conditions: []metav1.Condition{
			{Type: "ResourcePlacementScheduled", Status: "True", ObservedGeneration: 2, Reason: api.SchedulingPolicyFulfilledReason},
			{Type: "ResourcePlacementAvailable", Status: "False", ObservedGeneration: 1, Reason: api.NotAvailableYetReason},
		}},
	}
	var b bytes.Buffer
	p := Printer{Output: Output{Format: Table}, Now: clock, AllNamespaces: true}
	if err := p.ResourcePlacements(&b, []api.ClusterResourcePlacement{rp}, false); err != nil {
		t.Fatal(err)
	}
	want := "NAMESPACE   NAME         GEN   SCHEDULED   SCHEDULED-GEN   AVAILABLE   AVAILABLE-GEN   AGE\n" +
		"team-a      app-config   2     True        2               False       1               5m\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := (Printer{Now: clock}).DescribePlacement(&b, &rp); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"Name:", "app-config", "Namespace:", "team-a", "Kind:", "ResourcePlacement", "ResourcePlacementScheduled"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("describe lacks %q:\n%s", w, b.String())
		}
	}
}
