package status_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// ifNoDiffStep is seed 000's second step: the placement moves to IfNoDiff;
// member-2's namespace differs in a label, so the takeover is refused and the
// difference listed; member-1's namespace has drifted meanwhile.
func ifNoDiffStep(f *fixture) (last string) {
	at := t0.Add(time.Minute)
	pub := func(key, typ, subj string, at time.Time, payload any) {
		ev := f.event(typ, "step2-"+key, at, payload)
		f.publish(subj, ev)
		last = ev.ID()
	}
	crp := webPlacement(api.WhenToTakeOverTypeIfNoDiff)
	crp.Spec.Strategy.ApplyStrategy.ComparisonOption = api.ComparisonOptionTypePartialComparison
	pub("placement", events.TypePlacementUpserted, subject(events.PlacementSubject("web-2-crp")), at, events.PlacementUpserted{Placement: crp})
	// A new generation: the scheduler's decision is a base.
	pub("scheduled", events.TypePlacementScheduledV2, subject(events.SchedulingSubject("web-2-crp")), at.Add(time.Second),
		decision("web-2-crp", 2, 2, events.ClusterDecision{Cluster: "member-1", Action: events.ActionKept},
			events.ClusterDecision{Cluster: "member-2", Action: events.ActionKept}))
	// The rollout's progress changed only in its generation: no cluster changed.
	pub("rollout", events.TypeRolloutProgressedV2, subject(events.RolloutSubject("web-2-crp")), at.Add(2*time.Second),
		events.RolloutProgressedV2{Placement: "web-2-crp", Revision: 2, Pieces: 1, Generation: 2, ClusterCount: 2, Clusters: []events.ClusterProgress{}})

	ns := api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web-2"}
	first := at.Add(-10 * time.Second)
	drift := []api.PatchDetail{{Path: "/metadata/labels/owner", ValueInMember: "ops", ValueInHub: "web"}}
	for i, seen := range []time.Time{at.Add(3 * time.Second), at.Add(4 * time.Second)} {
		pub(fmt.Sprintf("report-member-1-%d", i), events.TypeWorkReported, subject(events.WorkStatusSubject("member-1", "web-2-crp")), seen,
			events.WorkReported{Cluster: "member-1", Placement: "web-2-crp", Generation: 2, ObservedAt: seen,
				Manifests: []events.ManifestResult{{Resource: ns, ObservedGeneration: 3, Drifts: drift, FirstDriftedAt: &first,
					Applied: events.Condition{Status: "True", Reason: "Applied"}, Available: events.Condition{Status: "True", Reason: "Available"}}},
				Applied:   events.Condition{Status: "True", Reason: api.ApplySucceededReason},
				Available: events.Condition{Status: "True", Reason: api.AvailableReason}})
	}
	diff := []api.PatchDetail{{Path: "/metadata/labels/team", ValueInMember: "blue", ValueInHub: "green"}}
	refused := at.Add(5 * time.Second)
	pub("report-member-2", events.TypeWorkReported, subject(events.WorkStatusSubject("member-2", "web-2-crp")), refused,
		events.WorkReported{Cluster: "member-2", Placement: "web-2-crp", Generation: 2, ObservedAt: refused,
			Manifests: []events.ManifestResult{{Resource: ns, ObservedGeneration: 1, Diffs: diff, FirstDiffedAt: &refused,
				Applied:   events.Condition{Status: "False", Reason: api.ManifestFailedToTakeOverReason},
				Available: events.Condition{Status: "Unknown", Reason: api.ManifestNotAvailableYetReason}}},
			Takeovers: []events.TakeoverDecision{{Resource: ns, Mode: api.WhenToTakeOverTypeIfNoDiff,
				Comparison: api.ComparisonOptionTypePartialComparison, Outcome: api.ManifestFailedToTakeOverReason, Diffs: diff, DecidedAt: refused}},
			Applied:   events.Condition{Status: "False", Reason: api.ApplyFailedReason},
			Available: events.Condition{Status: "Unknown", Reason: api.AvailableUnknownReason}})
	return last
}

