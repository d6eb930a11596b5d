package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

func mustSubject(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func newEvent(t *testing.T, typ string, payload any) cloudevents.Event {
	t.Helper()
	ev, err := events.New(typ, "/flotilla/test", "test", "", payload)
	if err != nil {
		t.Fatalf("new %s: %v", typ, err)
	}
	return ev
}

// Every type has a route, every route lies inside a stream's subjects, and every
// example travels on the subject its type's first route gives it, which is also the
// subject the producers' subject functions build.
func TestCatalogueRoutesEveryType(t *testing.T) {
	streams := []string{bus.SubjectsPlacement, bus.SubjectsMember, bus.SubjectsHub, bus.SubjectsOverride, bus.SubjectsStagedUpdate, bus.SubjectsDisruption, bus.SubjectsScheduling,
		bus.SubjectsWorkStatus, bus.SubjectsRollout, bus.SubjectsStatus, bus.SubjectsOutbox, bus.SubjectsWork}
	ex := examples()
	for _, typ := range events.Types() {
		routes := events.Routes(typ)
		if len(routes) == 0 {
			t.Errorf("%s has no route: no consumer would ever admit it", typ)
			continue
		}
		for _, r := range routes {
			prefix := r.Pattern[:strings.Index(r.Pattern, "{")]
			if !containsFunc(streams, func(s string) bool { return strings.HasPrefix(prefix, strings.TrimSuffix(s, ">")) }) {
				t.Errorf("%s: route %s is in no stream", typ, r.Pattern)
			}
			if n := strings.Count(r.Pattern, "{"); n != len(r.Fields) {
				t.Errorf("%s: route %s has %d named tokens and %d bound fields", typ, r.Pattern, n, len(r.Fields))
			}
		}
		subject, err := events.SubjectOf(typ, ex[typ])
		if err != nil {
			t.Errorf("subject of the %s example: %v", typ, err)
			continue
		}
		if err := events.Admit(subject, newEvent(t, typ, ex[typ])); err != nil {
			t.Errorf("the %s example is refused on %s: %v", typ, subject, err)
		}
	}

	// The producers' subject functions agree with the catalogue.
	for _, tt := range []struct {
		typ, want string
	}{
		{events.TypePlacementUpserted, mustSubject(events.PlacementSubject("web-2-crp"))},
		{events.TypeMemberJoined, mustSubject(events.MemberSubject("member-1"))},
		{events.TypeMemberHeartbeat, mustSubject(events.HeartbeatSubject("member-1"))},
		{events.TypeHubResourceUpserted, mustSubject(events.HubResourceSubject("", "Namespace", "", "web-2"))},
		{events.TypeHubResourceDeleted, mustSubject(events.HubResourceSubject("", "Namespace", "", "web-2"))},
		{events.TypeOverrideUpserted, mustSubject(events.OverrideSubject(api.OverrideKey{Kind: api.ResourceOverrideKind, Namespace: "web-2", Name: "web-image"}))},
		{events.TypeOverrideDeleted, mustSubject(events.OverrideSubject(api.OverrideKey{Kind: api.ClusterResourceOverrideKind, Name: "web-2-labels"}))},
		{events.TypePlacementScheduledV2, mustSubject(events.SchedulingSubject("web-2-crp"))},
		{events.TypeSnapshotCreated, mustSubject(events.RolloutSubject("web-2-crp"))},
		{events.TypeRolloutProgressedV2, mustSubject(events.RolloutSubject("web-2-crp"))},
		{events.TypeWorkDesired, mustSubject(events.WorkSubject("member-1", "web-2-crp"))},
		{events.TypeWorkTombstoned, mustSubject(events.WorkSubject("member-2", "web-2-crp"))},
		{events.TypeWorkReported, mustSubject(events.WorkStatusSubject("member-2", "web-2-crp"))},
		{events.TypePlacementStatusChangedV2, mustSubject(events.StatusSubject("web-2-crp"))},
		{events.TypeOutboxQuarantined, mustSubject(events.OutboxSubject("web-2-crp"))},
	} {
		if got, err := events.SubjectOf(tt.typ, ex[tt.typ]); err != nil || got != tt.want {
			t.Errorf("SubjectOf(%s) = %q, %v; the producer publishes on %q", tt.typ, got, err, tt.want)
		}
	}
}

func containsFunc(s []string, f func(string) bool) bool {
	for _, v := range s {
		if f(v) {
			return true
		}
	}
	return false
}

// What a worker's credentials let it publish, aimed at someone else, is refused with a
// reason that names the type, the subject and the rule it broke.
func TestCatalogueRefusesForgedEvents(t *testing.T) {
	left := events.MemberLeft{Name: "member-2", LeavePolicy: events.LeaveDelete}
	beat := events.MemberHeartbeat{Name: "member-2", ObservedAt: exampleTime}
	report := func(cluster, placement string) events.WorkReported {
		return events.WorkReported{Cluster: cluster, Placement: placement, ObservedAt: exampleTime}
	}
	hub := func(manifest string) events.HubResourceUpserted {
		return events.HubResourceUpserted{Manifest: json.RawMessage(manifest)}
	}
	deployment := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"shop","name":"web"}}`
	tests := []struct {
		name, typ, subject string
		payload            any
		rule, detail       string
	}{
		{"another member leaves, on mine", events.TypeMemberLeft, "flotilla.member.member-1", left,
			"flotilla.member.{member} with member = name", `the payload's name is "member-2", the subject names "member-1"`},
		{"membership on the heartbeat subject", events.TypeMemberLeft, "flotilla.member.member-2.heartbeat", left,
			"flotilla.member.{member} with member = name", "does not travel on this subject"},
		{"a join on the heartbeat subject", events.TypeMemberJoined, "flotilla.member.member-1.heartbeat",
			events.MemberJoined{Member: api.MemberCluster{ObjectMeta: metav1Name("member-1")}},
			"flotilla.member.{member}", "does not travel on this subject"},
		{"another member's heartbeat", events.TypeMemberHeartbeat, "flotilla.member.member-1.heartbeat", beat,
			"flotilla.member.{member}.heartbeat with member = name", `"member-2"`},
		{"a report in another member's name", events.TypeWorkReported, "flotilla.workstatus.member-1.web", report("member-2", "web"),
			"flotilla.workstatus.{cluster}.{placement} with cluster = cluster, placement = placement", `the payload's cluster is "member-2"`},
		{"a report about another placement", events.TypeWorkReported, "flotilla.workstatus.member-1.web", report("member-1", "shop"),
			"placement = placement", `the payload's placement is "shop", the subject names "web"`},
		{"a placement deleted through work status", events.TypePlacementDeleted, "flotilla.workstatus.member-1.web",
			events.PlacementDeleted{Name: "web"}, "flotilla.placement.{placement}", "does not travel on this subject"},
		{"desired state through work status", events.TypeWorkDesired, "flotilla.workstatus.member-1.web",
			events.WorkDesired{Cluster: "member-1", Placement: "web"}, "flotilla.work.{cluster}.{placement}", "does not travel"},
		{"desired state for another cluster", events.TypeWorkDesired, "flotilla.work.member-1.web",
			events.WorkDesired{Cluster: "member-2", Placement: "web"}, "cluster = cluster", `"member-2"`},
		{"a hub object under another's name", events.TypeHubResourceUpserted, "flotilla.hub.apps.Deployment.shop.api", hub(deployment),
			"metadata.name", `the payload's metadata.name is "web", the subject names "api"`},
		{"a hub object under another kind", events.TypeHubResourceUpserted, "flotilla.hub.apps.StatefulSet.shop.web", hub(deployment),
			"kind", `"Deployment"`},
		{"a hub object in another namespace", events.TypeHubResourceUpserted, "flotilla.hub.apps.Deployment.-.web", hub(deployment),
			"metadata.namespace", `"shop"`},
		{"a hub deletion of another object", events.TypeHubResourceDeleted, "flotilla.hub.core.ConfigMap.shop.web",
			events.HubResourceDeleted{Resource: api.ResourceIdentifier{Version: "v1", Kind: "Secret", Namespace: "shop", Name: "web"}},
			"kind", `"Secret"`},
		{"a status for another placement", events.TypePlacementStatusChangedV2, "flotilla.status.web",
			events.PlacementStatusChangedV2{Placement: "shop", Revision: 1, Pieces: 1}, "placement = placement", `"shop"`},
		{"a decision on the rollout subject", events.TypePlacementScheduledV2, "flotilla.rollout.web",
			events.PlacementScheduledV2{Placement: "web", Revision: 1, Base: true, Pieces: 1}, "flotilla.scheduling.{placement}", "does not travel"},
		{"a notice naming no placement, on a placement's subject", events.TypeOutboxQuarantined, "flotilla.outbox.web",
			events.OutboxQuarantined{EventID: "e", Type: "t", Subject: "s", Reason: "r"}, "placement = placement", `the payload's placement is "-"`},
		{"a name with a dot, spelt as two tokens", events.TypeMemberLeft, "flotilla.member.eu.west",
			events.MemberLeft{Name: "eu.west"}, "flotilla.member.{member}", "does not travel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := events.Admit(tt.subject, newEvent(t, tt.typ, tt.payload))
			if !errors.Is(err, events.ErrWrongSubject) {
				t.Fatalf("Admit = %v, want ErrWrongSubject", err)
			}
			for _, want := range []string{tt.typ, tt.subject, tt.rule, tt.detail} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("reason %q does not say %q", err, want)
				}
			}
			if err := events.CheckSubject(tt.subject, newEvent(t, tt.typ, tt.payload)); !errors.Is(err, events.ErrWrongSubject) {
				t.Errorf("CheckSubject = %v, want ErrWrongSubject", err)
			}
		})
	}
}

