package status_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// Two replicas share the durable consumer: events of one placement are folded
// one at a time whichever replica gets them, and in whatever order they are
// folded the status ends the same.
func TestTwoReplicas(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0.Add(time.Minute))
	f.startStatus(t0.Add(time.Minute))
	ids := story(f)
	for _, id := range ids {
		f.handled(id)
	}

	var raw []byte
	if err := f.Pool.QueryRow(t.Context(), `select status from placement_status where placement = 'web-2-crp'`).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var st api.PlacementStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range st.Conditions {
		got = append(got, c.Type+"="+string(c.Status))
	}
	for _, ps := range st.PlacementStatuses {
		for _, c := range ps.Conditions {
			got = append(got, ps.ClusterName+":"+c.Type+"="+string(c.Status))
		}
		for _, fp := range ps.FailedPlacements {
			got = append(got, ps.ClusterName+":failed:"+fp.Name+":"+fp.Condition.Reason)
		}
	}
	want := []string{
		"ClusterResourcePlacementScheduled=True", "ClusterResourcePlacementRolloutStarted=True",
		"ClusterResourcePlacementOverridden=True", "ClusterResourcePlacementWorkSynchronized=True",
		"ClusterResourcePlacementApplied=False",
		"member-1:Scheduled=True", "member-1:RolloutStarted=True", "member-1:Overridden=True",
		"member-1:WorkSynchronized=True", "member-1:Applied=True", "member-1:Available=True",
		"member-2:Scheduled=True", "member-2:RolloutStarted=True", "member-2:Overridden=True",
		"member-2:WorkSynchronized=True", "member-2:Applied=False", "member-2:failed:web-2:NotTakenOver",
	}
	if !slices.Equal(got, want) {
		t.Errorf("status with two replicas:\n got %q\nwant %q", got, want)
	}
	var audited, takeovers int
	if err := f.Pool.QueryRow(t.Context(), `select (select count(*) from audit_log where type <> $1), (select count(*) from takeover_decisions)`,
		events.TypePlacementStatusChangedV2).Scan(&audited, &takeovers); err != nil {
		t.Fatal(err)
	}
	if audited != len(ids) || takeovers != 1 {
		t.Errorf("%d events audited, %d takeover decisions; want %d and 1", audited, takeovers, len(ids))
	}
}

