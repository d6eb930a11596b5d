package status

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// stream makes deliveries as the bus hands them over: each a new event with the next
// stream sequence.
type stream struct {
	t   testing.TB
	seq uint64
}

// delivery is an event of type typ with payload on subject (err: the subject's
// construction failed).
func (st *stream) delivery(typ string, subject string, err error, payload any) bus.Delivery {
	st.t.Helper()
	if err != nil {
		st.t.Fatal(err)
	}
	ev, err := events.New(typ, "/test", "", "", payload)
	if err != nil {
		st.t.Fatal(err)
	}
	st.seq++
	return bus.Delivery{Event: ev, Meta: bus.Meta{Subject: subject, Sequence: st.seq, Time: time.Now()}}
}

// report is cluster's report on placement name of one object, its Applied and
// Available conditions status ("True" or "False").
func (st *stream) report(name, cluster string, object api.ResourceIdentifier, status string) bus.Delivery {
	st.t.Helper()
	ok := events.Condition{Status: status, Reason: api.ApplySucceededReason}
	if status != "True" {
		ok.Reason = api.ApplyFailedReason
	}
	subj, err := events.WorkStatusSubject(cluster, name)
	return st.delivery(events.TypeWorkReported, subj, err, events.WorkReported{Cluster: cluster, Placement: name, Generation: 1, ObservedAt: time.Now(),
		Manifests: []events.ManifestResult{{Resource: object, Applied: ok, Available: ok}}, Applied: ok, Available: ok})
}

// decision is a whole PickAll decision of revision rev for placement name, choosing clusters.
func (st *stream) decision(name string, rev int64, clusters ...string) bus.Delivery {
	st.t.Helper()
	var chosen []events.ClusterDecision
	for _, c := range clusters {
		chosen = append(chosen, events.ClusterDecision{Cluster: c, Action: events.ActionAdded})
	}
	subj, err := events.SchedulingSubject(name)
	return st.delivery(events.TypePlacementScheduledV2, subj, err, events.PlacementScheduledV2{Placement: name, Revision: rev, Base: true, Pieces: 1,
		Generation: 1, PlacementType: api.PickAllPlacementType, Fulfilled: true, ChosenCount: len(chosen), Clusters: chosen})
}

// progress is whole rollout progress of revision rev for placement name, clusters started.
func (st *stream) progress(name string, rev int64, clusters ...string) bus.Delivery {
	st.t.Helper()
	var started []events.ClusterProgress
	for _, c := range clusters {
		started = append(started, events.ClusterProgress{Cluster: c, Started: true})
	}
	subj, err := events.RolloutSubject(name)
	return st.delivery(events.TypeRolloutProgressedV2, subj, err, events.RolloutProgressedV2{Placement: name, Revision: rev, Base: true, Pieces: 1,
		Generation: 1, ClusterCount: len(started), Clusters: started})
}

// pickAllOf is a PickAll placement name of the Namespace ns.
func pickAllOf(name, ns string) api.ClusterResourcePlacement {
	return api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.PlacementSpec{
			ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: ns}},
			Policy:            &api.PlacementPolicy{PlacementType: api.PickAllPlacementType},
		},
	}
}
