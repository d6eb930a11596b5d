package status_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/revision"
)

// TestSnapshotInPiecesAndBoundedReports folds the snapshot of a placement of
// 2,500 objects, whose pieces arrive out of order, and a bounded report with
// takeover decisions that did not fit in it: the status lists every selected
// resource once the snapshot is whole, and the history keeps the report's
// counts and every takeover decision once.
func TestSnapshotInPiecesAndBoundedReports(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0.Add(time.Minute))
	pub := func(id, typ, subj string, payload any) {
		t.Helper()
		ev := f.event(typ, id, t0, payload)
		f.publish(subj, ev)
		f.handled(ev.ID())
	}
	pub("placement", events.TypePlacementUpserted, subject(events.PlacementSubject("web-2-crp")),
		events.PlacementUpserted{Placement: webPlacement(api.WhenToTakeOverTypeAlways)})

	pub("decision", events.TypePlacementScheduledV2, subject(events.SchedulingSubject("web-2-crp")),
		decision("web-2-crp", 1, 1, events.ClusterDecision{Cluster: "member-1", Action: events.ActionAdded}))

	const objects = 2500
	resources := make([]api.ResourceIdentifier, objects)
	for i := range resources {
		resources[i] = api.ResourceIdentifier{Version: "v1", Kind: "ConfigMap", Namespace: "web-2", Name: fmt.Sprintf("cm-%04d", i)}
	}
	pieces, err := revision.Cut(events.SnapshotCreated{Placement: "web-2-crp", Index: 0, Hash: "sha256:1", ResourceCount: objects}, resources,
		func(p *events.SnapshotCreated, piece, n int, rs []api.ResourceIdentifier) {
			p.Piece, p.Pieces, p.SelectedResources = piece, n, rs
		})
	if err != nil || len(pieces) != 3 {
		t.Fatalf("cut %d pieces (%v), want 3", len(pieces), err)
	}
	rolling := subject(events.RolloutSubject("web-2-crp"))
	for _, i := range []int{2, 0} {
		pub(fmt.Sprint("snapshot-0.", i), events.TypeSnapshotCreated, rolling, pieces[i])
	}
	if got := f.selected(); got != 0 {
		t.Fatalf("%d resources selected before the snapshot is whole", got)
	}
	pub("snapshot-0.1", events.TypeSnapshotCreated, rolling, pieces[1])
	if got := f.selected(); got != objects {
		t.Fatalf("%d resources selected once the snapshot is whole, want %d", got, objects)
	}
	var kept int
	if err := f.Pool.QueryRow(t.Context(), `select count(*) from status_pieces`).Scan(&kept); err != nil || kept != 0 {
		t.Errorf("%d pieces still kept (%v)", kept, err)
	}

	// A report of the 2,500 objects, all taken over: 100 decisions ride in
	// the report and the rest in TakeoversDecided events.
	report := &events.WorkReported{Cluster: "member-1", Placement: "web-2-crp", ResourceIndex: 0, Generation: 1, ObservedAt: t0}
	for _, r := range resources {
		report.Manifests = append(report.Manifests, events.ManifestResult{Resource: r,
			Applied: events.Condition{Status: "True", Reason: "Applied"}, Available: events.Condition{Status: "True", Reason: "ConfigMapAvailable"}})
		report.Takeovers = append(report.Takeovers, events.TakeoverDecision{Resource: r, Mode: api.WhenToTakeOverTypeAlways,
			Comparison: api.ComparisonOptionTypePartialComparison, Outcome: "TakenOver", DecidedAt: t0})
	}
	events.BoundManifests(report)
	rest := events.SplitTakeovers(report)
	status := subject(events.WorkStatusSubject("member-1", "web-2-crp"))
	for i, chunk := range rest {
		pub(fmt.Sprint("takeovers-", i), events.TypeTakeoversDecided, status, events.TakeoversDecided{
			Cluster: "member-1", Placement: "web-2-crp", Generation: 1, Takeovers: chunk})
	}
	pub("report", events.TypeWorkReported, status, report)

	var decisions, listed, total int
	if err := f.Pool.QueryRow(t.Context(), `select count(*) from takeover_decisions where placement = 'web-2-crp'`).Scan(&decisions); err != nil {
		t.Fatal(err)
	}
	if decisions != objects {
		t.Errorf("%d takeover decisions recorded, want %d", decisions, objects)
	}
	if err := f.Pool.QueryRow(t.Context(), `select jsonb_array_length(results), (counts->>'total')::int from apply_results where placement = 'web-2-crp'`).
		Scan(&listed, &total); err != nil {
		t.Fatal(err)
	}
	if listed != 0 || total != objects {
		t.Errorf("apply_results lists %d manifests and counts %d, want 0 listed (all healthy) and %d counted", listed, total, objects)
	}
}

// selected is the length of the placement's status.selectedResources.
func (f *fixture) selected() int {
	f.t.Helper()
	r, _ := query[api.ClusterResourcePlacement](f, events.QueryGetPlacement, events.NameQuery{Name: "web-2-crp"})
	return len(r.Result.Status.SelectedResources)
}
