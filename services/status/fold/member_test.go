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
	joined := t0
	m.Apply(&events.MemberJoined{Member: member("member-1", map[string]string{"env": "prod"})}, joined)

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
	m.Apply(heartbeat("member-1", true, hb1), hb1)
	mc = check("healthy", hb1.Add(time.Minute), []string{"Joined=True/MemberClusterJoined", "Healthy=True/MemberClusterHealthy"},
		map[string]time.Time{"Healthy": hb1})
	if mc.Status.Properties[api.NodeCountProperty].Value != "3" || len(mc.Status.AgentStatus) != 1 || !mc.Status.AgentStatus[0].LastReceivedHeartbeat.Time.Equal(hb1) {
		t.Errorf("status = %+v", mc.Status)
	}

	// Another healthy heartbeat keeps the transition time.
	hb2 := hb1.Add(time.Minute)
	m.Apply(heartbeat("member-1", true, hb2), hb2)
	check("still healthy", hb2, []string{"Joined=True/MemberClusterJoined", "Healthy=True/MemberClusterHealthy"},
		map[string]time.Time{"Healthy": hb1})

	// An older heartbeat redelivered late is ignored.
	if m.Apply(heartbeat("member-1", false, hb1), hb2) {
		t.Error("an older heartbeat was applied")
	}

	// Three periods without a heartbeat: Unknown from the deadline on.
	check("heartbeats missed", hb2.Add(4*time.Minute), []string{"Joined=True/MemberClusterJoined", "Healthy=Unknown/MemberClusterHeartbeatMissed"},
		map[string]time.Time{"Healthy": hb2.Add(3 * time.Minute)})

	hb3 := hb2.Add(time.Minute)
	unhealthy := heartbeat("member-1", false, hb3)
	unhealthy.Message = "dial tcp 10.0.0.1:6443: connection refused"
	m.Apply(unhealthy, hb3)
	mc = check("unhealthy", hb3, []string{"Joined=True/MemberClusterJoined", "Healthy=False/MemberClusterUnhealthy"},
		map[string]time.Time{"Healthy": hb3})
	if c := getCond(t, mc.Status.Conditions, "Healthy"); c.Message != unhealthy.Message {
		t.Errorf("Healthy message = %q", c.Message)
	}

	// A spec change bumps the generation; a label change does not.
	updated := member("member-1", map[string]string{"env": "staging"})
	m.Apply(&events.MemberUpdated{Member: updated}, hb3)
	if got := fold.Member(&m, hb3); got.Generation != 1 || got.Labels["env"] != "staging" {
		t.Errorf("after a label change: generation %d, labels %v", got.Generation, got.Labels)
	}
	updated.Spec.Taints = []api.Taint{{Key: "maintenance", Effect: api.TaintEffect("NoSchedule")}}
	m.Apply(&events.MemberUpdated{Member: updated}, hb3)
	if got := fold.Member(&m, hb3); got.Generation != 2 {
		t.Errorf("after a taint change: generation %d", got.Generation)
	}

	left := hb3.Add(time.Minute)
	m.Apply(&events.MemberLeft{Name: "member-1"}, left)
	check("left", left, []string{"Joined=False/MemberClusterLeft"}, map[string]time.Time{"Joined": left})
	// An update does not bring a departed member back; a join does.
	m.Apply(&events.MemberUpdated{Member: updated}, left)
	check("updated after leaving", left, []string{"Joined=False/MemberClusterLeft"}, nil)
	back := left.Add(time.Minute)
	m.Apply(&events.MemberJoined{Member: updated}, back)
	check("joined again", back, []string{"Joined=True/MemberClusterJoined", "Healthy=False/MemberClusterUnhealthy"},
		map[string]time.Time{"Joined": back})
}

func TestHeartbeatOfUnknownMemberIsIgnored(t *testing.T) {
	var m fold.MemberInputs
	if m.Apply(heartbeat("ghost", true, t0), t0) || m.Known() {
		t.Error("a heartbeat created a member")
	}
}
