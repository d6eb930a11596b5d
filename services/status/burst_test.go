package status_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// TestBurstFoldsOncePerBatch: 500 members report on one placement at once.
// The status service folds the placement's status once per batch of events,
// not once per report: its final status shows every member Applied, and it
// announced far fewer status changes than there were reports.
func TestBurstFoldsOncePerBatch(t *testing.T) {
	const members = 500
	f := newFixture(t)
	pub := func(id, typ, subj string, at time.Time, payload any) {
		t.Helper()
		f.publish(subj, f.event(typ, id, at, payload))
	}
	pub("placement", events.TypePlacementUpserted, subject(events.PlacementSubject("web-2-crp")), t0,
		events.PlacementUpserted{Placement: webPlacement(api.WhenToTakeOverTypeAlways)})
	var chosen []events.ClusterDecision
	var started []events.ClusterProgress
	for i := range members {
		c := fmt.Sprintf("member-%03d", i)
		chosen = append(chosen, events.ClusterDecision{Cluster: c, Action: events.ActionAdded})
		started = append(started, events.ClusterProgress{Cluster: c, Started: true})
	}
	pub("decision", events.TypePlacementScheduledV2, subject(events.SchedulingSubject("web-2-crp")), t0, decision("web-2-crp", 1, 1, chosen...))
	ns := api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web-2"}
	pub("snapshot", events.TypeSnapshotCreated, subject(events.RolloutSubject("web-2-crp")), t0,
		events.SnapshotCreated{Placement: "web-2-crp", Index: 0, Hash: "sha256:1", SelectedResources: []api.ResourceIdentifier{ns}})
	pub("progress", events.TypeRolloutProgressedV2, subject(events.RolloutSubject("web-2-crp")), t0, progress("web-2-crp", 1, 1, 0, started...))
	at := t0.Add(time.Second)
	for _, c := range chosen {
		pub("report-"+c.Cluster, events.TypeWorkReported, subject(events.WorkStatusSubject(c.Cluster, "web-2-crp")), at, events.WorkReported{
			Cluster: c.Cluster, Placement: "web-2-crp", Generation: 1, ObservedAt: at,
			Manifests: []events.ManifestResult{{Resource: ns,
				Applied: events.Condition{Status: "True", Reason: "Applied"}, Available: events.Condition{Status: "True", Reason: api.ManifestAvailableReason}}},
			Applied:   events.Condition{Status: "True", Reason: api.ApplySucceededReason},
			Available: events.Condition{Status: "True", Reason: api.AvailableReason}})
	}

	f.startStatus(t0.Add(time.Minute))
	f.handled("report-" + chosen[members-1].Cluster)

	var available, changes int
	if err := f.Pool.QueryRow(t.Context(), `
		select count(*) from placement_status s, jsonb_array_elements(s.status->'placementStatuses') ps, jsonb_array_elements(ps->'conditions') c
		where s.placement = 'web-2-crp' and c->>'type' = 'Available' and c->>'status' = 'True'`).Scan(&available); err != nil {
		t.Fatal(err)
	}
	if available != members {
		t.Errorf("%d members Available in the status, want %d", available, members)
	}
	if err := f.Pool.QueryRow(t.Context(), `select count(distinct (convert_from(payload, 'UTF8')::jsonb->>'revision')) from outbox where type = $1`,
		events.TypePlacementStatusChangedV2).Scan(&changes); err != nil {
		t.Fatal(err)
	}
	if changes == 0 || changes > members/10 {
		t.Errorf("%d status changes announced for %d reports; want one per batch (at most %d)", changes, members, members/10)
	}
	t.Logf("%d reports folded in %d status changes", members, changes)
}
