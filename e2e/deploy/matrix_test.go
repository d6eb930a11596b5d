package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// TestPermissionMatrix takes each member's apply-worker credentials, generated as the deploy
// generates them, to a running hub (the scheduler, rollout and status services on NATS
// configured from the rendered overlay, with a real PostgreSQL) and tries every event type on
// every subject the member can reach and on every inbox, aimed at the other member, the
// placements and the hub store. NATS must refuse every subject but the member's own; on its own
// subjects every consumer must refuse what names anyone else, dead-lettering it with its
// reason. Afterwards nothing has changed: not a row of the hub's database, not what the status
// service says about members and placements, not a message on any subject the member may not
// publish on. The member may not subscribe to any inbox but its own.
func TestPermissionMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the hub services on a real NATS server and PostgreSQL")
	}
	h := startHub(t)
	if len(h.members) < 2 {
		t.Fatalf("members %v: the matrix needs two", h.members)
	}
	h.populate(t)
	before := h.world(t)

	var tried []attempt
	for _, m := range h.members {
		victim := h.members[0]
		if victim == m {
			victim = h.members[1]
		}
		nc := h.memberConn(t, m)
		checkInboxes(t, nc, m, victim)
		tried = append(tried, tryAll(t, nc, m, victim)...)
	}
	h.settle(t)

	// Every consumer dead-lettered every forgery stored on its subjects, with its reason.
	letters := h.deadLetters(t)
	stored, deadLettered := 0, 0
	for _, a := range tried {
		if a.refused || !inEvents(a.subject) {
			continue
		}
		stored++
		if a.admitted {
			continue
		}
		for _, c := range consumersOf(a.subject) {
			dl, ok := letters[c][a.id]
			if !ok {
				t.Errorf("%s: %s (%s) on %s was not dead-lettered by %s", a.member, a.typ, a.variant, a.subject, c)
				continue
			}
			deadLettered++
			reason := dl.Get(bus.HeaderDeadLetterReason)
			if !strings.Contains(reason, a.typ) || !strings.Contains(reason, a.subject) || !strings.Contains(reason, "breaks the rule") {
				t.Errorf("%s dead-lettered %s on %s with reason %q: want the type, the subject and the rule", c, a.typ, a.subject, reason)
			}
		}
	}

	var admitted []string
	for _, a := range tried {
		if a.admitted {
			admitted = append(admitted, a.id)
		}
	}
	after := h.world(t, admitted...)
	for table, rows := range after.tables {
		if before.tables[table] != rows {
			t.Errorf("table %s changed:\nbefore %s\nafter  %s", table, before.tables[table], rows)
		}
	}
	if before.members != after.members {
		t.Errorf("the members changed:\nbefore %s\nafter  %s", before.members, after.members)
	}
	if before.placements != after.placements {
		t.Errorf("the placements changed:\nbefore %s\nafter  %s", before.placements, after.placements)
	}
	// New messages only where a member may publish (its own subjects), and the consumers'
	// dead letters.
	for _, k := range changedSubjects(before, after) {
		stream, subject, _ := strings.Cut(k, " ")
		own := slices.ContainsFunc(h.members, func(m string) bool {
			return slices.Contains(reachable(m, "-"), subject) ||
				strings.HasPrefix(subject, "flotilla.workstatus."+token(m)+".")
		})
		hub := slices.Contains([]string{bus.DeadLetterSubject(bus.ConsumerScheduler), bus.DeadLetterSubject(bus.ConsumerRollout),
			bus.DeadLetterSubject(bus.ConsumerStatus)}, subject)
		if !own && !hub {
			t.Errorf("%s on %s: %d messages before, %d after", stream, subject, before.subjects[k], after.subjects[k])
		}
	}

	subjects := map[string]bool{}
	for _, a := range tried {
		subjects[a.member+" "+a.subject] = true
	}
	perMember := len(subjects) / len(h.members)
	types := len(events.Types())
	t.Logf("permission matrix: %d types x %d subjects and inboxes x %d members = %d combinations, "+
		"%d attempts with the self-naming payloads; NATS refused %d, stored %d on the members' own event subjects, "+
		"of which the consumers dead-lettered all but %d (%d dead letters); %d landed on the members' own dead-letter subjects",
		types, perMember, len(h.members), types*perMember*len(h.members), len(tried), count(tried, func(a attempt) bool { return a.refused }),
		stored, count(tried, func(a attempt) bool { return a.admitted }), deadLettered,
		count(tried, func(a attempt) bool { return !a.refused && !inEvents(a.subject) }))
}

// attempt is one forged publish and what became of it.
type attempt struct {
	member, typ, variant, subject, id string
	refused                           bool // NATS refused it: a permissions violation
	admitted                          bool // stored, and the catalogue lets it through
}