// BenchmarkAuditLog measures the hot path: events the service only records
// (hub resources, here), published as fast as the bus takes them.
func BenchmarkAuditLog(b *testing.B) {
	f := newFixture(b)
	f.startStatus(t0)
	manifest := json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"web"},"data":{"k":"v"}}`)
	subj := subject(events.HubResourceSubject("", "ConfigMap", "web", "cm"))
	b.ResetTimer()
	publishAsync(b, f, b.N, func(i int) (string, any, string) {
		return events.TypeHubResourceUpserted, events.HubResourceUpserted{Manifest: manifest}, subj
	})
	waitAudited(b, f, b.N)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkFoldReports measures apply reports of one placement on ten
// clusters: audit, apply result, fold and status event for each.
func BenchmarkFoldReports(b *testing.B) {
	f := newFixture(b)
	f.startStatus(t0)
	clusters := make([]events.ClusterDecision, 10)
	rollout := make([]events.ClusterProgress, 10)
	for i := range clusters {
		clusters[i] = events.ClusterDecision{Cluster: fmt.Sprintf("member-%d", i), Action: events.ActionAdded}
		rollout[i] = events.ClusterProgress{Cluster: clusters[i].Cluster, Started: true}
	}
	setup := []struct {
		typ, subj string
		payload   any
	}{
		{events.TypePlacementUpserted, subject(events.PlacementSubject("web-2-crp")), events.PlacementUpserted{Placement: webPlacement(api.WhenToTakeOverTypeAlways)}},
		{events.TypePlacementScheduledV2, subject(events.SchedulingSubject("web-2-crp")), decision("web-2-crp", 1, 1, clusters...)},
		{events.TypeRolloutProgressedV2, subject(events.RolloutSubject("web-2-crp")), progress("web-2-crp", 1, 1, 0, rollout...)},
	}
	for _, s := range setup {
		f.publish(s.subj, f.event(s.typ, "", t0, s.payload))
	}
	waitAudited(b, f, len(setup))
	ns := api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web-2"}
	b.ResetTimer()
	publishAsync(b, f, b.N, func(i int) (string, any, string) {
		c := clusters[i%len(clusters)].Cluster
		ok := i%2 == 0
		status := map[bool]string{true: "True", false: "False"}[ok]
		return events.TypeWorkReported, events.WorkReported{Cluster: c, Placement: "web-2-crp", Generation: 1,
			ObservedAt: t0.Add(time.Duration(i) * time.Millisecond),
			Manifests: []events.ManifestResult{{Resource: ns, Applied: events.Condition{Status: status, Reason: api.ManifestApplyFailedReason},
				Available: events.Condition{Status: status}}},
			Applied: events.Condition{Status: status}, Available: events.Condition{Status: status}}, subject(events.WorkStatusSubject(c, "web-2-crp"))
	})
	waitAudited(b, f, len(setup)+b.N)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

func publishAsync(b *testing.B, f *fixture, n int, next func(i int) (typ string, payload any, subject string)) {
	b.Helper()
	for i := range n {
		typ, payload, subj := next(i)
		ev, err := events.New(typ, "/flotilla/bench", "", "", payload)
		if err != nil {
			b.Fatal(err)
		}
		msg, err := bus.Encode(ev, subj)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.JS.PublishMsgAsync(msg, jetstream.WithMsgID(ev.ID())); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-f.JS.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publishing did not complete")
	}
}

func waitAudited(b *testing.B, f *fixture, n int) {
	b.Helper()
	poll.Until(f.t, time.Minute, fmt.Sprintf("%d events audited", n), func() error {
		var got int
		if err := f.Pool.QueryRow(context.Background(), `select count(*) from audit_log where type <> $1`, events.TypePlacementStatusChangedV2).Scan(&got); err != nil {
			return err
		}
		if got < n {
			return fmt.Errorf("%d audited", got)
		}
		return nil
	})
}

// BenchmarkFoldReportsAcrossPlacements measures the shape of a burst of placements: 500
// placements on 100 clusters each, their reports interleaved on the stream, so a batch
// holds a report or so of each of hundreds of placements (what bench-scale's 1,000
// placements of PickN 100 give the service). Run it with -benchtime 5000x.
func BenchmarkFoldReportsAcrossPlacements(b *testing.B) {
	const placements, clusters = 500, 100
	f := newFixture(b)
	f.startStatus(t0)
	var decided []events.ClusterDecision
	var started []events.ClusterProgress
	for c := range clusters {
		name := fmt.Sprintf("member-%03d", c)
		decided = append(decided, events.ClusterDecision{Cluster: name, Action: events.ActionAdded})
		started = append(started, events.ClusterProgress{Cluster: name, Started: true})
	}
	ns := api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web-2"}
	setup := 0
	for p := range placements {
		name := fmt.Sprintf("crp-%03d", p)
		crp := webPlacement(api.WhenToTakeOverTypeAlways)
		crp.Name = name
		for _, s := range []struct {
			typ, subj string
			payload   any
		}{
			{events.TypePlacementUpserted, subject(events.PlacementSubject(name)), events.PlacementUpserted{Placement: crp}},
			{events.TypePlacementScheduledV2, subject(events.SchedulingSubject(name)), decision(name, 1, 1, decided...)},
			{events.TypeSnapshotCreated, subject(events.RolloutSubject(name)), events.SnapshotCreated{Placement: name, Index: 0, Hash: "sha256:1", SelectedResources: []api.ResourceIdentifier{ns}}},
			{events.TypeRolloutProgressedV2, subject(events.RolloutSubject(name)), progress(name, 1, 1, 0, started...)},
		} {
			f.publish(s.subj, f.event(s.typ, "", t0, s.payload))
			setup++
		}
	}
	waitAudited(b, f, setup)
	b.ResetTimer()
	publishAsync(b, f, b.N, func(i int) (string, any, string) {
		name := fmt.Sprintf("crp-%03d", i%placements)
		c := decided[(i/placements)%clusters].Cluster
		ok := events.Condition{Status: "True", Reason: api.ApplySucceededReason}
		return events.TypeWorkReported, events.WorkReported{Cluster: c, Placement: name, Generation: 1,
			ObservedAt: t0.Add(time.Duration(i) * time.Millisecond),
			Manifests:  []events.ManifestResult{{Resource: ns, Applied: ok, Available: ok}},
			Applied:    ok, Available: ok}, subject(events.WorkStatusSubject(c, name))
	})
	waitAudited(b, f, setup+b.N)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
