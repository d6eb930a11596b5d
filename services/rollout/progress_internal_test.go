package rollout

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/events/revision"
)

// TestProgressStaysBoundedAt5000Clusters cuts the progress of 5,000 stuck
// clusters (names of 63 bytes, messages as long as allowed) into pieces,
// each a valid event within the bounds, and a change of one cluster into one
// small piece; a consumer assembles all 5,000.
func TestProgressStaysBoundedAt5000Clusters(t *testing.T) {
	const n = 5000
	name := func(i int) string {
		s := fmt.Sprintf("member-%05d-", i)
		return s + strings.Repeat("x", 63-len(s))
	}
	pr := progress{head: events.RolloutProgressedV2{Placement: name(0), Generation: 7, ResourceIndex: 3,
		Reason: api.InvalidResourceSelectorsReason, Message: events.Truncate(strings.Repeat("<selector> ", 500), events.MaxMessageBytes)}}
	for i := range n {
		pr.all = append(pr.all, events.ClusterProgress{Cluster: name(i), ResourceIndex: 2, Stuck: true, Reason: api.RolloutNotStartedYetReason,
			Message: events.Truncate(fmt.Sprintf("The rollout on cluster %s is stuck: not applied and available within 5m0s: %s", name(i),
				strings.Repeat("waiting for \"budget\" ", 100)), events.MaxMessageBytes)})
	}
	pieces, err := progressPieces(pr, 1)
	if err != nil {
		t.Fatal(err)
	}
	largest := 0
	for i, p := range pieces {
		ev, err := events.New(events.TypeRolloutProgressedV2, "/flotilla/rollout", p.Placement, events.ID("t", fmt.Sprint(i)), p)
		if err != nil {
			t.Fatalf("piece %d: %v", i, err)
		}
		msg, err := bus.Encode(ev, "flotilla.rollout.x")
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Data) > events.MaxPieceBytes {
			t.Errorf("piece %d: %d bytes", i, len(msg.Data))
		}
		largest = max(largest, len(msg.Data))
	}
	var got revision.Progress
	if err := got.Apply(pieces); err != nil || len(got.Clusters) != n || !pieces[0].Base {
		t.Fatalf("assembled %d clusters (base %v): %v", len(got.Clusters), pieces[0].Base, err)
	}
	t.Logf("%d clusters: %d pieces, the largest %d bytes of JSON", n, len(pieces), largest)

	pr.changed = []events.ClusterProgress{{Cluster: name(17), Started: true, ResourceIndex: 3, Reason: api.RolloutStartedReason}}
	pieces, err = progressPieces(pr, 2)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(pieces)
	if len(pieces) != 1 || pieces[0].Base || len(pieces[0].Clusters) != 1 || len(raw) > 8<<10 {
		t.Fatalf("one cluster changing: %s", raw)
	}
	if err := got.Apply(pieces); err != nil || !got.Cluster(name(17)).Started {
		t.Fatalf("after one change: %v", err)
	}
}
