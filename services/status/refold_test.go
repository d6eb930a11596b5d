package status_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/status/fold"
)

// TestReportsFoldOnlyTheirCluster: reports arriving one batch at a time are
// folded from their own cluster's report (the other entries kept from the
// status stored), and the status stored after each is the one a fold of every
// report gives: the cluster's conditions and failed placements, and the
// placement's conditions counting every cluster.
func TestReportsFoldOnlyTheirCluster(t *testing.T) {
	f := newFixture(t)
	pub := func(id, typ, subj string, at time.Time, payload any) {
		t.Helper()
		f.publish(subj, f.event(typ, id, at, payload))
	}
	crp := webPlacement(api.WhenToTakeOverTypeAlways)
	clusters := []string{"member-1", "member-2", "member-3"}
	var chosen []events.ClusterDecision
	var started []events.ClusterProgress
	for _, c := range clusters {
		chosen = append(chosen, events.ClusterDecision{Cluster: c, Action: events.ActionAdded})
		started = append(started, events.ClusterProgress{Cluster: c, Started: true})
	}
	ns := api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web-2"}
	d := decision("web-2-crp", 1, 1, chosen...)
	snap := events.SnapshotCreated{Placement: "web-2-crp", Index: 0, Hash: "sha256:1", SelectedResources: []api.ResourceIdentifier{ns}}
	pr := progress("web-2-crp", 1, 1, 0, started...)
	pub("placement", events.TypePlacementUpserted, subject(events.PlacementSubject("web-2-crp")), t0, events.PlacementUpserted{Placement: crp})
	pub("decision", events.TypePlacementScheduledV2, subject(events.SchedulingSubject("web-2-crp")), t0, d)
	pub("snapshot", events.TypeSnapshotCreated, subject(events.RolloutSubject("web-2-crp")), t0, snap)
	pub("progress", events.TypeRolloutProgressedV2, subject(events.RolloutSubject("web-2-crp")), t0, pr)
	f.startStatus(t0.Add(time.Hour))
	f.handled("progress")

	// The same inputs, folded whole here.
	var in fold.Inputs
	if _, err := in.Upsert(crp, t0); err != nil {
		t.Fatal(err)
	}
	if err := in.ApplyDecision([]events.PlacementScheduledV2{d}); err != nil {
		t.Fatal(err)
	}
	in.ApplySnapshot(&snap)
	if err := in.ApplyRollout([]events.RolloutProgressedV2{pr}); err != nil {
		t.Fatal(err)
	}

	report := func(cluster, applied string) events.WorkReported {
		r := events.WorkReported{Cluster: cluster, Placement: "web-2-crp", Generation: 1, ObservedAt: t0,
			Manifests: []events.ManifestResult{{Resource: ns,
				Applied: events.Condition{Status: "True", Reason: "Applied"}, Available: events.Condition{Status: "True", Reason: api.ManifestAvailableReason}}},
			Applied:   events.Condition{Status: "True", Reason: api.ApplySucceededReason},
			Available: events.Condition{Status: "True", Reason: api.AvailableReason}}
		if applied == "False" {
			r.Manifests[0].Applied = events.Condition{Status: "False", Reason: api.ManifestNotTakenOverReason}
			r.Manifests[0].Available = events.Condition{Status: "Unknown"}
			r.Applied = events.Condition{Status: "False", Reason: api.ApplyFailedReason, Message: "1 manifest failed to apply"}
			r.Available = events.Condition{Status: "Unknown", Reason: api.AvailableUnknownReason}
		}
		return r
	}
	steps := []struct{ cluster, applied string }{
		{"member-1", "True"}, {"member-2", "False"}, {"member-3", "True"}, {"member-2", "True"}, {"member-1", "False"},
	}
	for i, s := range steps {
		at := t0.Add(time.Duration(i+1) * time.Minute)
		r := report(s.cluster, s.applied)
		r.ObservedAt = at
		id := fmt.Sprintf("report-%d", i)
		pub(id, events.TypeWorkReported, subject(events.WorkStatusSubject(s.cluster, "web-2-crp")), at, r)
		f.handled(id)
		in.ApplyReport(&r, int64(100+i))

		var raw []byte
		if err := f.Pool.QueryRow(t.Context(), `select status from placement_status where placement = 'web-2-crp'`).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var got api.PlacementStatus
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		want := fold.Status(&in, got, at)
		if g, w := shape(got), shape(want); g != w {
			t.Fatalf("after report %d (%s Applied=%s) the status stored is\n%s\nwant\n%s", i, s.cluster, s.applied, g, w)
		}
	}
}

// shape is a status's conditions (type, status, reason, message) and each
// cluster's, with its failed placements: what a fold decides, its times aside.
func shape(st api.PlacementStatus) string {
	line := func(cs []metav1.Condition) string {
		out := ""
		for _, c := range cs {
			out += fmt.Sprintf(" %s=%s/%s(%q)", c.Type, c.Status, c.Reason, c.Message)
		}
		return out
	}
	out := "placement:" + line(st.Conditions) + "\n"
	for _, p := range st.PlacementStatuses {
		out += p.ClusterName + ":" + line(p.Conditions)
		for _, fp := range p.FailedPlacements {
			out += fmt.Sprintf(" failed %s/%s=%s/%s", fp.Kind, fp.Name, fp.Condition.Status, fp.Condition.Reason)
		}
		out += "\n"
	}
	return out
}