func count(as []attempt, f func(attempt) bool) int {
	n := 0
	for _, a := range as {
		if f(a) {
			n++
		}
	}
	return n
}

func token(name string) string { return strings.ReplaceAll(name, ".", "_") }

// reachable are the subjects member's worker publishes on: its heartbeats, its reports on each
// placement, its dead letters. placement "-" stands for none.
func reachable(member, placement string) []string {
	out := []string{must(events.HeartbeatSubject(member)), bus.DeadLetterSubject(bus.ApplyUserPrefix + token(member))}
	if placement != "-" {
		out = append(out, must(events.WorkStatusSubject(member, placement)))
	}
	return out
}

// subjectsFor are the subjects member tries: those it may publish on (its reports on a
// placement it has and on one it has not), and those it may not: its own membership, the other
// member's subjects, every hub subject, and every inbox but its own.
func subjectsFor(member, victim string) (own, others []string) {
	own = append(reachable(member, sharedPlacement), must(events.WorkStatusSubject(member, onlyOn(victim))))
	others = []string{
		must(events.MemberSubject(member)),
		must(events.MemberSubject(victim)),
		must(events.HeartbeatSubject(victim)),
		must(events.WorkStatusSubject(victim, sharedPlacement)),
		must(events.WorkSubject(member, sharedPlacement)),
		must(events.WorkSubject(victim, sharedPlacement)),
		must(events.PlacementSubject(sharedPlacement)),
		must(events.HubResourceSubject("", "Namespace", "", sharedPlacement)),
		must(events.SchedulingSubject(sharedPlacement)),
		must(events.RolloutSubject(sharedPlacement)),
		must(events.StatusSubject(sharedPlacement)),
		must(events.OutboxSubject(sharedPlacement)),
		must(events.StagedUpdateSubject(events.StagedUpdateKey{Kind: api.ClusterApprovalRequestKind, Name: "run-before-production"})),
		must(events.DisruptionSubject(events.DisruptionKey{Kind: api.ClusterResourcePlacementEvictionKind, Name: "test-eviction"})),
		bus.DeadLetterSubject(bus.ApplyUserPrefix + token(victim)),
		bus.DeadLetterSubject(bus.ConsumerScheduler),
		// Inboxes: a reply forged into another's request.
		must(bus.MemberInboxPrefix(victim)) + ".forged",
		bus.InboxRoot + ".scheduler.forged",
		bus.InboxRoot + ".rollout.forged",
		bus.InboxRoot + ".status.forged",
		bus.InboxRoot + ".fleetctl.forged",
		bus.InboxRoot + ".Mi6Tq0RcGzOhI4fVgZk2pQ.forged", // a default inbox
	}
	return own, others
}

// forgery is a payload of one type aimed at someone: victim names the other member, a
// placement or the hub store; self names the attacking member where the type names a member,
// in a way its own credentials must not allow (its own membership, work for itself, a report
// on a placement it does not have).
type forgery struct {
	variant string
	payload any
}

