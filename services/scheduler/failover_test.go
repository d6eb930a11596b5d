package scheduler_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/revision"
)

func (f *fixture) heartbeat(name string, healthy bool) {
	subj, _ := events.HeartbeatSubject(name)
	hb := events.MemberHeartbeat{Name: name, Healthy: healthy, ObservedAt: time.Now()}
	if !healthy {
		hb.Message = "dial tcp 127.0.0.1:6443: connect: connection refused"
	}
	f.Publish(events.TypeMemberHeartbeat, subj, hb)
}

// placeWithFailover places a PickN placement with failover annotations.
func (f *fixture) placeWithFailover(name string, n int32, annotations map[string]string) {
	subj, _ := events.PlacementSubject(name)
	f.Publish(events.TypePlacementUpserted, subj, events.PlacementUpserted{Placement: api.ClusterResourcePlacement{
		TypeMeta:   metav1.TypeMeta{APIVersion: "placement.kubernetes-fleet.io/v1beta1", Kind: "ClusterResourcePlacement"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: api.PlacementSpec{
			ResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: name}},
			Policy:            &api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: &n},
		},
	}})
}

// wantReleased checks the decision releases cluster with action (lost or released).
func wantReleased(cluster string, action events.DecisionAction, reason string) func(revision.Decision) error {
	return func(d revision.Decision) error {
		r, ok := d.ReleasedAs(cluster)
		if !ok || r.Action != action || r.FailoverReason != reason {
			return fmt.Errorf("released %+v, want %s %s (%s)", d.Released, cluster, action, reason)
		}
		return nil
	}
}

func both(checks ...func(revision.Decision) error) func(revision.Decision) error {
	return func(d revision.Decision) error {
		for _, c := range checks {
			if err := c(d); err != nil {
				return err
			}
		}
		return nil
	}
}

func (f *fixture) failoverSteps(placement string) []string {
	f.t.Helper()
	rows, err := f.Pool.Query(f.t.Context(), `select kind || ' ' || from_cluster || '>' || to_cluster from failover_history where placement = $1 order by id`, placement)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestFailoverAndFailback follows a PickN placement on real NATS and PostgreSQL:
// a member whose heartbeats say its API server is unreachable is lost after the
// placement's grace period, even across a scheduler restart (the timer is in
// PostgreSQL); the placement moves to the third member and keeps the lost copy
// (released, lost); the member returns (released: its copy may go); after the
// failback period the placement moves back.
func TestFailoverAndFailback(t *testing.T) {
	f := newFixture(t)
	stop := f.startScheduler()
	for _, m := range []string{"member-1", "member-2", "member-3"} {
		f.join(m, nil)
		f.heartbeat(m, true)
	}
	f.placeWithFailover("web", 2, map[string]string{api.FailoverAfterAnnotation: "1s", api.FailbackAfterAnnotation: "2s"})
	f.latest("web", wantChosen("member-1", "member-2"))

	f.heartbeat("member-1", false)
	stop() // the grace period ends while no scheduler runs
	f.startScheduler()
	d := f.latest("web", both(wantChosen("member-2", "member-3"), wantReleased("member-1", events.ActionLost, api.ClusterLostReason)))
	for _, c := range d.Chosen {
		if c.Cluster == "member-3" && c.FailoverReason != api.FailoverReplacementScheduledReason {
			t.Errorf("member-3's failover reason %q, want %s", c.FailoverReason, api.FailoverReplacementScheduledReason)
		}
	}

	f.heartbeat("member-1", true)
	f.latest("web", both(wantChosen("member-2", "member-3"), wantReleased("member-1", events.ActionReleased, api.LostClusterReturnedReason)))

	// Healthy for the failback period: back to member-1, member-3 released.
	f.latest("web", both(wantChosen("member-1", "member-2"), wantReleased("member-3", events.ActionReleased, api.FailbackReleasedReason)))
	steps := f.failoverSteps("web")
	want := []string{"failover member-1>member-3", "returned member-1>member-3", "failback member-3>member-1"}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Errorf("failover history %v, want %v", steps, want)
	}
}

