package revision_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/events/revision"
)

// fleet is the largest fleet the bounds are held at.
const fleet = 5000

// longName is the i-th cluster name of 63 bytes, the longest a member may have.
func longName(i int) string {
	n := fmt.Sprintf("member-%05d-", i)
	return n + strings.Repeat("x", 63-len(n))
}

// longText is a message of MaxMessageBytes, with characters JSON escapes.
func longText(i int) string {
	return events.Truncate(fmt.Sprintf("cluster %d: <%s> & \"quoted\" ", i, strings.Repeat("étendue ", 200)), events.MaxMessageBytes)
}

// wireBound is what one piece may take on the bus: its JSON and the
// CloudEvent headers.
const wireBound = events.MaxPieceBytes + 1<<10

// TestPiecesStayBoundedAt5000Clusters builds the largest revision of each
// type that travels in pieces, 5,000 clusters with names of 63 bytes and
// every message as long as allowed, cuts it with Split, and checks that every
// piece is a valid event within the bounds and that the pieces assemble back
// to all 5,000 clusters.
func TestPiecesStayBoundedAt5000Clusters(t *testing.T) {
	placement := longName(0)
	at := metav1.NewTime(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))

	t.Run(events.TypePlacementScheduledV2, func(t *testing.T) {
		clusters := make([]events.ClusterDecision, fleet)
		for i := range clusters {
			clusters[i] = events.ClusterDecision{Cluster: longName(i), Action: events.ActionRemoved,
				AffinityScore: -2147483648, TopologySpreadScore: -2147483648, Reason: longText(i)}
		}
		h := events.PlacementScheduledV2{Placement: placement, Revision: 1 << 40, Base: true, Generation: 1 << 40,
			PlacementType: api.PickNPlacementType, Wanted: fleet, Message: longText(-1)}
		pieces := split(t, h, clusters, func(p *events.PlacementScheduledV2, part events.Part, cs []events.ClusterDecision) {
			p.Piece, p.Pieces, p.Clusters = part.Piece, part.Pieces, cs
		})
		largest := publishAll(t, events.TypePlacementScheduledV2, pieces)
		var d revision.Decision
		if err := d.Apply(pieces); err != nil || len(d.Removed) != fleet {
			t.Errorf("assembled %d removed clusters (%v), want %d", len(d.Removed), err, fleet)
		}
		t.Logf("%d pieces, the largest %d bytes on the bus", len(pieces), largest)
	})

	t.Run(events.TypeRolloutProgressedV2, func(t *testing.T) {
		clusters := make([]events.ClusterProgress, fleet)
		for i := range clusters {
			clusters[i] = events.ClusterProgress{Cluster: longName(i), Started: true, ResourceIndex: 1 << 40, Stuck: true,
				Reason: api.RolloutNotStartedYetReason, Message: longText(i)}
		}
		h := events.RolloutProgressedV2{Placement: placement, Revision: 1 << 40, Base: true, Generation: 1 << 40, ResourceIndex: 1 << 40,
			Reason: api.InvalidResourceSelectorsReason, Message: longText(-1), ClusterCount: fleet}
		pieces := split(t, h, clusters, func(p *events.RolloutProgressedV2, part events.Part, cs []events.ClusterProgress) {
			p.Piece, p.Pieces, p.Clusters = part.Piece, part.Pieces, cs
		})
		largest := publishAll(t, events.TypeRolloutProgressedV2, pieces)
		var p revision.Progress
		if err := p.Apply(pieces); err != nil || len(p.Clusters) != fleet {
			t.Errorf("assembled %d clusters (%v), want %d", len(p.Clusters), err, fleet)
		}
		t.Logf("%d pieces, the largest %d bytes on the bus", len(pieces), largest)
	})

	t.Run(events.TypePlacementStatusChangedV2, func(t *testing.T) {
		conditions := func(i int) []metav1.Condition {
			var out []metav1.Condition
			for _, typ := range []string{"Scheduled", "RolloutStarted", "Overridden", "WorkSynchronized", "Applied", "Available", "DiffReported"} {
				out = append(out, metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: api.ApplyFailedReason,
					Message: longText(i), ObservedGeneration: 1 << 40, LastTransitionTime: at})
			}
			return out
		}
		clusters := make([]events.ClusterStatus, fleet)
		for i := range clusters {
			clusters[i] = events.ClusterStatus{Cluster: longName(i), ObservedResourceIndex: "1099511627776", Conditions: conditions(i),
				FailedPlacements: api.MaxReportedPlacements, DriftedPlacements: api.MaxReportedPlacements, DiffedPlacements: api.MaxReportedPlacements}
		}
		h := events.PlacementStatusChangedV2{Placement: placement, Revision: 1, Generation: 1 << 40, ObservedResourceIndex: "1099511627776",
			SelectedResourceCount: 1 << 20, Conditions: append(conditions(-1), conditions(-2)[:1]...), ClusterCount: fleet}
		pieces := split(t, h, clusters, func(p *events.PlacementStatusChangedV2, part events.Part, cs []events.ClusterStatus) {
			p.Piece, p.Pieces, p.Clusters = part.Piece, part.Pieces, cs
		})
		largest := publishAll(t, events.TypePlacementStatusChangedV2, pieces)
		var a revision.Assembler[events.PlacementStatusChangedV2]
		n := 0
		for _, p := range pieces {
			for _, rev := range a.Add(p) {
				for _, q := range rev {
					n += len(q.Clusters)
				}
			}
		}
		if n != fleet {
			t.Errorf("assembled %d clusters, want %d", n, fleet)
		}
		t.Logf("%d pieces, the largest %d bytes on the bus", len(pieces), largest)
	})
}