func metav1Name(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

// What belongs where it travels is admitted, names with dots and empty names included.
func TestCatalogueAdmitsWhatBelongs(t *testing.T) {
	tests := []struct {
		name, typ, subject string
		payload            any
	}{
		{"own heartbeat", events.TypeMemberHeartbeat, "flotilla.member.eu_west.heartbeat",
			events.MemberHeartbeat{Name: "eu.west", ObservedAt: exampleTime}},
		{"a heartbeat on the subject heartbeats had before", events.TypeMemberHeartbeat, "flotilla.member.eu_west",
			events.MemberHeartbeat{Name: "eu.west", ObservedAt: exampleTime}},
		{"own report", events.TypeWorkReported, "flotilla.workstatus.member-1.web_v2",
			events.WorkReported{Cluster: "member-1", Placement: "web.v2", ObservedAt: exampleTime}},
		{"the operator's leave", events.TypeMemberLeft, "flotilla.member.member-2", events.MemberLeft{Name: "member-2"}},
		{"a cluster-scoped core object", events.TypeHubResourceUpserted, "flotilla.hub.core.Namespace.-.web",
			events.HubResourceUpserted{Manifest: json.RawMessage(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"web"}}`)}},
		{"a group with dots", events.TypeHubResourceDeleted, "flotilla.hub.networking_k8s_io.Ingress.shop.web",
			events.HubResourceDeleted{Resource: api.ResourceIdentifier{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress", Namespace: "shop", Name: "web"}}},
		{"a notice naming no placement", events.TypeOutboxQuarantined, "flotilla.outbox.-",
			events.OutboxQuarantined{EventID: "e", Type: "t", Subject: "flotilla.member.m", Reason: "r"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := events.Admit(tt.subject, newEvent(t, tt.typ, tt.payload)); err != nil {
				t.Errorf("Admit: %v", err)
			}
		})
	}
}

// The status service's check lets through what it only records: types this build does
// not know, and payloads that do not decode (neither is folded); a known type on the
// wrong subject is refused all the same.
func TestCheckSubjectKeepsTheAuditLogWhole(t *testing.T) {
	unknown := newEvent(t, events.TypePlacementDeleted, events.PlacementDeleted{Name: "web"})
	unknown.SetType("io.flotilla.placement.exploded.v1")
	if err := events.CheckSubject("flotilla.workstatus.member-1.web", unknown); err != nil {
		t.Errorf("an unknown type: %v", err)
	}
	if err := events.Admit("flotilla.placement.web", unknown); !errors.Is(err, events.ErrUnknownType) {
		t.Errorf("Admit of an unknown type = %v, want ErrUnknownType", err)
	}
	broken := newEvent(t, events.TypePlacementDeleted, events.PlacementDeleted{Name: "web"})
	if err := broken.SetData("application/json", map[string]string{"colour": "red"}); err != nil {
		t.Fatal(err)
	}
	if err := events.CheckSubject("flotilla.placement.web", broken); err != nil {
		t.Errorf("an invalid payload on its type's subject: %v", err)
	}
	if err := events.CheckSubject("flotilla.member.member-1", broken); !errors.Is(err, events.ErrWrongSubject) {
		t.Errorf("an invalid payload on another type's subject = %v, want ErrWrongSubject", err)
	}
}

// A hub object stored as a blob is checked once its reader has fetched it.
func TestCheckHubManifest(t *testing.T) {
	m := []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"namespace":"shop","name":"web"}}`)
	if err := events.CheckHubManifest("flotilla.hub.apps.Deployment.shop.web", m); err != nil {
		t.Errorf("its own subject: %v", err)
	}
	for _, s := range []string{"flotilla.hub.apps.Deployment.shop.api", "flotilla.hub.core.Deployment.shop.web", "flotilla.placement.web"} {
		if err := events.CheckHubManifest(s, m); !errors.Is(err, events.ErrWrongSubject) {
			t.Errorf("on %s: %v, want ErrWrongSubject", s, err)
		}
	}
	ref := events.HubResourceUpserted{ManifestRef: &bus.BlobRef{Prefix: bus.SubjectHubBlobPrefix, Digest: strings.Repeat("ab", 32), Size: 10, Chunks: 1}}
	if err := events.Admit("flotilla.hub.apps.Deployment.shop.web", newEvent(t, events.TypeHubResourceUpserted, ref)); err != nil {
		t.Errorf("a blob reference on a hub subject: %v", err)
	}
	if _, err := events.SubjectOf(events.TypeHubResourceUpserted, ref); err == nil {
		t.Error("SubjectOf made a subject for an object it cannot see")
	}
}
