package fold_test

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/status/fold"
)

func member(name string, labels map[string]string) api.MemberCluster {
	return api.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func heartbeat(name string, healthy bool, at time.Time) *events.MemberHeartbeat {
	return &events.MemberHeartbeat{Name: name, Healthy: healthy, ObservedAt: at,
		Properties: map[api.PropertyName]api.PropertyValue{api.NodeCountProperty: {Value: "3", ObservationTime: metav1.NewTime(at)}}}
}

func TestMemberStatus(t *testing.T) {
	var m fold.MemberInputs
	var seq int64
	next := func() int64 { seq++; return seq }
	joined := t0
	m.Apply(&events.MemberJoined{Member: member("member-1", map[string]string{"env": "prod"})}, next(), joined)

	check := func(name string, now time.Time, want []string, wantSince map[string]time.Time) api.MemberCluster {
		t.Helper()
		mc := fold.Member(&m, now)
		if got := conds(mc.Status.Conditions); !slices.Equal(got, want) {
			t.Errorf("%s: conditions %q, want %q", name, got, want)
		}
		for typ, since := range wantSince {
			if c := getCond(t, mc.Status.Conditions, typ); !c.LastTransitionTime.Time.Equal(since) {
				t.Errorf("%s: %s since %v, want %v", name, typ, c.LastTransitionTime, since)
			}
		}
		return mc
	}

	mc := check("joined, no heartbeat", t0, []string{"Joined=True/MemberClusterJoined", "Healthy=Unknown/MemberClusterHeartbeatPending"},
		map[string]time.Time{"Joined": joined})
	if mc.Labels[api.MemberNameLabel] != "member-1" || mc.Labels["env"] != "prod" || mc.Spec.HeartbeatPeriodSeconds != 60 || mc.Generation != 1 {
		t.Errorf("member = %+v", mc.ObjectMeta)
	}
	if mc.APIVersion != fold.MemberAPIVersion || mc.Kind != fold.MemberKind {
		t.Errorf("type meta = %+v", mc.TypeMeta)
	}

	hb1 := t0.Add(time.Minute)
	m.Apply(heartbeat("member-1", true, hb1), next(), hb1)
	mc = check("healthy", hb1.Add(time.Minute), []string{"Joined=True/MemberClusterJoined", "Healthy=True/MemberClusterHealthy"},
		map[string]time.Time{"Healthy": hb1})
	if mc.Status.Properties[api.NodeCountProperty].Value != "3" || len(mc.Status.AgentStatus) != 1 || !mc.Status.AgentStatus[0].LastReceivedHeartbeat.Time.Equal(hb1) {
		t.Errorf("status = %+v", mc.Status)
	}

	// Another healthy heartbeat keeps the transition time.
	hb2 := hb1.Add(time.Minute)
	m.Apply(heartbeat("member-1", true, hb2), next(), hb2)
	check("still healthy", hb2, []string{"Joined=True/MemberClusterJoined", "Healthy=True/MemberClusterHealthy"},
		map[string]time.Time{"Healthy": hb1})

	// An older heartbeat redelivered late is ignored.
	if m.Apply(heartbeat("member-1", false, hb1), seq-1, hb2) {
		t.Error("an older heartbeat was applied")
	}

	// Three periods without a heartbeat: Unknown from the deadline on.
	check("heartbeats missed", hb2.Add(4*time.Minute), []string{"Joined=True/MemberClusterJoined", "Healthy=Unknown/MemberClusterHeartbeatMissed"},
		map[string]time.Time{"Healthy": hb2.Add(3 * time.Minute)})

	hb3 := hb2.Add(time.Minute)
	unhealthy := heartbeat("member-1", false, hb3)
	unhealthy.Message = "dial tcp 10.0.0.1:6443: connection refused"
	m.Apply(unhealthy, next(), hb3)
	mc = check("unhealthy", hb3, []string{"Joined=True/MemberClusterJoined", "Healthy=False/MemberClusterUnhealthy"},
		map[string]time.Time{"Healthy": hb3})
	if c := getCond(t, mc.Status.Conditions, "Healthy"); c.Message != unhealthy.Message {
		t.Errorf("Healthy message = %q", c.Message)
	}

	// A spec change bumps the generation; a label change does not.
	updated := member("member-1", map[string]string{"env": "staging"})
	m.Apply(&events.MemberUpdated{Member: updated}, next(), hb3)
	if got := fold.Member(&m, hb3); got.Generation != 1 || got.Labels["env"] != "staging" {
		t.Errorf("after a label change: generation %d, labels %v", got.Generation, got.Labels)
	}
	updated.Spec.Taints = []api.Taint{{Key: "maintenance", Effect: api.TaintEffect("NoSchedule")}}
	m.Apply(&events.MemberUpdated{Member: updated}, next(), hb3)
	if got := fold.Member(&m, hb3); got.Generation != 2 {
		t.Errorf("after a taint change: generation %d", got.Generation)
	}

	left := hb3.Add(time.Minute)
	m.Apply(&events.MemberLeft{Name: "member-1"}, next(), left)
	check("left", left, []string{"Joined=False/MemberClusterLeft"}, map[string]time.Time{"Joined": left})
	// An update does not bring a departed member back; a join does.
	m.Apply(&events.MemberUpdated{Member: updated}, next(), left)
	check("updated after leaving", left, []string{"Joined=False/MemberClusterLeft"}, nil)
	back := left.Add(time.Minute)
	m.Apply(&events.MemberJoined{Member: updated}, next(), back)
	check("joined again", back, []string{"Joined=True/MemberClusterJoined", "Healthy=False/MemberClusterUnhealthy"},
		map[string]time.Time{"Joined": back})
}

func TestHeartbeatOfUnknownMemberIsIgnored(t *testing.T) {
	var m fold.MemberInputs
	if m.Apply(heartbeat("ghost", true, t0), 1, t0) || m.Known() {
		t.Error("a heartbeat created a member")
	}
}

// Member events delivered out of order: the older one loses, whatever it is.
func TestLateMemberEventsLose(t *testing.T) {
	joined := &events.MemberJoined{Member: member("member-1", map[string]string{"env": "prod"})}
	tests := []struct {
		name  string
		newer any
		older any
		check func(t *testing.T, m *fold.MemberInputs)
	}{
		{"a join after the leave", &events.MemberLeft{Name: "member-1"}, joined, func(t *testing.T, m *fold.MemberInputs) {
			if m.Joined {
				t.Error("a late join brought the member back")
			}
		}},
		{"an update after an update", &events.MemberUpdated{Member: member("member-1", map[string]string{"env": "new"})},
			&events.MemberUpdated{Member: member("member-1", map[string]string{"env": "old"})}, func(t *testing.T, m *fold.MemberInputs) {
				if m.Member.Labels["env"] != "new" {
					t.Errorf("env = %q, want new", m.Member.Labels["env"])
				}
			}},
		{"a heartbeat after a heartbeat", heartbeat("member-1", true, t0), heartbeat("member-1", false, t0.Add(time.Hour)), func(t *testing.T, m *fold.MemberInputs) {
			if !m.Heartbeat.Healthy {
				t.Error("a late unhealthy heartbeat replaced the newer healthy one")
			}
		}},
		{"a leave after a join", joined, &events.MemberLeft{Name: "member-1"}, func(t *testing.T, m *fold.MemberInputs) {
			if !m.Joined {
				t.Error("a late leave removed the member")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m fold.MemberInputs
			m.Apply(joined, 1, t0)
			if !m.Apply(tt.newer, 5, t0.Add(time.Minute)) {
				t.Fatal("the newer event was not taken")
			}
			if m.Apply(tt.older, 3, t0.Add(2*time.Minute)) {
				t.Error("the older event reported a change")
			}
			tt.check(t, &m)
		})
	}
}

// A heartbeat claiming a time in the future does not keep a member that stopped
// beating healthy: health is judged by when the bus received the heartbeat.
func TestFutureHeartbeatDoesNotKeepADeadMemberHealthy(t *testing.T) {
	var m fold.MemberInputs
	m.Apply(&events.MemberJoined{Member: member("member-1", nil)}, 1, t0)
	received := t0.Add(time.Minute)
	m.Apply(heartbeat("member-1", true, t0.Add(24*time.Hour)), 2, received)
	mc := fold.Member(&m, received.Add(4*time.Minute))
	if c := getCond(t, mc.Status.Conditions, "Healthy"); c.Reason != fold.MemberHeartbeatMissedReason ||
		!c.LastTransitionTime.Time.Equal(received.Add(3*time.Minute)) {
		t.Errorf("four minutes after the last heartbeat: Healthy %s/%s since %v, want Unknown/%s from %v",
			c.Status, c.Reason, c.LastTransitionTime, fold.MemberHeartbeatMissedReason, received.Add(3*time.Minute))
	}
	if got := mc.Status.AgentStatus[0].LastReceivedHeartbeat.Time; !got.Equal(received) {
		t.Errorf("lastReceivedHeartbeat = %v, want when it was received, %v", got, received)
	}
}
