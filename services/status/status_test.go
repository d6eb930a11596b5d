package status_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/golden"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// story publishes seed 000's first step as the services would: the members
// join, web-2-crp (whenToTakeOver Never) is placed on both, a snapshot of the
// web-2 namespace is rolled out, member-1 applies it and member-2, which
// already has a web-2 namespace of its own, refuses to take it over. It
// returns the events in the order published.
func story(f *fixture) map[string]string {
	ids := map[string]string{}
	// One event at a time: each is folded on its own, so that the status
	// changes and transitions are those of each event in turn (a burst is
	// folded once per batch; see TestBurstFoldsOncePerBatch).
	pub := func(key, typ, subj string, at time.Time, payload any) {
		ev := f.event(typ, "story-"+key, at, payload)
		ids[key] = ev.ID()
		f.publish(subj, ev)
		f.handled(ev.ID())
	}
	for i, m := range []string{"member-1", "member-2"} {
		pub("join-"+m, events.TypeMemberJoined, subject(events.MemberSubject(m)), t0.Add(time.Duration(i)*time.Second),
			events.MemberJoined{Member: memberCluster(m)})
	}
	pub("heartbeat-member-1", events.TypeMemberHeartbeat, subject(events.MemberSubject("member-1")), t0.Add(5*time.Second),
		events.MemberHeartbeat{Name: "member-1", Healthy: true, ObservedAt: t0.Add(5 * time.Second),
			Properties: map[api.PropertyName]api.PropertyValue{
				api.NodeCountProperty:      {Value: "3", ObservationTime: metav1.NewTime(t0.Add(5 * time.Second))},
				api.AllocatableCPUProperty: {Value: "11500m", ObservationTime: metav1.NewTime(t0.Add(5 * time.Second))},
			}})

	pub("placement", events.TypePlacementUpserted, subject(events.PlacementSubject("web-2-crp")), t0.Add(10*time.Second),
		events.PlacementUpserted{Placement: webPlacement(api.WhenToTakeOverTypeNever)})
	pub("scheduled", events.TypePlacementScheduledV2, subject(events.SchedulingSubject("web-2-crp")), t0.Add(11*time.Second),
		decision("web-2-crp", 1, 1,
			events.ClusterDecision{Cluster: "member-1", Action: events.ActionAdded},
			events.ClusterDecision{Cluster: "member-2", Action: events.ActionAdded}))
	ns := api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web-2"}
	pub("snapshot", events.TypeSnapshotCreated, subject(events.RolloutSubject("web-2-crp")), t0.Add(12*time.Second),
		events.SnapshotCreated{Placement: "web-2-crp", Index: 0, Hash: "sha256:3b1f", SelectedResources: []api.ResourceIdentifier{ns}})
	pub("rollout", events.TypeRolloutProgressedV2, subject(events.RolloutSubject("web-2-crp")), t0.Add(13*time.Second),
		progress("web-2-crp", 1, 1, 0, events.ClusterProgress{Cluster: "member-1", Started: true}, events.ClusterProgress{Cluster: "member-2", Started: true}))

	applied := t0.Add(20 * time.Second)
	pub("report-member-1", events.TypeWorkReported, subject(events.WorkStatusSubject("member-1", "web-2-crp")), applied,
		events.WorkReported{Cluster: "member-1", Placement: "web-2-crp", Generation: 1, ObservedAt: applied,
			Manifests: []events.ManifestResult{{Resource: ns, ObservedGeneration: 0,
				Applied: events.Condition{Status: "True", Reason: "Applied"}, Available: events.Condition{Status: "True", Reason: api.ManifestAvailableReason}}},
			Applied:   events.Condition{Status: "True", Reason: api.ApplySucceededReason},
			Available: events.Condition{Status: "True", Reason: api.AvailableReason}})
	refused := t0.Add(21 * time.Second)
	report := events.WorkReported{Cluster: "member-2", Placement: "web-2-crp", Generation: 1, ObservedAt: refused,
		Manifests: []events.ManifestResult{{Resource: ns,
			Applied: events.Condition{Status: "False", Reason: api.ManifestNotTakenOverReason,
				Message: api.ManifestApplyFailedMessage(api.NotTakenOverError)},
			Available: events.Condition{Status: "Unknown", Reason: api.ManifestNotAvailableYetReason}}},
		Takeovers: []events.TakeoverDecision{{Resource: ns, Mode: api.WhenToTakeOverTypeNever,
			Comparison: api.ComparisonOptionTypePartialComparison, Outcome: api.ManifestNotTakenOverReason, DecidedAt: refused}},
		Applied:   events.Condition{Status: "False", Reason: api.ApplyFailedReason, Message: "1 of 1 manifests failed to apply"},
		Available: events.Condition{Status: "Unknown", Reason: api.AvailableUnknownReason}}
	pub("report-member-2", events.TypeWorkReported, subject(events.WorkStatusSubject("member-2", "web-2-crp")), refused, report)
	return ids
}

