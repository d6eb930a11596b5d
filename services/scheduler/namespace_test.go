package scheduler_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/revision"
)

func (f *fixture) heartbeatWithNamespaces(name string, namespaces ...string) {
	subj, _ := events.HeartbeatSubject(name)
	hb := events.MemberHeartbeat{Name: name, Healthy: true, ObservedAt: time.Now(), Namespaces: map[string]string{}}
	for _, ns := range namespaces {
		hb.Namespaces[ns] = ""
	}
	f.Publish(events.TypeMemberHeartbeat, subj, hb)
}

// TestResourcePlacementGoesWhereItsNamespaceIs: a PickAll ResourcePlacement is
// scheduled onto the members whose heartbeats report its namespace, not onto one
// without it nor onto one that reports no namespaces; when the namespace appears
// on another member, the placement follows it there.
func TestResourcePlacementGoesWhereItsNamespaceIs(t *testing.T) {
	f := newFixture(t)
	defer f.startScheduler()()
	for _, m := range []string{"member-1", "member-2", "member-3"} {
		f.join(m, nil)
	}
	f.heartbeatWithNamespaces("member-1", "default", "team-a")
	f.heartbeatWithNamespaces("member-2", "default")
	f.heartbeat("member-3", true) // a worker that reports no namespaces

	key := api.PlacementKey("team-a", "app")
	subj, _ := events.PlacementSubject(key)
	f.Publish(events.TypePlacementUpserted, subj, events.PlacementUpserted{Placement: api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: api.ResourcePlacementKind},
		ObjectMeta: metav1.ObjectMeta{Name: key, Namespace: "team-a"},
		Spec:       api.PlacementSpec{ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "ConfigMap", Name: "app"}}},
	}})
	f.latest(key, wantChosen("member-1"))
	for cluster, want := range map[string]string{
		"member-2": `the cluster does not have the namespace "team-a" of the ResourcePlacement`,
		"member-3": "the cluster reports no namespaces, so it cannot take a ResourcePlacement",
	} {
		if got := f.historyReason(key, cluster, "not-selected"); got != want {
			t.Errorf("%s not selected for %q, want %q", cluster, got, want)
		}
	}

	f.heartbeatWithNamespaces("member-2", "default", "team-a")
	f.latest(key, wantChosen("member-1", "member-2"))
	// The namespace deleted on member-1: the placement leaves it, although a
	// held cluster is otherwise kept when it stops matching (affinity is
	// ignored during execution).
	f.heartbeatWithNamespaces("member-1", "default")
	d := f.latest(key, wantChosen("member-2"))
	if got := rejection(d, "member-1"); got != `the cluster does not have the namespace "team-a" of the ResourcePlacement` {
		t.Errorf("member-1 removed for %q", got)
	}
}

// rejection is the message the decision gives for removing cluster.
func rejection(d revision.Decision, cluster string) string {
	for _, c := range d.Removed {
		if c.Cluster == cluster {
			return c.Reason
		}
	}
	return ""
}
