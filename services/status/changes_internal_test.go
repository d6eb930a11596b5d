package status

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// TestStatusChangesStayBoundedAt5000Clusters: the first status of a
// placement on 5,000 clusters (names of 63 bytes, seven conditions each with
// the longest messages, failed objects) goes out in pieces within the
// bounds, and a change of one cluster afterwards is one small piece.
func TestStatusChangesStayBoundedAt5000Clusters(t *testing.T) {
	const n = 5000
	at := metav1.NewTime(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	long := events.Truncate(strings.Repeat(`Failed to apply the manifest (error: admission webhook "<validate.example.com>" denied the request) `, 40),
		events.MaxMessageBytes)
	name := func(i int) string {
		s := fmt.Sprintf("member-%05d-", i)
		return s + strings.Repeat("x", 63-len(s))
	}
	cluster := func(i int, status metav1.ConditionStatus) api.ResourcePlacementStatus {
		ps := api.ResourcePlacementStatus{ClusterName: name(i), ObservedResourceIndex: "12"}
		for _, typ := range []string{"Scheduled", "RolloutStarted", "Overridden", "WorkSynchronized", "Applied", "Available", "DiffReported"} {
			ps.Conditions = append(ps.Conditions, metav1.Condition{Type: typ, Status: status, Reason: api.ApplyFailedReason,
				Message: long, ObservedGeneration: 3, LastTransitionTime: at})
		}
		for j := range 3 {
			ps.FailedPlacements = append(ps.FailedPlacements, api.FailedResourcePlacement{
				ResourceIdentifier: api.ResourceIdentifier{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: fmt.Sprint("cm-", j)}})
		}
		return ps
	}
	var next api.PlacementStatus
	next.Conditions = []metav1.Condition{{Type: "ClusterResourcePlacementApplied", Status: metav1.ConditionFalse, Reason: api.ApplyFailedReason,
		Message: long, ObservedGeneration: 3, LastTransitionTime: at}}
	for i := range n {
		next.PlacementStatuses = append(next.PlacementStatuses, cluster(i, metav1.ConditionFalse))
	}
	pieces, err := statusPieces(name(0), 1, 3, api.PlacementStatus{}, next, false)
	if err != nil {
		t.Fatal(err)
	}
	largest, largestAt, listed := 0, 0, 0
	for i, p := range pieces {
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) > events.MaxPieceBytes || p.Piece != i || p.Pieces != len(pieces) || p.ClusterCount != n {
			t.Errorf("piece %d of %d: %d bytes, %d clusters", p.Piece, p.Pieces, len(raw), p.ClusterCount)
		}
		if len(raw) > largest {
			largest, largestAt = len(raw), i
		}
		listed += len(p.Clusters)
	}
	// The first, the largest and the last piece, as they travel (encoding
	// and validating all of them takes long under the race detector).
	for _, i := range []int{0, largestAt, len(pieces) - 1} {
		ev, err := events.New(events.TypePlacementStatusChangedV2, "/flotilla/status", pieces[i].Placement, events.ID("t", fmt.Sprint(i)), pieces[i])
		if err != nil {
			t.Fatalf("piece %d: %v", i, err)
		}
		if _, err := bus.Encode(ev, "flotilla.status.x"); err != nil {
			t.Fatal(err)
		}
	}
	if listed != n {
		t.Errorf("%d clusters listed, want %d", listed, n)
	}
	t.Logf("the first status of %d clusters: %d pieces, the largest %d bytes of JSON", n, len(pieces), largest)

	prev := next
	next.PlacementStatuses = append([]api.ResourcePlacementStatus(nil), prev.PlacementStatuses[:n-1]...)
	next.PlacementStatuses[42] = cluster(42, metav1.ConditionTrue)
	pieces, err = statusPieces(name(0), 2, 3, prev, next, false)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(pieces)
	if len(pieces) != 1 || len(pieces[0].Clusters) != 2 || pieces[0].Clusters[0].Cluster != name(42) ||
		pieces[0].Clusters[1].Cluster != name(n-1) || !pieces[0].Clusters[1].Removed || len(raw) > 64<<10 {
		t.Fatalf("one cluster changed, one gone: %d pieces, %d bytes", len(pieces), len(raw))
	}
	t.Logf("one cluster changed and one gone: %d bytes", len(raw))
}