// The example queries of AUDIT.md run and answer the questions after seed
// 000's first two steps.
func TestAuditQueries(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0.Add(2 * time.Minute))
	story(f)
	f.handled(ifNoDiffStep(f))

	get, _ := query[api.ClusterResourcePlacement](f, events.QueryGetPlacement, events.NameQuery{Name: "web-2-crp"})
	crp := get.Result
	m2 := crp.Status.PlacementStatuses[1]
	if crp.Generation != 2 || len(m2.FailedPlacements) != 1 || m2.FailedPlacements[0].Condition.Reason != api.ManifestFailedToTakeOverReason ||
		m2.FailedPlacements[0].Condition.Message != api.ManifestApplyFailedMessage(api.FailedToTakeOverError) {
		t.Errorf("member-2 after IfNoDiff: %s", mustMarshal(t, m2))
	}
	if d := m2.DiffedPlacements; len(d) != 1 || d[0].ObservedDiffs[0].Path != "/metadata/labels/team" || *d[0].TargetClusterObservedGeneration != 1 {
		t.Errorf("member-2 diffedPlacements: %s", mustMarshal(t, d))
	}
	if d := crp.Status.PlacementStatuses[0].DriftedPlacements; len(d) != 1 || !d[0].ObservationTime.Equal(&metav1.Time{Time: t0.Add(64 * time.Second)}) {
		t.Errorf("member-1 driftedPlacements: %s", mustMarshal(t, d))
	}

	var episodes int
	var last time.Time
	if err := f.Pool.QueryRow(t.Context(), `select count(*), max(last_observed_at) from drift_reports`).Scan(&episodes, &last); err != nil {
		t.Fatal(err)
	}
	if episodes != 1 || !last.Equal(t0.Add(64*time.Second)) {
		t.Errorf("drift_reports: %d episodes, last observed %v; want one episode seen twice", episodes, last)
	}

	doc, err := os.ReadFile("AUDIT.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(doc), "```sql\n")[1:]
	// The drift_this_week view compares with now(): the story's times are
	// fixed, so move the drift into this week for the query to find it.
	if _, err := f.Pool.Exec(t.Context(), `update drift_reports set last_observed_at = now()`); err != nil {
		t.Fatal(err)
	}
	for i, b := range blocks {
		q, _, _ := strings.Cut(b, "```")
		rows, err := f.Pool.Query(t.Context(), q)
		if err != nil {
			t.Errorf("AUDIT.md query %d fails: %v\n%s", i+1, err, q)
			continue
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			t.Errorf("AUDIT.md query %d fails: %v\n%s", i+1, err, q)
		}
		// Every question has an answer in this story, except the scheduler's
		// history: no scheduler runs here (TestHistoryWithTheScheduler has
		// one), and the outbox quarantine: nothing in it is too big
		// (platform/outbox's tests fill it).
		if n == 0 && !strings.Contains(q, "from scheduling_decisions") && !strings.Contains(q, "from outbox_quarantine") {
			t.Errorf("AUDIT.md query %d answers nothing:\n%s", i+1, q)
		}
	}
}