func forgeries(typ, attacker, victim string) []forgery {
	now := time.Now().UTC()
	stolen := onlyOn(victim)
	evil := []json.RawMessage{namespaceManifest("evil", nil)}
	crp := placement(stolen, attacker)
	byType := map[string][]forgery{
		events.TypePlacementUpserted: {{"victim", events.PlacementUpserted{Placement: crp}}},
		events.TypePlacementDeleted:  {{"victim", events.PlacementDeleted{Name: sharedPlacement}}},
		events.TypeMemberJoined: {
			{"victim", events.MemberJoined{Member: memberCluster(victim, map[string]string{"forged": "yes"})}},
			{"self", events.MemberJoined{Member: memberCluster(attacker, map[string]string{"forged": "yes"})}}},
		events.TypeMemberUpdated: {
			{"victim", events.MemberUpdated{Member: memberCluster(victim, map[string]string{"forged": "yes"})}},
			{"self", events.MemberUpdated{Member: memberCluster(attacker, map[string]string{"forged": "yes"})}}},
		events.TypeMemberLeft: {
			{"victim", events.MemberLeft{Name: victim, LeavePolicy: events.LeaveDelete}},
			{"self", events.MemberLeft{Name: attacker, LeavePolicy: events.LeaveDelete}}},
		events.TypeMemberHeartbeat: {{"victim", events.MemberHeartbeat{Name: victim, Healthy: false, Message: "forged", ObservedAt: now}}},
		events.TypeHubResourceUpserted: {{"victim", events.HubResourceUpserted{
			Manifest: namespaceManifest(sharedPlacement, map[string]string{"forged": "yes"})}}},
		events.TypeHubResourceDeleted: {{"victim", events.HubResourceDeleted{
			Resource: api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: sharedPlacement}}}},
		events.TypePlacementScheduled: {{"victim", events.PlacementScheduled{Placement: stolen, Generation: 1,
			PlacementType: api.PickFixedPlacementType, Wanted: 1, Fulfilled: true,
			Chosen: []events.ClusterDecision{{Cluster: attacker, Action: events.ActionAdded}}}}},
		events.TypePlacementScheduledV2: {{"victim", events.PlacementScheduledV2{Placement: stolen, Revision: 1000, Base: true, Pieces: 1,
			Generation: 1, PlacementType: api.PickFixedPlacementType, Wanted: 1, ChosenCount: 1, Fulfilled: true,
			Clusters: []events.ClusterDecision{{Cluster: attacker, Action: events.ActionAdded}}}}},
		events.TypeSnapshotCreated: {{"victim", events.SnapshotCreated{Placement: sharedPlacement, Index: 99, Hash: "sha256:forged"}}},
		events.TypeWorkDesired: {
			{"victim", events.WorkDesired{Cluster: victim, Placement: sharedPlacement, ResourceIndex: 99, Generation: 99, Manifests: evil}},
			{"self", events.WorkDesired{Cluster: attacker, Placement: stolen, ResourceIndex: 99, Generation: 99, Manifests: evil}}},
		events.TypeWorkTombstoned: {
			{"victim", events.WorkTombstoned{Cluster: victim, Placement: sharedPlacement, Reason: "forged"}},
			{"self", events.WorkTombstoned{Cluster: attacker, Placement: sharedPlacement, Reason: "forged"}}},
		events.TypeRolloutProgressed: {{"victim", events.RolloutProgressed{Placement: sharedPlacement, Generation: 99, ResourceIndex: 99}}},
		events.TypeRolloutProgressedV2: {{"victim", events.RolloutProgressedV2{Placement: sharedPlacement, Revision: 1000, Base: true,
			Pieces: 1, Generation: 99, ResourceIndex: 99}}},
		events.TypeWorkReported: {
			{"victim", events.WorkReported{Cluster: victim, Placement: sharedPlacement, ResourceIndex: 99, Generation: 99,
				Applied: events.Condition{Status: "False", Reason: "Forged"}, Available: events.Condition{Status: "False", Reason: "Forged"}, ObservedAt: now}},
			{"self", events.WorkReported{Cluster: attacker, Placement: stolen, ResourceIndex: 1, Generation: 1,
				Applied: events.Condition{Status: "True", Reason: "Applied"}, Available: events.Condition{Status: "True", Reason: api.AvailableReason}, ObservedAt: now}}},
		// Overrides are the operator's, like placements: forged as published.
		events.TypeOverrideUpserted: {{"victim", goldenPayload("override.upserted.v1")}},
		events.TypeOverrideDeleted:  {{"victim", goldenPayload("override.deleted.v1")}},
		// Staged update runs and their approvals are the operator's too.
		events.TypeStagedUpdateUpserted:    {{"victim", goldenPayload("stagedupdate.upserted.v1")}},
		events.TypeStagedUpdateDeleted:     {{"victim", goldenPayload("stagedupdate.deleted.v1")}},
		events.TypeApprovalRequestApproved: {{"victim", goldenPayload("approvalrequest.approved.v1")}},
		// Evictions and disruption budgets are the operator's too.
		events.TypeDisruptionUpserted: {{"victim", goldenPayload("disruption.upserted.v1")}},
		events.TypeDisruptionDeleted:  {{"victim", goldenPayload("disruption.deleted.v1")}},
		events.TypeWorkRemoved: {
			{"victim", events.WorkRemoved{Cluster: victim, Placement: sharedPlacement, TombstoneSequence: 1, RemovedAt: now}},
			{"self", events.WorkRemoved{Cluster: attacker, Placement: sharedPlacement, TombstoneSequence: 1, RemovedAt: now}}},
		events.TypeTakeoversDecided: {
			{"victim", events.TakeoversDecided{Cluster: victim, Placement: sharedPlacement, ResourceIndex: 99, Generation: 99,
				Takeovers: []events.TakeoverDecision{{Resource: api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: sharedPlacement},
					Mode: api.WhenToTakeOverTypeAlways, Outcome: "TakenOver", DecidedAt: now}}}},
			{"self", events.TakeoversDecided{Cluster: attacker, Placement: stolen, ResourceIndex: 1, Generation: 1,
				Takeovers: []events.TakeoverDecision{{Resource: api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "evil"},
					Mode: api.WhenToTakeOverTypeAlways, Outcome: "TakenOver", DecidedAt: now}}}}},
		events.TypePlacementStatusChanged:   {{"victim", events.PlacementStatusChanged{Placement: placement(sharedPlacement)}}},
		events.TypePlacementStatusChangedV2: {{"victim", events.PlacementStatusChangedV2{Placement: sharedPlacement, Revision: 1000, Pieces: 1}}},
		events.TypeOutboxQuarantined: {{"victim", events.OutboxQuarantined{EventID: "forged", Type: events.TypeWorkDesired,
			Subject: must(events.WorkSubject(victim, sharedPlacement)), Placement: sharedPlacement, Cluster: victim,
			Reason: "forged", QuarantinedAt: now}}},
	}
	return byType[typ]
}

