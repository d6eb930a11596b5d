package main

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/input"
)

// The placed documents are what fleetctl accepts: the objects asked for and a valid
// placement of the policy asked for.
func TestPlacementYAMLIsValid(t *testing.T) {
	for _, tc := range []struct {
		pick, objects int
		policy        api.PlacementType
	}{
		{100, 10, api.PickNPlacementType},
		{0, 3, api.PickAllPlacementType},
	} {
		t.Run(policyName(tc.pick), func(t *testing.T) {
			docs, problems := input.Load([]input.Source{{Name: "bench", Data: []byte(placementYAML(tc.pick, tc.objects))}})
			if len(problems) > 0 {
				t.Fatalf("problems: %+v", problems)
			}
			if len(docs) != tc.objects+1 {
				t.Fatalf("%d documents, want %d objects and a placement", len(docs), tc.objects)
			}
			crp, ok := docs[len(docs)-1].Object.(*api.ClusterResourcePlacement)
			if !ok {
				t.Fatalf("last document is %T", docs[len(docs)-1].Object)
			}
			if crp.Spec.Policy.PlacementType != tc.policy {
				t.Errorf("policy %s, want %s", crp.Spec.Policy.PlacementType, tc.policy)
			}
			if tc.pick > 0 && (crp.Spec.Policy.NumberOfClusters == nil || int(*crp.Spec.Policy.NumberOfClusters) != tc.pick) {
				t.Errorf("numberOfClusters %v, want %d", crp.Spec.Policy.NumberOfClusters, tc.pick)
			}
		})
	}
}

func TestClassifyNamesWhatAMessageIs(t *testing.T) {
	for _, tc := range []struct {
		msg  nats.Msg
		want string
	}{
		{nats.Msg{Subject: "flotilla.work.sim-1.p"}, "flotilla.work"},
		{nats.Msg{Subject: "flotilla.blob.work.sim-1.p.abc.0"}, "flotilla.blob.work"},
		{nats.Msg{Subject: "_INBOX.x", Reply: "$JS.ACK.WORK.apply-sim-1.1.5.5.1700000000.0"}, "deliver WORK/apply-*"},
		{nats.Msg{Subject: "_INBOX.x", Reply: "$JS.ACK.hub.ACCHASH.EVENTS.status.1.5.5.1700000000.0.token"}, "deliver EVENTS/status"},
		{nats.Msg{Subject: "$JS.API.CONSUMER.CREATE.WORK.apply-sim-1"}, "$JS.API.CONSUMER.CREATE"},
		{nats.Msg{Subject: "_INBOX.y", Data: []byte("{}")}, "inbox reply"},
	} {
		if got := classify(&tc.msg); got != tc.want {
			t.Errorf("classify(%s, reply %s) = %q, want %q", tc.msg.Subject, tc.msg.Reply, got, tc.want)
		}
	}
	if got := headerBytes(nats.Header{"Ce-Id": {"abc"}}); got != len("NATS/1.0\r\nCe-Id: abc\r\n\r\n") {
		t.Errorf("headerBytes = %d", got)
	}
}

