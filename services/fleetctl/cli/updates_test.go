package cli

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// TestApplyRefusesUpdatesTheFleetRulesForbid: fleetctl judges an update against the live
// placement the status service shows, as the services do, and publishes nothing when one
// is refused; the user sees each refusal with its field path.
func TestApplyRefusesUpdatesTheFleetRulesForbid(t *testing.T) {
	f, nats := statusFixture(t)
	live := func() api.ClusterResourcePlacement {
		obj, err := api.Decode([]byte(`apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: gpu}
spec:
  resourceSelectors: [{group: "", version: v1, kind: Namespace, name: gpu}]
  policy:
    placementType: PickN
    numberOfClusters: 2
    tolerations: [{key: gpu, operator: Exists}]
`))
		if err != nil {
			t.Fatal(err)
		}
		crp := *obj.(*api.ClusterResourcePlacement)
		api.SetDefaults(&crp)
		crp.Generation = 1
		return crp
	}
	f.setPlacement(live())
	placement := func(policy string) string {
		return `apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: gpu}
spec:
  resourceSelectors: [{group: "", version: v1, kind: Namespace, name: gpu}]
  policy: ` + policy + "\n"
	}

	r := fleetctl(t, placement(`{placementType: PickAll}`), append([]string{"apply", "-f", "-"}, nats...)...)
	wantErr := []string{
		"<stdin>: document 1: clusterresourceplacement.placement.kubernetes-fleet.io/gpu: spec.policy.placementType: cannot change from PickN to PickAll; delete the placement and create it again to change its type",
		`<stdin>: document 1: clusterresourceplacement.placement.kubernetes-fleet.io/gpu: spec.policy.tolerations: tolerations can be added but not changed or removed; the former tolerations[0] {key: "gpu", operator: Exists} is missing`,
	}
	if r.e == nil || !strings.Contains(r.e.Error(), "2 update(s) refused") || r.err != strings.Join(wantErr, "\n")+"\n" {
		t.Errorf("error %v\nstderr:\n%s\nwant:\n%s", r.e, r.err, strings.Join(wantErr, "\n"))
	}
	nc := natsConnect(t, nats[1])
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(t.Context(), bus.StreamEvents); err == nil {
		if evs := storedEvents(t, js); len(evs) != 0 {
			t.Errorf("a refused update was published: %v", subjects(evs))
		}
	}

	// Adding a toleration and changing the number of clusters is an update Fleet allows.
	r = fleetctl(t, placement(`{placementType: PickN, numberOfClusters: 3, tolerations: [{key: gpu, operator: Exists}, {key: spot, operator: Exists}]}`),
		append([]string{"apply", "-f", "-"}, nats...)...)
	wantLines(t, r, "clusterresourceplacement.placement.kubernetes-fleet.io/gpu configured")
	if evs := storedEvents(t, js); len(evs) != 1 {
		t.Errorf("stored %v, want the allowed update", subjects(evs))
	}
}
