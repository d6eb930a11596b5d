package status_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/postgres"
)

// A Secret published to the hub store, and a report in which a member's worker did not
// redact a Secret's differences, leave no Secret value in any table or view: the audit log
// and the report history hold (redacted) in their place.
func TestSecretValuesAreNotRecorded(t *testing.T) {
	f := newFixture(t)
	f.startStatus(t0)
	const value = "status-test-s3cret"
	b64 := base64.StdEncoding.EncodeToString([]byte(value))

	secret := fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"app"},
		"data":{"password":%q},"stringData":{"token":%q}}`, b64, value)
	hub := f.event(events.TypeHubResourceUpserted, "hub-secret", t0, events.HubResourceUpserted{Manifest: json.RawMessage(secret)})
	f.publish(subject(events.HubResourceSubject("", "Secret", "app", "db")), hub)

	// The placement chose member-1, so that its report is one the status takes.
	scheduled := f.event(events.TypePlacementScheduledV2, "decision", t0, decision("web", 1, 1,
		events.ClusterDecision{Cluster: "member-1", Action: events.ActionAdded}))
	f.publish(subject(events.SchedulingSubject("web")), scheduled)
	f.handled(scheduled.ID())

	id := api.ResourceIdentifier{Version: "v1", Kind: "Secret", Namespace: "app", Name: "db"}
	leak := []api.PatchDetail{{Path: "/data/password", ValueInHub: b64, ValueInMember: value}}
	first := t0.Add(-time.Minute)
	report := f.event(events.TypeWorkReported, "report-secret", t0.Add(time.Second), events.WorkReported{
		Cluster: "member-1", Placement: "web", Generation: 1, ObservedAt: t0.Add(time.Second),
		Manifests: []events.ManifestResult{{Resource: id, Drifts: leak, FirstDriftedAt: &first, Diffs: leak,
			Applied: events.Condition{Status: "True", Reason: "Applied"}, Available: events.Condition{Status: "True", Reason: "Available"}}},
		Takeovers: []events.TakeoverDecision{{Resource: id, Mode: api.WhenToTakeOverTypeIfNoDiff, Outcome: api.ManifestFailedToTakeOverReason,
			Diffs: leak, DecidedAt: t0}},
		Applied:   events.Condition{Status: "True", Reason: api.ApplySucceededReason},
		Available: events.Condition{Status: "True", Reason: api.AvailableReason},
	})
	f.publish(subject(events.WorkStatusSubject("member-1", "web")), report)
	f.handled(hub.ID())
	f.handled(report.ID())

	relations, found, err := postgres.Search(t.Context(), f.Pool, value, b64)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range found {
		t.Errorf("a Secret value is stored: %s", x)
	}
	t.Logf("read %d tables and views", len(relations))
	var audited, drifts, refusals int
	if err := f.Pool.QueryRow(t.Context(), `select
			(select count(*) from audit_log where event_id in ($1, $2) and payload::text like '%(redacted)%'),
			(select count(*) from drift_reports where drifts::text like '%(redacted)%'),
			(select count(*) from takeover_refusals where value_in_hub = '(redacted)')`,
		hub.ID(), report.ID()).Scan(&audited, &drifts, &refusals); err != nil {
		t.Fatal(err)
	}
	if audited != 2 || drifts != 1 || refusals != 1 {
		t.Errorf("audited %d events, %d drift reports, %d refusals with (redacted) values: want 2, 1 and 1", audited, drifts, refusals)
	}
}
