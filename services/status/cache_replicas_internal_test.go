package status

import (
	"log/slog"
	"testing"
	"time"

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
	st := &stream{t: t}
	deliver := func(s *server, typ string, subject string, err error, payload any) {
		t.Helper()
		handleOne(t, s, st.delivery(typ, subject, err, payload))
	}
	const name = "web"
	ns := api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web"}
	crp := pickAllOf(name, "web")
	subj, err := events.PlacementSubject(name)
	deliver(a, events.TypePlacementUpserted, subj, err, events.PlacementUpserted{Placement: crp})
	handleOne(t, a, st.decision(name, 1, "member-1", "member-2"))
	subj, err = events.RolloutSubject(name)
	deliver(a, events.TypeSnapshotCreated, subj, err, events.SnapshotCreated{Placement: name, Index: 0, Hash: "sha256:1", SelectedResources: []api.ResourceIdentifier{ns}})
	handleOne(t, a, st.progress(name, 1, "member-1", "member-2"))
	report := func(s *server, cluster string, status string) {
		t.Helper()
		handleOne(t, s, st.report(name, cluster, ns, status))
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

// handleOne has s handle d alone, as one batch.
func handleOne(t *testing.T, s *server, d bus.Delivery) {
	t.Helper()
	if err := s.handle(t.Context(), []bus.Delivery{d}); err != nil {
		t.Fatalf("%s: %s: %v", s.source, d.Event.Type(), err)
	}
}
