package events

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// Subjects. Each name becomes one subject token (Kubernetes names may contain
// dots; see bus.SubjectToken), so that permissions can be scoped to a cluster:
// an apply worker for cluster c publishes on flotilla.workstatus.c.> and
// flotilla.member.c.heartbeat only. Which event types travel on which subject,
// naming what, is the catalogue's to say (catalogue.go). A name that cannot be a token (empty, or with
// '*', '>', '_' or whitespace) is an error.

// PlacementSubject carries placement input events: flotilla.placement.<placement>.
func PlacementSubject(placement string) (string, error) {
	return subject("flotilla.placement", placement)
}

// MemberSubject carries member input events (joined, updated, left):
// flotilla.member.<cluster>. They are the operator's to publish, never a worker's.
func MemberSubject(cluster string) (string, error) {
	return subject("flotilla.member", cluster)
}

// HeartbeatSubject carries a member's heartbeats: flotilla.member.<cluster>.heartbeat,
// the one member subject its apply worker may publish on.
func HeartbeatSubject(cluster string) (string, error) {
	s, err := subject("flotilla.member", cluster)
	if err != nil {
		return "", err
	}
	return s + ".heartbeat", nil
}

// HubResourceSubject carries hub store events for one object:
// flotilla.hub.<group|core>.<kind>.<namespace|->.<name>.
func HubResourceSubject(group, kind, namespace, name string) (string, error) {
	if group == "" {
		group = "core"
	}
	if namespace == "" {
		namespace = "-"
	}
	return subject("flotilla.hub", group, kind, namespace, name)
}

// OverrideSubject carries the events of one override:
// flotilla.override.<kind>.<namespace|->.<name>, kind being ClusterResourceOverride or
// ResourceOverride.
func OverrideSubject(key api.OverrideKey) (string, error) {
	return subject("flotilla.override", key.Kind, orDash(key.Namespace), key.Name)
}

// StagedUpdateSubject carries the events of one staged update object:
// flotilla.stagedupdate.<kind>.<name>, kind being ClusterStagedUpdateStrategy,
// ClusterStagedUpdateRun or ClusterApprovalRequest (its approval).
func StagedUpdateSubject(key StagedUpdateKey) (string, error) {
	return subject("flotilla.stagedupdate", key.Kind, key.Name)
}

// DisruptionSubject carries the events of one eviction or disruption budget:
// flotilla.disruption.<kind>.<name>, kind being ClusterResourcePlacementEviction
// or ClusterResourcePlacementDisruptionBudget.
func DisruptionSubject(key DisruptionKey) (string, error) {
	return subject("flotilla.disruption", key.Kind, key.Name)
}

// SchedulingSubject carries a placement's decisions: flotilla.scheduling.<placement>.
func SchedulingSubject(placement string) (string, error) {
	return subject("flotilla.scheduling", placement)
}

// RolloutSubject carries a placement's snapshots and rollout progress:
// flotilla.rollout.<placement>.
func RolloutSubject(placement string) (string, error) {
	return subject("flotilla.rollout", placement)
}

// WorkSubject holds the last desired state of a placement on a cluster:
// flotilla.work.<cluster>.<placement>.
func WorkSubject(cluster, placement string) (string, error) {
	return bus.WorkSubject(cluster, placement)
}

// WorkRemovedSubject holds an apply worker's record of the last tombstone it carried out for
// a placement: flotilla.work.<cluster>.<placement>.removed, on the WORK stream beside the
// desired state, so that the worker reads both with one consumer.
func WorkRemovedSubject(cluster, placement string) (string, error) {
	s, err := bus.WorkSubject(cluster, placement)
	if err != nil {
		return "", err
	}
	return s + ".removed", nil
}

// WorkStatusSubject carries an apply worker's results for a placement:
// flotilla.workstatus.<cluster>.<placement>.
func WorkStatusSubject(cluster, placement string) (string, error) {
	return subject("flotilla.workstatus", cluster, placement)
}

// StatusSubject carries a placement's status changes: flotilla.status.<placement>.
func StatusSubject(placement string) (string, error) {
	return subject("flotilla.status", placement)
}

// OutboxSubject carries a hub service's notices about its outbox, such as an
// event it quarantined: flotilla.outbox.<placement>, or flotilla.outbox.- for
// an event that names no placement ('-' is no Kubernetes name).
func OutboxSubject(placement string) (string, error) {
	if placement == "" {
		return "flotilla.outbox.-", nil
	}
	return subject("flotilla.outbox", placement)
}

// SubjectNames reads the placement and the cluster a subject names, if it
// names them: the reverse of the subject functions above (a hub subject names
// neither). An unknown subject names nothing.
func SubjectNames(subject string) (placement, cluster string) {
	toks := strings.Split(subject, ".")
	if len(toks) < 3 || toks[0] != "flotilla" {
		return "", ""
	}
	name := func(tok string) string {
		n, err := bus.ParseSubjectToken(tok)
		if err != nil || n == "-" {
			return ""
		}
		return n
	}
	switch {
	case len(toks) == 3 && slices.Contains([]string{"placement", "scheduling", "rollout", "status", "outbox"}, toks[1]):
		return name(toks[2]), ""
	case (len(toks) == 3 || len(toks) == 4 && toks[3] == "heartbeat") && toks[1] == "member":
		return "", name(toks[2])
	case len(toks) == 4 && (toks[1] == "work" || toks[1] == "workstatus"):
		return name(toks[3]), name(toks[2])
	case len(toks) == 5 && toks[1] == "work" && toks[4] == "removed":
		return name(toks[3]), name(toks[2])
	}
	return "", ""
}

func subject(prefix string, names ...string) (string, error) {
	var b strings.Builder
	b.WriteString(prefix)
	for _, n := range names {
		tok, err := bus.SubjectToken(n)
		if err != nil {
			return "", fmt.Errorf("%s subject: %w", prefix, err)
		}
		b.WriteByte('.')
		b.WriteString(tok)
	}
	return b.String(), nil
}