// The table's figures: percentiles by nearest rank, counts with separators, ratios.
func TestSuiteFigures(t *testing.T) {
	runs := []time.Duration{9, 1, 8, 2, 7, 3, 6, 4, 5, 10}
	if got := percentile(runs, 50); got != 5 {
		t.Errorf("p50 = %d, want 5", got)
	}
	if got := percentile(runs, 90); got != 9 {
		t.Errorf("p90 = %d, want 9", got)
	}
	if got := percentile(runs[:1], 90); got != 9 {
		t.Errorf("p90 of one run = %d, want 9", got)
	}
	for n, want := range map[int]string{7: "7", 1000: "1,000", 100000: "100,000", 5000: "5,000"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
	if got := ratio(20*time.Second, 2*time.Second); got != "10x" {
		t.Errorf("ratio = %q, want 10x", got)
	}
	if got := ratio(20*time.Second, 0); got != "-" {
		t.Errorf("ratio over nothing = %q, want -", got)
	}
}

// A placement counts as done when it is Applied and Available everywhere for its
// generation, and, after a hub change, at the new resource snapshot on every cluster.
func TestPlacementDone(t *testing.T) {
	cond := func(t string) metav1.Condition {
		return metav1.Condition{Type: t, Status: metav1.ConditionTrue, ObservedGeneration: 2}
	}
	cluster := func(name, index string) api.ResourcePlacementStatus {
		return api.ResourcePlacementStatus{ClusterName: name, ObservedResourceIndex: index, Conditions: []metav1.Condition{
			cond(string(api.PerClusterAppliedConditionType)), cond(string(api.PerClusterAvailableConditionType))}}
	}
	crp := &api.ClusterResourcePlacement{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	crp.Status.ObservedResourceIndex = "1"
	crp.Status.Conditions = []metav1.Condition{cond(string(api.ClusterResourcePlacementAppliedConditionType)), cond(string(api.ClusterResourcePlacementAvailableConditionType))}
	crp.Status.PlacementStatuses = []api.ResourcePlacementStatus{cluster("a", "1"), cluster("b", "0")}
	if !placementDone(crp, 2, "") {
		t.Error("not done, though Applied and Available on both clusters")
	}
	if placementDone(crp, 3, "") {
		t.Error("done on 2 of 3 clusters")
	}
	if placementDone(crp, 2, "0") {
		t.Error("done after the change, though cluster b is still at snapshot 0")
	}
	crp.Status.PlacementStatuses[1].ObservedResourceIndex = "1"
	if !placementDone(crp, 2, "0") {
		t.Error("not done after the change, though both clusters are at snapshot 1")
	}
	crp.Generation = 3
	if placementDone(crp, 2, "") {
		t.Error("done for an older generation")
	}
}

// The failover scenario's placements carry the failover annotations fleetctl accepts.
func TestFailoverPlacementYAML(t *testing.T) {
	p := placementSpec{name: "failback", namespace: "failback", pick: 100, objects: 2, failoverAfter: "20s", failbackAfter: "30s"}
	docs, problems := input.Load([]input.Source{{Name: "bench", Data: []byte(p.yaml())}})
	if len(problems) > 0 {
		t.Fatalf("problems: %+v", problems)
	}
	crp, ok := docs[len(docs)-1].Object.(*api.ClusterResourcePlacement)
	if !ok {
		t.Fatalf("last document is %T", docs[len(docs)-1].Object)
	}
	fs, errs := api.Failover(crp)
	if len(errs) > 0 || fs.After != 20*time.Second || fs.FailbackAfter != 30*time.Second {
		t.Errorf("failover settings %+v (%v), want 20s and 30s", fs, errs)
	}
}

func TestMostPlaced(t *testing.T) {
	got := mostPlaced(map[string][]string{"a": {"m1", "m2", "m3"}, "b": {"m2", "m3"}, "c": {"m3", "m4"}}, 2)
	if len(got) != 2 || got[0] != "m3" || got[1] != "m2" {
		t.Errorf("mostPlaced = %v, want [m3 m2]", got)
	}
}

func TestMemoryLimitsFlag(t *testing.T) {
	var m memoryLimits
	if err := m.Set(defaultMemoryLimits); err != nil {
		t.Fatalf("the default %q: %v", defaultMemoryLimits, err)
	}
	if got := m.env("nats-server"); len(got) != 1 || got[0] != "GOMEMLIMIT=448MiB" {
		t.Errorf("nats-server's environment = %q, want GOMEMLIMIT=448MiB", got)
	}
	if got := m.env("rollout"); got != nil {
		t.Errorf("the rollout has no limit by default, got %q", got)
	}
	if err := m.Set("none"); err != nil || len(m) != 0 || m.String() != "none" {
		t.Errorf(`Set("none") = %v, leaving %v`, err, m)
	}
	for _, bad := range []string{"nats-server", "apply=1GiB", "status=256MB", "status=-1", "status=1.5GiB"} {
		if err := m.Set(bad); err == nil {
			t.Errorf("Set(%q) took it", bad)
		}
	}
	if err := m.Set("status=1GiB, rollout=200000000"); err != nil || m.String() != "rollout=200000000,status=1GiB" {
		t.Errorf("Set of two = %v, %v", err, m.String())
	}
}
