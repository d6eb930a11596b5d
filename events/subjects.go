package events

import (
	"fmt"
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