// A member that is down for less than the grace period keeps its placements.
func TestNoFailoverWithinTheGracePeriod(t *testing.T) {
	f := newFixture(t)
	f.startScheduler()
	for _, m := range []string{"member-1", "member-2", "member-3"} {
		f.join(m, nil)
		f.heartbeat(m, true)
	}
	f.placeWithFailover("web", 2, map[string]string{api.FailoverAfterAnnotation: "1h"})
	f.latest("web", wantChosen("member-1", "member-2"))
	f.heartbeat("member-1", false)
	f.heartbeat("member-1", true)
	f.placeWithFailover("other", 1, nil) // a later event: once it is decided, the heartbeats were taken
	f.latest("other", func(d revision.Decision) error {
		if len(d.Chosen) != 1 {
			return fmt.Errorf("chosen %v", chosen(d))
		}
		return nil
	})
	f.latest("web", wantChosen("member-1", "member-2"))
	if steps := f.failoverSteps("web"); len(steps) != 0 {
		t.Errorf("failover history %v, want none", steps)
	}
}

// TestSilentMemberIsLostByTheClock: a member whose heartbeats stop (no event says so)
// is found lost by the scheduler's timer once 1.5 heartbeat periods and the grace period
// have passed, while the members that keep beating keep the placement.
func TestSilentMemberIsLostByTheClock(t *testing.T) {
	f := newFixture(t)
	f.startScheduler()
	for _, m := range []string{"member-1", "member-2", "member-3"} {
		subj, _ := events.MemberSubject(m)
		f.Publish(events.TypeMemberJoined, subj, events.MemberJoined{Member: api.MemberCluster{
			TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1beta1", Kind: "MemberCluster"},
			ObjectMeta: metav1.ObjectMeta{Name: m},
			Spec:       api.MemberClusterSpec{HeartbeatPeriodSeconds: 1},
		}})
		f.heartbeat(m, true)
	}
	f.placeWithFailover("web", 2, map[string]string{api.FailoverAfterAnnotation: "2s"})
	f.latest("web", wantChosen("member-1", "member-2"))

	// member-2 and member-3 keep beating; member-1 falls silent.
	done := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				f.heartbeat("member-2", true)
				f.heartbeat("member-3", true)
			}
		}
	}()
	defer func() { close(done); <-beating }()
	f.latest("web", both(wantChosen("member-2", "member-3"), wantReleased("member-1", events.ActionLost, api.ClusterLostReason)))
	if steps := f.failoverSteps("web"); len(steps) != 1 || steps[0] != "failover member-1>member-3" {
		t.Errorf("failover history %v, want the one failover", steps)
	}
}

// TestReplicasDoNotFailOverMembersWhoseHeartbeatsTheOtherTook: two replicas share the
// heartbeats, so each holds in memory only some of each member's. Liveness is read from
// PostgreSQL, so neither finds a beating member lost, however short the grace period.
func TestReplicasDoNotFailOverMembersWhoseHeartbeatsTheOtherTook(t *testing.T) {
	f := newFixture(t)
	f.startScheduler()
	f.startScheduler()
	members := []string{"member-1", "member-2", "member-3"}
	for _, m := range members {
		subj, _ := events.MemberSubject(m)
		f.Publish(events.TypeMemberJoined, subj, events.MemberJoined{Member: api.MemberCluster{
			TypeMeta:   metav1.TypeMeta{APIVersion: "cluster.kubernetes-fleet.io/v1beta1", Kind: "MemberCluster"},
			ObjectMeta: metav1.ObjectMeta{Name: m},
			Spec:       api.MemberClusterSpec{HeartbeatPeriodSeconds: 1},
		}})
		f.heartbeat(m, true)
	}
	f.placeWithFailover("web", 2, map[string]string{api.FailoverAfterAnnotation: "1s"})
	f.latest("web", wantChosen("member-1", "member-2"))
	// Every member beats twice a period for many grace periods.
	for range 20 {
		for _, m := range members {
			f.heartbeat(m, true)
		}
		time.Sleep(300 * time.Millisecond)
	}
	f.placeWithFailover("other", 1, nil) // decided after the heartbeats before it
	f.latest("other", func(d revision.Decision) error {
		if len(d.Chosen) != 1 {
			return fmt.Errorf("chosen %v", chosen(d))
		}
		return nil
	})
	f.latest("web", wantChosen("member-1", "member-2"))
	if steps := f.failoverSteps("web"); len(steps) != 0 {
		t.Errorf("failover history %v: a beating member was found lost", steps)
	}
}