func TestStatusFoldsTheStory(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0.Add(time.Minute))
	ids := story(f)
	// The apply worker's report reaches the service a second time.
	reportSubject := subject(events.WorkStatusSubject("member-2", "web-2-crp"))
	f.redeliver(reportSubject, f.event(events.TypeWorkReported, ids["report-member-2"], t0.Add(21*time.Second), mustPayload(t, f, ids["report-member-2"])))
	marker := f.event(events.TypeHubResourceDeleted, "marker", t0.Add(30*time.Second),
		events.HubResourceDeleted{Resource: api.ResourceIdentifier{Version: "v1", Kind: "ConfigMap", Name: "x", Namespace: "y"}})
	f.publish(subject(events.HubResourceSubject("", "ConfigMap", "y", "x")), marker)
	f.handled(marker.ID())

	t.Run("stored status", func(t *testing.T) {
		var raw []byte
		var gen int64
		if err := f.Pool.QueryRow(t.Context(), `select status, observed_generation from placement_status where placement = 'web-2-crp'`).Scan(&raw, &gen); err != nil {
			t.Fatal(err)
		}
		var st api.PlacementStatus
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatal(err)
		}
		if gen != 1 {
			t.Errorf("observed_generation = %d", gen)
		}
		golden.CheckJSON(t, "testdata/web-2-crp.status.json", st)

		// The seed's jq command prints exactly the seed's entry.
		var entries []map[string]any
		b, _ := json.Marshal(st.PlacementStatuses)
		if err := json.Unmarshal(b, &entries); err != nil {
			t.Fatal(err)
		}
		var jq []map[string]any
		for _, e := range entries {
			if e["failedPlacements"] != nil {
				jq = append(jq, map[string]any{"clusterName": e["clusterName"], "failedPlacements": e["failedPlacements"]})
			}
		}
		var want map[string]any
		seed := strings.ReplaceAll(seed000NotTakenOver, `"...`, `"`+t0.Add(21*time.Second).Format(time.RFC3339))
		if err := json.Unmarshal([]byte(seed), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(jq, []map[string]any{want}) {
			got, _ := json.MarshalIndent(jq, "", "    ")
			t.Errorf("jq output:\n%s\nwant the seed's:\n%s", got, seed)
		}
	})

	t.Run("transitions", func(t *testing.T) {
		rows, err := f.Pool.Query(t.Context(), `
			select coalesce(cluster, ''), condition_type, status, reason, at from placement_status_transitions
			where placement = 'web-2-crp' order by id`)
		if err != nil {
			t.Fatal(err)
		}
		type row struct {
			Cluster, Type, Status, Reason string
			At                            time.Time
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, r := range got {
			lines = append(lines, fmt.Sprintf("%s %s %s=%s/%s", r.At.UTC().Format("15:04:05"), r.Cluster, r.Type, r.Status, r.Reason))
		}
		want := []string{
			"12:00:10  ClusterResourcePlacementScheduled=Unknown/SchedulePending",
			"12:00:11  ClusterResourcePlacementScheduled=True/SchedulingPolicyFulfilled",
			"12:00:11  ClusterResourcePlacementRolloutStarted=Unknown/RolloutStartedUnknown",
			"12:00:11 member-1 Scheduled=True/Scheduled",
			"12:00:11 member-1 RolloutStarted=Unknown/RolloutStartedUnknown",
			"12:00:11 member-2 Scheduled=True/Scheduled",
			"12:00:11 member-2 RolloutStarted=Unknown/RolloutStartedUnknown",
			"12:00:13  ClusterResourcePlacementRolloutStarted=True/RolloutStarted",
			"12:00:13  ClusterResourcePlacementOverridden=True/NoOverrideSpecified",
			"12:00:13  ClusterResourcePlacementWorkSynchronized=True/WorkSynchronized",
			"12:00:13  ClusterResourcePlacementApplied=Unknown/ApplyPending",
			"12:00:13 member-1 RolloutStarted=True/RolloutStarted",
			"12:00:13 member-1 Overridden=True/NoOverrideSpecified",
			"12:00:13 member-1 WorkSynchronized=True/WorkSynchronized",
			"12:00:13 member-1 Applied=Unknown/ApplyPending",
			"12:00:13 member-2 RolloutStarted=True/RolloutStarted",
			"12:00:13 member-2 Overridden=True/NoOverrideSpecified",
			"12:00:13 member-2 WorkSynchronized=True/WorkSynchronized",
			"12:00:13 member-2 Applied=Unknown/ApplyPending",
			"12:00:20 member-1 Applied=True/ApplySucceeded",
			"12:00:20 member-1 Available=True/ResourceAvailable",
			"12:00:21  ClusterResourcePlacementApplied=False/ApplyFailed",
			"12:00:21 member-2 Applied=False/ApplyFailed",
		}
		if !slices.Equal(lines, want) {
			t.Errorf("transitions:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
	})

	t.Run("takeover decisions", func(t *testing.T) {
		rows, err := f.Pool.Query(t.Context(), `
			select placement, cluster, api_group, version, kind, namespace, name, mode, comparison, outcome, diff_paths::text, event_id, decided_at
			from takeover_decisions`)
		if err != nil {
			t.Fatal(err)
		}
		type row struct {
			Placement, Cluster, Group, Version, Kind, Namespace, Name, Mode, Comparison, Outcome, Diffs, EventID string
			DecidedAt                                                                                            time.Time
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		if err != nil {
			t.Fatal(err)
		}
		want := []row{{"web-2-crp", "member-2", "", "v1", "Namespace", "", "web-2", "Never", "PartialComparison", "not-taken-over", "[]",
			ids["report-member-2"], t0.Add(21 * time.Second)}}
		for i := range got {
			got[i].DecidedAt = got[i].DecidedAt.UTC()
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("takeover_decisions (the report came twice):\n got %+v\nwant %+v", got, want)
		}
	})

	t.Run("audit log", func(t *testing.T) {
		var total, reports int
		if err := f.Pool.QueryRow(t.Context(), `select count(*), count(*) filter (where event_id = $1) from audit_log where type <> $2`,
			ids["report-member-2"], events.TypePlacementStatusChangedV2).Scan(&total, &reports); err != nil {
			t.Fatal(err)
		}
		// Every story event and the marker, once.
		if reports != 1 || total != len(ids)+1 {
			t.Errorf("audit_log holds %d rows (%d of the redelivered report), want %d (1)", total, reports, len(ids)+1)
		}
		// The status events the service publishes come back to it: audited too.
		poll.Until(t, time.Minute, "status events audited", func() error {
			var audited, enqueued int
			err := f.Pool.QueryRow(t.Context(), `select (select count(*) from audit_log where type = $1), (select count(*) from outbox where type = $1)`,
				events.TypePlacementStatusChangedV2).Scan(&audited, &enqueued)
			if err == nil && audited != enqueued {
				err = fmt.Errorf("%d of %d status events audited", audited, enqueued)
			}
			return err
		})
		var typ, source, subj string
		var payload []byte
		var at time.Time
		if err := f.Pool.QueryRow(t.Context(), `select type, source, subject, time, payload from audit_log where event_id = $1`,
			ids["placement"]).Scan(&typ, &source, &subj, &at, &payload); err != nil {
			t.Fatal(err)
		}
		var p events.PlacementUpserted
		if typ != events.TypePlacementUpserted || source != "/flotilla/test" || !at.Equal(t0.Add(10*time.Second)) ||
			json.Unmarshal(payload, &p) != nil || p.Placement.Name != "web-2-crp" {
			t.Errorf("audit row: %s %s %q %v %s", typ, source, subj, at, payload)
		}
		var applied int
		if err := f.Pool.QueryRow(t.Context(), `select count(*) from apply_results where placement = 'web-2-crp'`).Scan(&applied); err != nil || applied != 2 {
			t.Errorf("apply_results rows = %d (err %v), want one per report", applied, err)
		}
	})

	t.Run("status events", func(t *testing.T) {
		poll.Until(t, time.Minute, "the last status event shows Applied=False", func() error {
			changes := f.statusChanges()
			if len(changes) == 0 {
				return errors.New("no status event yet")
			}
			last := changes[len(changes)-1]
			c := meta.FindStatusCondition(last.Conditions, string(api.ClusterResourcePlacementAppliedConditionType))
			if c == nil || c.Status != metav1.ConditionFalse || last.Generation != 1 || last.ClusterCount != 2 || last.SelectedResourceCount != 1 {
				return fmt.Errorf("last status event: %s", mustMarshal(t, last))
			}
			// It tells what changed: member-2 failed to apply one object.
			if len(last.Clusters) != 1 || last.Clusters[0].Cluster != "member-2" || last.Clusters[0].FailedPlacements != 1 ||
				meta.FindStatusCondition(last.Clusters[0].Conditions, "Applied").Status != metav1.ConditionFalse {
				return fmt.Errorf("last status event's clusters: %s", mustMarshal(t, last.Clusters))
			}
			return nil
		})
		// Revisions count the changes, one piece each here.
		for i, c := range f.statusChanges() {
			if c.Revision != int64(i+1) || c.Pieces != 1 {
				t.Errorf("status change %d is revision %d piece %d of %d", i, c.Revision, c.Piece, c.Pieces)
			}
		}
		var outbox, distinct int
		if err := f.Pool.QueryRow(t.Context(), `select count(*), count(distinct event_id) from outbox where type = $1`,
			events.TypePlacementStatusChangedV2).Scan(&outbox, &distinct); err != nil {
			t.Fatal(err)
		}
		// One per status change: the placement, the decision, the snapshot
		// (selectedResources), the rollout progress and the two reports; the
		// repeated report changes nothing, member events concern no placement.
		if outbox != 6 || distinct != outbox {
			t.Errorf("%d status events enqueued (%d distinct), want 6", outbox, distinct)
		}
	})

	t.Run("queries", func(t *testing.T) {
		get, _ := query[api.ClusterResourcePlacement](f, events.QueryGetPlacement, events.NameQuery{Name: "web-2-crp"})
		if get.Error != "" {
			t.Fatal(get.Error)
		}
		golden.CheckJSON(t, "testdata/web-2-crp.get.json", get.Result)

		list, _ := query[[]api.ClusterResourcePlacement](f, events.QueryListPlacements, events.ListQuery{LabelSelector: "team=web"})
		if len(list.Result) != 1 || !reflect.DeepEqual(list.Result[0], get.Result) {
			t.Errorf("placement.list team=web = %+v", list)
		}
		none, _ := query[[]api.ClusterResourcePlacement](f, events.QueryListPlacements, events.ListQuery{LabelSelector: "team!=web"})
		if none.Error != "" || len(none.Result) != 0 {
			t.Errorf("placement.list team!=web = %+v", none)
		}
		bad, hdr := query[[]api.ClusterResourcePlacement](f, events.QueryListPlacements, events.ListQuery{LabelSelector: "team in (("})
		if bad.Error == "" || hdr.Get("Nats-Service-Error-Code") != "400" {
			t.Errorf("a bad selector: %+v, headers %v", bad, hdr)
		}

		missing, hdr := query[api.ClusterResourcePlacement](f, events.QueryGetPlacement, events.NameQuery{Name: "nope"})
		if !missing.NotFound || missing.Error != `clusterresourceplacement "nope" not found` || hdr.Get("Nats-Service-Error-Code") != "404" {
			t.Errorf("placement.get nope = %+v, headers %v", missing, hdr)
		}

		member, _ := query[api.MemberCluster](f, events.QueryGetMember, events.NameQuery{Name: "member-1"})
		golden.CheckJSON(t, "testdata/member-1.get.json", member.Result)
		members, _ := query[[]api.MemberCluster](f, events.QueryListMembers, events.ListQuery{})
		var names []string
		for _, m := range members.Result {
			names = append(names, m.Name)
		}
		if !slices.Equal(names, []string{"member-1", "member-2"}) {
			t.Errorf("member.list = %v", names)
		}
		if m2 := members.Result[1]; meta.FindStatusCondition(m2.Status.Conditions, "Healthy").Reason != "MemberClusterHeartbeatPending" {
			t.Errorf("member-2 without heartbeats: %+v", m2.Status.Conditions)
		}
		if nm, hdr := query[api.MemberCluster](f, events.QueryGetMember, events.NameQuery{Name: "member-9"}); !nm.NotFound || hdr.Get("Nats-Service-Error-Code") != "404" {
			t.Errorf("member.get member-9 = %+v", nm)
		}

		takeovers, _ := query[[]events.TakeoverRecord](f, events.QueryTakeovers, events.TakeoverQuery{Placement: "web-2-crp"})
		wantTakeover := []events.TakeoverRecord{{Placement: "web-2-crp", Cluster: "member-2", TakeoverDecision: events.TakeoverDecision{
			Resource: api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web-2"}, Mode: api.WhenToTakeOverTypeNever,
			Comparison: api.ComparisonOptionTypePartialComparison, Outcome: api.ManifestNotTakenOverReason, DecidedAt: t0.Add(21 * time.Second)}}}
		for i := range takeovers.Result {
			takeovers.Result[i].DecidedAt = takeovers.Result[i].DecidedAt.UTC()
		}
		if !reflect.DeepEqual(takeovers.Result, wantTakeover) {
			t.Errorf("takeover.list = %+v", takeovers)
		}
		if other, _ := query[[]events.TakeoverRecord](f, events.QueryTakeovers, events.TakeoverQuery{Placement: "other"}); other.Error != "" || len(other.Result) != 0 {
			t.Errorf("takeover.list other = %+v", other)
		}

		history, _ := query[events.PlacementHistory](f, events.QueryHistory, events.NameQuery{Name: "web-2-crp"})
		h := history.Result
		if history.Error != "" || len(h.Snapshots) != 1 || h.Snapshots[0].Hash != "sha256:3b1f" || h.Snapshots[0].Index != 0 ||
			len(h.Snapshots[0].Resources) != 1 || !h.Snapshots[0].CreatedAt.Equal(t0.Add(12*time.Second)) {
			t.Errorf("history snapshots = %+v (%s)", h.Snapshots, history.Error)
		}
		if len(h.Status) != 23 || h.Status[len(h.Status)-1] != (events.ConditionRecord{Cluster: "member-2", Type: "Applied", Status: "False",
			Reason: api.ApplyFailedReason, Message: "1 of 1 manifests failed to apply", At: h.Status[len(h.Status)-1].At}) {
			t.Errorf("history transitions: %d, last %+v", len(h.Status), h.Status[len(h.Status)-1])
		}
		if h.Decisions == nil {
			t.Error("history decisions is null, want a list")
		}
		if nh, _ := query[events.PlacementHistory](f, events.QueryHistory, events.NameQuery{Name: "nope"}); !nh.NotFound {
			t.Errorf("history of nope = %+v", nh)
		}
		if noName, hdr := query[api.ClusterResourcePlacement](f, events.QueryGetPlacement, events.NameQuery{}); noName.Error == "" || hdr.Get("Nats-Service-Error-Code") != "400" {
			t.Errorf("placement.get without a name = %+v", noName)
		}
	})
}

// mustPayload reads back the payload of a published event from the audit log.
func mustPayload(t *testing.T, f *fixture, id string) json.RawMessage {
	t.Helper()
	f.handled(id)
	var raw []byte
	if err := f.Pool.QueryRow(t.Context(), `select payload from audit_log where event_id = $1`, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	return raw
}

// seed000NotTakenOver is the entry seed 000 shows for the Never step.
const seed000NotTakenOver = `{
    "clusterName": "member-2",
    "failedPlacements": [
        {
            "condition": {
                "lastTransitionTime": "...",
                "message": "Failed to apply the manifest (error: no ownership of the object in the member cluster; takeover is needed)",
                "reason": "NotTakenOver",
                "status": "False",
                "type": "Applied"
            },
            "kind": "Namespace",
            "name": "web-2",
            "version": "v1"
        }
    ]
}`
