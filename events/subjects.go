package events

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flotilla-dev/flotilla/events/bus"
)

// Subjects. Each name becomes one subject token (Kubernetes names may contain
// dots; see bus.SubjectToken), so that permissions can be scoped to a cluster:
// an apply worker for cluster c needs flotilla.work.c.>, flotilla.workstatus.c.>
// and flotilla.member.c only. A name that cannot be a token (empty, or with
// '*', '>', '_' or whitespace) is an error.

// PlacementSubject carries placement input events: flotilla.placement.<placement>.
func PlacementSubject(placement string) (string, error) {
	return subject("flotilla.placement", placement)
}

// MemberSubject carries member input events and heartbeats: flotilla.member.<cluster>.
func MemberSubject(cluster string) (string, error) {
	return subject("flotilla.member", cluster)
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
	case len(toks) == 3 && toks[1] == "member":
		return "", name(toks[2])
	case len(toks) == 4 && (toks[1] == "work" || toks[1] == "workstatus"):
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
