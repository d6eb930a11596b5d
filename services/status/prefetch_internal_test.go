package status

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
)

// One batch of reports about two placements, whose placements and reports are
// read ahead in one round trip (prefetch), is judged as if each report were
// handled alone: a report from a cluster never chosen is refused; one from a
// cluster a decision earlier in the same batch chose is folded; a second
// report from the same cluster wins over the first.
func TestAReportBatchIsCheckedAgainstTheDecisionsInIt(t *testing.T) {
	env := servicetest.New(t)
	s := &server{pool: env.Pool, source: "/test", log: slog.Default(), now: time.Now, cache: newFoldCache(1<<20, time.Now)}
	st := &stream{t: t}
	delivery := st.delivery
	handle := func(ds ...bus.Delivery) {
		t.Helper()
		if err := s.handle(t.Context(), ds); err != nil {
			t.Fatal(err)
		}
	}
	ns := api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web"}
	decision, progress := st.decision, st.progress
	report := func(name, cluster, status string) bus.Delivery { return st.report(name, cluster, ns, status) }
	for _, name := range []string{"web", "api"} {
		crp := pickAllOf(name, "web")
		subj, err := events.PlacementSubject(name)
		handle(delivery(events.TypePlacementUpserted, subj, err, events.PlacementUpserted{Placement: crp}))
		handle(decision(name, 1, "member-1"))
		subj, err = events.RolloutSubject(name)
		handle(delivery(events.TypeSnapshotCreated, subj, err, events.SnapshotCreated{Placement: name, Index: 0, Hash: "sha256:1", SelectedResources: []api.ResourceIdentifier{ns}}))
		handle(progress(name, 1, "member-1"))
	}

	forged := report("web", "member-9", "True")
	handle(
		report("web", "member-1", "True"),
		forged,
		report("api", "member-1", "True"),
		decision("api", 2, "member-1", "member-2"),
		progress("api", 2, "member-1", "member-2"),
		report("api", "member-2", "True"),
		report("web", "member-1", "False"),
	)

	applied := func(name string) []string {
		t.Helper()
		var out []string
		rows, err := env.Pool.Query(t.Context(), `
			select ps->>'clusterName' || '=' || (c->>'status') from placement_status s, jsonb_array_elements(s.status->'placementStatuses') ps,
				jsonb_array_elements(ps->'conditions') c
			where s.placement = $1 and c->>'type' = 'Applied' order by 1`, name)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			out = append(out, c)
		}
		return out
	}
	if got, want := applied("web"), []string{"member-1=False"}; !slices.Equal(got, want) {
		t.Errorf("web's Applied conditions %v, want %v (member-1's second report wins, member-9's is refused)", got, want)
	}
	if got, want := applied("api"), []string{"member-1=True", "member-2=True"}; !slices.Equal(got, want) {
		t.Errorf("api's Applied conditions %v, want %v (member-2 was chosen earlier in the batch)", got, want)
	}
	var stored, audited int
	if err := env.Pool.QueryRow(t.Context(), `
		select (select count(*) from status_reports where cluster = 'member-9'),
			(select count(*) from audit_log where event_id = $1)`, forged.Event.ID()).Scan(&stored, &audited); err != nil {
		t.Fatal(err)
	}
	if stored != 0 || audited != 1 {
		t.Errorf("the report from member-9, never chosen: %d stored, %d audited; want 0 and 1", stored, audited)
	}
}
