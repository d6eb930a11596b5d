package main

import (
	"testing"

	"github.com/nats-io/nats.go"

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
