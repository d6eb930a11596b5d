package scheduler_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/reply"
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

// A scheduling preview is the decision the scheduler would make now, sticky to the
// placement's current one, with the reason of every member left out; it publishes and
// records nothing.
func TestSchedulingPreviewDecidesWithoutRecording(t *testing.T) {
	f := newFixture(t)
	f.startScheduler()
	f.join("prod-a", map[string]string{"environment": "production"})
	f.join("prod-b", map[string]string{"environment": "production"})
	f.join("staging", map[string]string{"environment": "staging"})
	f.place("web", 1)
	first := f.latest("web", func(d revision.Decision) error {
		if len(d.Chosen) != 1 {
			return fmt.Errorf("chosen %d, want 1", len(d.Chosen))
		}
		return nil
	})
	var binding string
	if err := f.Pool.QueryRow(t.Context(), `select decision::text from scheduler_bindings where placement = 'web'`).Scan(&binding); err != nil {
		t.Fatal(err)
	}

	two := int32(2)
	crp := api.ClusterResourcePlacement{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: api.PlacementSpec{
		ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: "web"}},
		Policy: &api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: &two,
			Affinity: &api.Affinity{ClusterAffinity: &api.ClusterAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &api.ClusterSelector{ClusterSelectorTerms: []api.ClusterSelectorTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"environment": "production"}}}}}}}}}}
	req, _ := json.Marshal(events.SchedulingPreviewRequest{Placement: crp})
	got, err := reply.Call[events.SchedulingPreview](t.Context(), f.NC, events.PreviewSchedulingSubject, "", req, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kept := first.Chosen[0].Cluster
	actions := map[string]string{}
	for _, c := range got.Chosen {
		actions[c.Cluster] = c.Action
	}
	if len(actions) != 2 || actions[kept] != "kept" || actions["prod-a"] == "" || actions["prod-b"] == "" || !got.Fulfilled {
		t.Errorf("chosen %+v (fulfilled %v), want prod-a and prod-b with %s kept", got.Chosen, got.Fulfilled, kept)
	}
	if len(got.NotChosen) != 1 || got.NotChosen[0].Cluster != "staging" || got.NotChosen[0].Reason != string(framework.ReasonAffinityMismatch) {
		t.Errorf("not chosen %+v, want staging for its affinity", got.NotChosen)
	}

	// Nothing was recorded or published.
	var after string
	if err := f.Pool.QueryRow(t.Context(), `select decision::text from scheduler_bindings where placement = 'web'`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != binding {
		t.Errorf("the binding changed: %s, was %s", after, binding)
	}
	if n := f.count("web"); n != 1 {
		t.Errorf("%d decisions published for web, want the first only", n)
	}
}