// Every event is recorded, even one the service cannot fold: an unknown type
// (a newer producer) or a payload that breaks its rules. Neither is
// dead-lettered by the status service.
func TestEveryEventIsAudited(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0)

	future := cloudevents.New()
	future.SetID("future-1")
	future.SetType("io.flotilla.placement.archived.v9")
	future.SetSource("/flotilla/next")
	future.SetSubject("web")
	future.SetTime(t0)
	if err := future.SetData("application/json", map[string]string{"name": "web"}); err != nil {
		t.Fatal(err)
	}
	f.publish("flotilla.placement.web", future)

	text := cloudevents.New()
	text.SetID("text-1")
	text.SetType(events.TypeHubResourceUpserted)
	text.SetSource("/flotilla/test")
	text.SetTime(t0)
	if err := text.SetData("text/plain", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	f.publish("flotilla.hub.core.ConfigMap.x.y", text)

	invalid := f.event(events.TypeRolloutProgressedV2, "ok-1", t0, progress("web", 1, 1, 0))
	if err := invalid.SetData("application/json", map[string]any{"placement": ""}); err != nil {
		t.Fatal(err)
	}
	f.publish("flotilla.rollout.web", invalid)
	f.handled("future-1")
	f.handled("text-1")
	f.handled("ok-1")

	rows, err := f.Pool.Query(t.Context(), `select event_id, type, payload is null from audit_log order by event_id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var id, typ string
		var null bool
		if err := rows.Scan(&id, &typ, &null); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s null=%v", id, typ, null))
	}
	want := []string{
		"future-1 io.flotilla.placement.archived.v9 null=false",
		"ok-1 io.flotilla.rollout.progressed.v2 null=false",
		"text-1 io.flotilla.hubresource.upserted.v1 null=true",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit_log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var placements int
	if err := f.Pool.QueryRow(t.Context(), `select count(*) from status_placements`).Scan(&placements); err != nil || placements != 0 {
		t.Errorf("status_placements rows = %d (err %v): the invalid progress was folded", placements, err)
	}
	info, err := f.JS.Stream(t.Context(), bus.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := info.GetLastMsgForSubject(t.Context(), bus.SubjectDeadLetterPrefix+"status"); err == nil {
		t.Error("the status service dead-lettered an event")
	} else if err != jetstream.ErrMsgNotFound {
		t.Fatal(err)
	}
}

// A deleted placement disappears from get and list, its watchers see the
// deletion, and its history stays. Re-created, it starts a new generation.
func TestDeletedPlacement(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0)
	story(f)
	del := f.event(events.TypePlacementDeleted, "delete-1", t0.Add(time.Minute), events.PlacementDeleted{Name: "web-2-crp"})
	f.publish(subject(events.PlacementSubject("web-2-crp")), del)
	f.handled(del.ID())

	if r, _ := query[api.ClusterResourcePlacement](f, events.QueryGetPlacement, events.NameQuery{Name: "web-2-crp"}); !r.NotFound {
		t.Errorf("placement.get after delete = %+v", r)
	}
	if r, _ := query[[]api.ClusterResourcePlacement](f, events.QueryListPlacements, events.ListQuery{}); len(r.Result) != 0 {
		t.Errorf("placement.list after delete = %d placements", len(r.Result))
	}
	if r, _ := query[events.PlacementHistory](f, events.QueryHistory, events.NameQuery{Name: "web-2-crp"}); r.NotFound || len(r.Result.Snapshots) != 1 {
		t.Errorf("history after delete = %+v", r)
	}
	poll.Until(f.t, time.Minute, "watchers see the deletion", func() error {
		changes := f.statusChanges()
		if n := len(changes); n > 0 && changes[n-1].Deleted && changes[n-1].ClusterCount == 2 && len(changes[n-1].Clusters) == 0 {
			return nil
		}
		return fmt.Errorf("%d status events, none with the deletion", len(changes))
	})

	again := f.event(events.TypePlacementUpserted, "recreate-1", t0.Add(2*time.Minute),
		events.PlacementUpserted{Placement: webPlacement(api.WhenToTakeOverTypeNever)})
	f.publish(subject(events.PlacementSubject("web-2-crp")), again)
	f.handled(again.ID())
	r, _ := query[api.ClusterResourcePlacement](f, events.QueryGetPlacement, events.NameQuery{Name: "web-2-crp"})
	c := meta.FindStatusCondition(r.Result.Status.Conditions, string(api.ClusterResourcePlacementScheduledConditionType))
	if r.Result.Generation != 2 || c == nil || c.Reason != api.SchedulePendingReason || len(r.Result.Status.PlacementStatuses) != 0 ||
		!r.Result.CreationTimestamp.Time.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("re-created placement: %s", mustMarshal(t, r.Result))
	}
}

// TestOwnStatusEventsAreAuditedOnce: the status service's own status changes
// are in the audit log, once each with their payload, though it records them
// when it emits them rather than when they come back off the bus; a status
// event without its mark (from an older build) is recorded when consumed.
func TestOwnStatusEventsAreAuditedOnce(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0)
	ids := story(f)
	f.handled(ids["report-member-2"])

	older := f.event(events.TypePlacementStatusChangedV2, "older-status-1", t0,
		events.PlacementStatusChangedV2{Placement: "web-2-crp", Revision: 1000, Pieces: 1, Generation: 1})
	f.publish(subject(events.StatusSubject("web-2-crp")), older)
	f.handled("older-status-1")

	// Every status event on the bus, by id.
	cons, err := f.JS.OrderedConsumer(t.Context(), bus.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{bus.SubjectsStatus}})
	if err != nil {
		t.Fatal(err)
	}
	onBus := map[string]bool{}
	for {
		m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			break
		}
		ev, err := bus.DecodeJetStream(m)
		if err != nil {
			t.Fatal(err)
		}
		onBus[ev.ID()] = true
	}
	if len(onBus) < 3 || !onBus["older-status-1"] {
		t.Fatalf("%d status events on the bus: %v", len(onBus), onBus)
	}
	poll.Until(t, time.Minute, "every status event in the audit log", func() error {
		rows, err := f.Pool.Query(t.Context(), `select event_id, count(*), bool_and(payload is not null) from audit_log
			where type = $1 group by event_id`, events.TypePlacementStatusChangedV2)
		if err != nil {
			return err
		}
		audited := map[string]bool{}
		for rows.Next() {
			var id string
			var n int
			var payload bool
			if err := rows.Scan(&id, &n, &payload); err != nil {
				return err
			}
			if n != 1 || !payload {
				t.Fatalf("status event %s: %d audit rows, payload %v", id, n, payload)
			}
			audited[id] = true
		}
		for id := range onBus {
			if !audited[id] {
				return fmt.Errorf("status event %s is not in the audit log (%d of %d are)", id, len(audited), len(onBus))
			}
		}
		if len(audited) != len(onBus) {
			return fmt.Errorf("%d status events audited, %d on the bus", len(audited), len(onBus))
		}
		return nil
	})
}
