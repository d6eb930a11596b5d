package status_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/status"
)

// clock is a test's settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// A member whose heartbeat claims a time a day ahead, and then stops beating, shows as
// missing heartbeats three periods after the bus received its last one.
func TestFutureHeartbeatDoesNotKeepADeadMemberHealthy(t *testing.T) {
	f := newFixture(t)
	c := &clock{now: t0}
	cfg := status.Config{Options: f.Options(), Now: c.Now}
	f.Run("status", func(ctx context.Context) error { return status.Run(ctx, cfg) })
	subj := subject(events.MemberSubject("member-1"))
	f.publish(subj, f.event(events.TypeMemberJoined, "join", t0, events.MemberJoined{Member: memberCluster("member-1")}))
	beat := f.event(events.TypeMemberHeartbeat, "beat", t0, events.MemberHeartbeat{Name: "member-1", Healthy: true, ObservedAt: t0.Add(24 * time.Hour)})
	f.publish(subj, beat)
	f.handled(beat.ID())

	poll.Until(t, time.Minute, "the query service answers", func() error {
		_, err := f.NC.Request("$SRV.PING."+events.QueryService, nil, time.Second)
		return err
	})
	healthy := func() metav1.Condition {
		t.Helper()
		m, _ := query[api.MemberCluster](f, events.QueryGetMember, events.NameQuery{Name: "member-1"})
		cond := meta.FindStatusCondition(m.Result.Status.Conditions, "Healthy")
		if cond == nil {
			t.Fatalf("member-1 has no Healthy condition: %+v", m)
		}
		return *cond
	}
	if c := healthy(); c.Reason != "MemberClusterHealthy" {
		t.Fatalf("just after its heartbeat: %s/%s", c.Status, c.Reason)
	}
	// The member stops beating; four minutes are more than three periods of 60s.
	c.Set(t0.Add(4 * time.Minute))
	if c := healthy(); c.Status != "Unknown" || c.Reason != "MemberClusterHeartbeatMissed" {
		t.Errorf("four minutes after its last heartbeat: %s/%s (%s), want Unknown/MemberClusterHeartbeatMissed", c.Status, c.Reason, c.Message)
	}
}
