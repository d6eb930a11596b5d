package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// TestCordonAndUncordon: uncordon publishes the member without the cordon
// taint (its other taints kept), and nothing when it has none; cordoning puts
// it back. Each prints what it did.
func TestCordonAndUncordon(t *testing.T) {
	f, nats := statusFixture(t)
	var name string
	for n := range f.members {
		name = n
		break
	}
	m := f.members[name]
	other := api.Taint{Key: "gpu", Value: "true", Effect: api.TaintEffectNoSchedule}
	m.Spec.Taints = []api.Taint{other, api.CordonTaint}
	f.members[name] = m

	r := fleetctl(t, "", append([]string{"uncordon", name}, nats...)...)
	wantLines(t, r, "uncordoned member cluster "+name)
	js, err := jetstream.New(natsConnect(t, nats[1]))
	if err != nil {
		t.Fatal(err)
	}
	evs := storedEvents(t, js)
	if len(evs) != 1 || evs[0].Event.Type() != events.TypeMemberUpdated {
		t.Fatalf("published %v, want one member update", subjects(evs))
	}
	if got := payload[events.MemberUpdated](t, evs[0]).Member.Spec.Taints; !slices.Equal(got, []api.Taint{other}) {
		t.Errorf("taints after uncordon %+v, want only %+v", got, other)
	}

	m.Spec.Taints = []api.Taint{other}
	f.members[name] = m
	r = fleetctl(t, "", append([]string{"uncordon", name}, nats...)...)
	wantLines(t, r, "uncordoned member cluster "+name)
	if evs := storedEvents(t, js); len(evs) != 1 {
		t.Errorf("uncordon of an uncordoned member published: %v", subjects(evs))
	}
	if r := fleetctl(t, "", append([]string{"uncordon", "nowhere"}, nats...)...); r.e == nil || !strings.Contains(r.e.Error(), `"nowhere" not found`) {
		t.Errorf("uncordon of a missing member: %v", r.e)
	}
}

// TestApplyRefusesABudgetItsPlacementCannotUse: upstream's webhook rule, before
// anything is published: a PickAll placement takes only an integer minAvailable.
func TestApplyRefusesABudgetItsPlacementCannotUse(t *testing.T) {
	f, nats := statusFixture(t)
	f.setPlacement(api.ClusterResourcePlacement{ObjectMeta: metav1.ObjectMeta{Name: "everywhere"},
		Spec: api.PlacementSpec{Policy: &api.PlacementPolicy{PlacementType: api.PickAllPlacementType}}})
	budget := `apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacementDisruptionBudget
metadata: {name: everywhere}
spec: {minAvailable: "50%"}
`
	r := fleetctl(t, budget, append([]string{"apply", "-f", "-"}, nats...)...)
	want := "<stdin>: document 1: clusterresourceplacementdisruptionbudget.placement.kubernetes-fleet.io/everywhere: spec.minAvailable: " +
		"cluster resource placement policy type PickAll is not supported with min available as a percentage 50%\n"
	if r.e == nil || r.err != want {
		t.Errorf("error %v\nstderr:\n%s\nwant:\n%s", r.e, r.err, want)
	}
	r = fleetctl(t, strings.Replace(budget, `"50%"`, "2", 1), append([]string{"apply", "-f", "-"}, nats...)...)
	wantLines(t, r, "clusterresourceplacementdisruptionbudget.placement.kubernetes-fleet.io/everywhere configured")
}