// TestSnapshotPiecesStayBounded cuts the resource list of a snapshot of
// 5,000 objects with the longest names Kubernetes allows, each from an
// envelope, as the rollout does, and checks every piece is a valid event
// within the bounds and that the pieces hold every resource once, in order.
func TestSnapshotPiecesStayBounded(t *testing.T) {
	long := func(prefix string, i int) string {
		n := fmt.Sprintf("%s-%05d-", prefix, i)
		return n + strings.Repeat("x", 253-len(n))
	}
	resources := make([]api.ResourceIdentifier, fleet)
	for i := range resources {
		resources[i] = api.ResourceIdentifier{Group: long("group", i), Version: "v1beta1", Kind: "ConfigMap",
			Namespace: long("ns", i)[:63], Name: long("name", i),
			Envelope: &api.EnvelopeIdentifier{Name: long("envelope", i), Namespace: long("ns", i)[:63], Type: api.ConfigMapEnvelopeType}}
	}
	h := events.SnapshotCreated{Placement: longName(0), Index: 1 << 40, Hash: "sha256:" + strings.Repeat("f", 64), ResourceCount: fleet}
	pieces := split(t, h, resources, func(p *events.SnapshotCreated, part events.Part, rs []api.ResourceIdentifier) {
		p.Piece, p.Pieces, p.SelectedResources = part.Piece, part.Pieces, rs
	})
	largest := publishAll(t, events.TypeSnapshotCreated, pieces)
	var got []api.ResourceIdentifier
	for i, p := range pieces {
		if p.Part() != (events.Part{Revision: 1 << 40, Base: true, Piece: i, Pieces: len(pieces)}) {
			t.Errorf("piece %d has part %+v", i, p.Part())
		}
		got = append(got, p.SelectedResources...)
	}
	if len(got) != fleet || got[0].Name != resources[0].Name || got[fleet-1].Name != resources[fleet-1].Name {
		t.Errorf("the pieces hold %d resources, want the %d in order", len(got), fleet)
	}
	t.Logf("%d pieces, the largest %d bytes on the bus", len(pieces), largest)
}

// split cuts clusters into pieces of the header h with Cut, as the producers do.
func split[P any, C any](t *testing.T, h P, clusters []C, set func(*P, events.Part, []C)) []P {
	t.Helper()
	out, err := revision.Cut(h, clusters, func(p *P, piece, pieces int, cs []C) {
		set(p, events.Part{Piece: piece, Pieces: pieces}, cs)
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// publishAll encodes every piece as it travels and checks the bounds; it
// returns the largest message's size.
func publishAll[P any](t *testing.T, typ string, pieces []P) int {
	t.Helper()
	largest := 0
	for i, p := range pieces {
		ev, err := events.New(typ, "/flotilla/test", "web", events.ID("bounds", typ, fmt.Sprint(i)), p)
		if err != nil {
			t.Fatalf("piece %d: %v", i, err)
		}
		msg, err := bus.Encode(ev, "flotilla.test")
		if err != nil {
			t.Fatal(err)
		}
		size := len(msg.Data)
		for k, vs := range msg.Header {
			for _, v := range vs {
				size += len(k) + len(v) + 4
			}
		}
		if len(msg.Data) > events.MaxPieceBytes || size > wireBound {
			t.Errorf("piece %d of %d: %d bytes of data, %d on the bus; bound %d and %d", i, len(pieces), len(msg.Data), size, events.MaxPieceBytes, wireBound)
		}
		largest = max(largest, size)
	}
	if min := fleet / events.MaxPieceClusters; len(pieces) < min {
		t.Errorf("%d pieces for %d clusters, want at least %d", len(pieces), fleet, min)
	}
	return largest
}
