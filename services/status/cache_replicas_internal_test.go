package status

import (
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
)

// Two replicas, each with its cache, take turns on one placement: a batch folded by
// one replica after the other changed the placement starts from the other's change,
// not from what its cache held.
func TestFoldCacheSeesTheOtherReplicasChanges(t *testing.T) {
	env := servicetest.New(t)
	replica := func(name string) *server {
		return &server{pool: env.Pool, source: name, log: slog.Default(), now: time.Now, cache: newFoldCache(1<<20, time.Now)}
	}
	a, b := replica("a"), replica("b")
	var seq uint64
	deliver := func(s *server, typ string, subject string, err error, payload any) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		ev, err := events.New(typ, "/test", "", "", payload)
		if err != nil {
			t.Fatal(err)
		}
		seq++
		if err := s.handle(t.Context(), []bus.Delivery{{Event: ev, Meta: bus.Meta{Subject: subject, Sequence: seq, Time: time.Now()}}}); err != nil {
			t.Fatalf("%s: %s: %v", s.source, typ, err)
		}
	}
	const name = "web"
	ns := api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web"}
	crp := api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: api.PlacementSpec{
			ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: "web"}},
			Policy:            &api.PlacementPolicy{PlacementType: api.PickAllPlacementType},
		},
	}
	clusters := []string{"member-1", "member-2"}
	var decided []events.ClusterDecision
	var started []events.ClusterProgress
	for _, c := range clusters {
		decided = append(decided, events.ClusterDecision{Cluster: c, Action: events.ActionAdded})
		started = append(started, events.ClusterProgress{Cluster: c, Started: true})
	}
	subj, err := events.PlacementSubject(name)
	deliver(a, events.TypePlacementUpserted, subj, err, events.PlacementUpserted{Placement: crp})
	subj, err = events.SchedulingSubject(name)
	deliver(a, events.TypePlacementScheduledV2, subj, err, events.PlacementScheduledV2{Placement: name, Revision: 1, Base: true, Pieces: 1,
		Generation: 1, PlacementType: api.PickAllPlacementType, Fulfilled: true, ChosenCount: len(decided), Clusters: decided})
	subj, err = events.RolloutSubject(name)
	deliver(a, events.TypeSnapshotCreated, subj, err, events.SnapshotCreated{Placement: name, Index: 0, Hash: "sha256:1", SelectedResources: []api.ResourceIdentifier{ns}})
	deliver(a, events.TypeRolloutProgressedV2, subj, err, events.RolloutProgressedV2{Placement: name, Revision: 1, Base: true, Pieces: 1,
		Generation: 1, ClusterCount: len(started), Clusters: started})
	report := func(s *server, cluster string, status string) {
		t.Helper()
		ok := events.Condition{Status: status, Reason: api.ApplySucceededReason}
		if status != "True" {
			ok.Reason = api.ApplyFailedReason
		}
		subj, err := events.WorkStatusSubject(cluster, name)
		deliver(s, events.TypeWorkReported, subj, err, events.WorkReported{Cluster: cluster, Placement: name, Generation: 1, ObservedAt: time.Now(),
			Manifests: []events.ManifestResult{{Resource: ns, Applied: ok, Available: ok}}, Applied: ok, Available: ok})
	}
	report(a, "member-1", "True")  // a keeps the placement with member-1 applied
	report(b, "member-2", "True")  // b changes it: member-2 applied too
	report(a, "member-1", "False") // a folds member-1 failing, from b's change

	var applied []string
	rows, err := env.Pool.Query(t.Context(), `
		select ps->>'clusterName' from placement_status s, jsonb_array_elements(s.status->'placementStatuses') ps, jsonb_array_elements(ps->'conditions') c
		where s.placement = $1 and c->>'type' = 'Applied' and c->>'status' = 'True' order by 1`, name)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		applied = append(applied, c)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if len(applied) != 1 || applied[0] != "member-2" {
		t.Errorf("Applied in the status after both replicas folded: %v, want member-2 only (a replica folded from its stale cache?)", applied)
	}
}