// goldenPayload is the example payload of an event type, as events/testdata holds it.
func goldenPayload(name string) json.RawMessage {
	b, err := os.ReadFile(filepath.Join("..", "..", "events", "testdata", "payloads", name+".json"))
	if err != nil {
		panic(err)
	}
	return b
}

// tryAll publishes every forgery of every type on every subject member tries, with core NATS
// (so a refusal cannot hang a publish waiting for its acknowledgement), and records whether
// NATS refused each.
func tryAll(t *testing.T, nc *nats.Conn, member, victim string) []attempt {
	t.Helper()
	own, others := subjectsFor(member, victim)
	var out []attempt
	for _, subject := range slices.Concat(own, others) {
		for _, typ := range events.Types() {
			fs := forgeries(typ, member, victim)
			if len(fs) == 0 {
				t.Fatalf("no forgery of %s", typ)
			}
			for _, f := range fs {
				a := attempt{member: member, typ: typ, variant: f.variant, subject: subject,
					id: events.ID("matrix", member, typ, f.variant, subject)}
				ev, err := events.New(typ, "/flotilla/apply/"+member, subject, a.id, f.payload)
				if err != nil {
					t.Fatalf("forge %s (%s): %v", typ, f.variant, err)
				}
				msg, err := bus.Encode(ev, subject)
				if err != nil {
					t.Fatal(err)
				}
				msg.Header.Set(jetstream.MsgIDHeader, a.id)
				if err := nc.PublishMsg(msg); err != nil {
					t.Fatal(err)
				}
				if err := nc.Flush(); err != nil {
					t.Fatal(err)
				}
				a.refused = violated(nc, "Publish to", subject)
				if want := !slices.Contains(own, subject); a.refused != want {
					t.Errorf("%s publishing %s on %s: refused %v, want %v", member, typ, subject, a.refused, want)
				}
				// On its own subjects, the catalogue is what stops it: it admits only a
				// report (or takeover decisions) in the member's own name, on a placement
				// it does not have, which the services must then ignore.
				if !a.refused && inEvents(subject) {
					a.admitted = events.Admit(subject, ev) == nil
					ownReport := typ == events.TypeWorkReported || typ == events.TypeTakeoversDecided
					if a.admitted && (!ownReport || f.variant != "self") {
						t.Errorf("%s: the catalogue admits %s (%s) on %s", member, typ, f.variant, subject)
					}
				}
				out = append(out, a)
			}
		}
	}
	return out
}

// violated reports whether the server's last permissions violation on nc is about subject:
// the client records it before a Flush sent after the publish returns.
func violated(nc *nats.Conn, kind, subject string) bool {
	err := nc.LastError()
	return err != nil && strings.Contains(err.Error(), fmt.Sprintf("%s %q", kind, subject))
}

// checkInboxes checks that member may subscribe to its own inbox and to no one else's.
func checkInboxes(t *testing.T, nc *nats.Conn, member, victim string) {
	t.Helper()
	own := must(bus.MemberInboxPrefix(member)) + ".>"
	others := []string{
		bus.InboxRoot + ".>", bus.InboxRoot + ".*", bus.InboxRoot + ".*.>",
		must(bus.MemberInboxPrefix(victim)) + ".>",
		bus.InboxRoot + ".apply.>",
		bus.InboxRoot + ".scheduler.>", bus.InboxRoot + ".rollout.>", bus.InboxRoot + ".status.>",
		bus.InboxRoot + ".fleetctl.>", bus.InboxRoot + ".standalone.>",
		bus.InboxRoot + ".Mi6Tq0RcGzOhI4fVgZk2pQ.>", // a default inbox
	}
	for _, subj := range append([]string{own}, others...) {
		sub, err := nc.SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		refused := violated(nc, "Subscription to", subj)
		if want := subj != own; refused != want {
			t.Errorf("%s subscribing to %s: refused %v, want %v", member, subj, refused, want)
		}
		_ = sub.Unsubscribe()
	}
}
