package scheduler

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"github.com/flotilla-dev/flotilla/services/scheduler/schedule"
)

var decidedAt = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// longName is the i-th member name of 63 bytes, the longest allowed.
func longName(i int) string {
	n := fmt.Sprintf("member-%05d-", i)
	return n + strings.Repeat("x", 63-len(n))
}

// fleetOf is n joined members with long names; every tenth carries a taint
// with a long key and value, whose rejection message is long.
func fleetOf(t *testing.T, n int) *framework.MemberSet {
	t.Helper()
	ms := make([]*framework.Member, n)
	for i := range ms {
		spec := framework.MemberSpec{Name: longName(i), Joined: true, LastHeartbeat: decidedAt}
		if i%10 == 3 {
			spec.Taints = []framework.Taint{{Key: "example.com/" + strings.Repeat("k", 63), Value: strings.Repeat("v", 63),
				Effect: framework.TaintEffectNoSchedule}}
		}
		m, err := framework.NewMember(spec)
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = m
	}
	return framework.NewMemberSet(ms...)
}

func decide(t *testing.T, policy *api.PlacementPolicy, set *framework.MemberSet, prev *schedule.Decision) *schedule.Decision {
	t.Helper()
	p, err := schedule.CompilePolicy(policy)
	if err != nil {
		t.Fatal(err)
	}
	return schedule.Decide(p, set, prev, decidedAt)
}

// checkPieces checks that pieces are one valid revision, each piece within
// the bounds on the bus, and returns the largest message's size.
func checkPieces(t *testing.T, pieces []events.PlacementScheduledV2) int {
	t.Helper()
	largest := 0
	for i, p := range pieces {
		if p.Piece != i || p.Pieces != len(pieces) || p.Revision != pieces[0].Revision || p.Base != pieces[0].Base {
			t.Fatalf("piece %d is %+v", i, p.Part())
		}
		ev, err := events.New(events.TypePlacementScheduledV2, "/flotilla/scheduler", p.Placement, events.ID("t", fmt.Sprint(i)), p)
		if err != nil {
			t.Fatalf("piece %d: %v", i, err)
		}
		msg, err := bus.Encode(ev, "flotilla.scheduling."+p.Placement)
		if err != nil {
			t.Fatal(err)
		}
		size := len(msg.Data)
		for k, vs := range msg.Header {
			for _, v := range vs {
				size += len(k) + len(v) + 4
			}
		}
		if len(msg.Data) > events.MaxPieceBytes || len(p.Clusters) > events.MaxPieceClusters {
			t.Errorf("piece %d: %d clusters, %d bytes", i, len(p.Clusters), len(msg.Data))
		}
		largest = max(largest, size)
	}
	return largest
}

// TestDecisionsStayBoundedAt5000Clusters publishes a PickAll decision over
// 5,000 members as a base in pieces, then one member joining as a change of
// one cluster, a policy that leaves most of the fleet out as changes or a
// base (whichever is shorter), and the placement's deletion as an empty base.
// A consumer applying the revisions holds the scheduler's decision each time.
func TestDecisionsStayBoundedAt5000Clusters(t *testing.T) {
	const n = 5000
	r := placementRow{name: longName(0), generation: 1}
	pickAll := &api.PlacementPolicy{PlacementType: api.PickAllPlacementType}
	var d revision.Decision
	apply := func(pieces []events.PlacementScheduledV2) {
		t.Helper()
		if err := d.Apply(pieces); err != nil {
			t.Fatal(err)
		}
	}

	first := decide(t, pickAll, fleetOf(t, n), nil)
	pieces, err := decisionPieces(r, published{}, first, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	largest := checkPieces(t, pieces)
	if !pieces[0].Base || len(pieces) < n/events.MaxPieceClusters {
		t.Fatalf("first decision: base %v in %d pieces", pieces[0].Base, len(pieces))
	}
	apply(pieces)
	if len(d.Chosen) != len(first.Chosen) || len(d.Chosen) != n-n/10 {
		t.Fatalf("assembled %d chosen, the scheduler chose %d", len(d.Chosen), len(first.Chosen))
	}
	t.Logf("PickAll over %d members: %d chosen, %d pieces, the largest %d bytes on the bus", n, len(first.Chosen), len(pieces), largest)

	// One member joins: one cluster changes.
	joined := decide(t, pickAll, fleetOf(t, n+1), first)
	pieces, err = decisionPieces(r, published{first, 1}, joined, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(pieces)
	if len(pieces) != 1 || pieces[0].Base || len(pieces[0].Clusters) != 1 || pieces[0].Clusters[0].Cluster != longName(n) || len(raw) > 1024 {
		t.Fatalf("one member joining: %s", raw)
	}
	apply(pieces)
	if len(d.Chosen) != len(joined.Chosen) {
		t.Fatalf("assembled %d chosen, the scheduler chose %d", len(d.Chosen), len(joined.Chosen))
	}
	t.Logf("one member joining: one piece of %d bytes", len(raw))

	// PickN for more than there are: the missing are shown, as many as
	// lack (the tainted 500 and more), with long reasons.
	wide := int32(n + 1000)
	pickN := &api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: &wide}
	r.generation = 2
	many := decide(t, pickN, fleetOf(t, n+1), joined)
	pieces, err = decisionPieces(r, published{joined, 1}, many, 3, false)
	if err != nil {
		t.Fatal(err)
	}
	largest = checkPieces(t, pieces)
	apply(pieces)
	if !pieces[0].Base || len(d.Chosen) != len(many.Chosen) || len(d.NotChosen) != len(many.NotChosen) || d.Fulfilled {
		t.Fatalf("PickN %d: base %v, %d chosen (%d), %d not chosen (%d)", wide, pieces[0].Base, len(d.Chosen), len(many.Chosen),
			len(d.NotChosen), len(many.NotChosen))
	}
	t.Logf("PickN %d of %d members: %d pieces, the largest %d bytes on the bus", wide, n+1, len(pieces), largest)

	// The placement is deleted: an empty base.
	pieces, err = decisionPieces(r, published{many, 2}, &schedule.Decision{Type: many.Type}, 4, true)
	if err != nil {
		t.Fatal(err)
	}
	apply(pieces)
	if len(pieces) != 1 || !pieces[0].Base || len(d.Chosen) != 0 || len(d.NotChosen) != 0 {
		t.Fatalf("deletion: %d pieces, base %v; assembled %+v", len(pieces), pieces[0].Base, d)
	}
}

// TestDecisionChangesOrBase: a decision is published as its changes only
// when they are shorter than the base, and the consumer's state matches the
// scheduler's after each.
func TestDecisionChangesOrBase(t *testing.T) {
	r := placementRow{name: "web", generation: 1}
	three := int32(3)
	pickN := &api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: &three}
	var d revision.Decision
	step := func(prev published, next *schedule.Decision, rev int64, wantBase bool, wantChanges int) {
		t.Helper()
		pieces, err := decisionPieces(r, prev, next, rev, false)
		if err != nil {
			t.Fatal(err)
		}
		if pieces[0].Base != wantBase || len(pieces[0].Clusters) != wantChanges {
			t.Errorf("revision %d: base %v with %d clusters, want base %v with %d", rev, pieces[0].Base, len(pieces[0].Clusters), wantBase, wantChanges)
		}
		if err := d.Apply(pieces); err != nil {
			t.Fatal(err)
		}
		if got, want := len(d.Chosen), len(next.Chosen); got != want {
			t.Errorf("revision %d: %d chosen, want %d", rev, got, want)
		}
		for i, c := range next.Chosen {
			if d.Chosen[i].Cluster != c.Cluster {
				t.Errorf("revision %d: chosen %v", rev, d.Chosen)
			}
		}
	}
	ten := fleetOf(t, 10) // member 3 is tainted
	first := decide(t, pickN, ten, nil)
	step(published{}, first, 1, true, 3)
	// The same decision for a new generation: a base.
	r.generation = 2
	step(published{first, 1}, first, 2, true, 3)
	// A chosen member leaves: removed and replaced, 2 changes of 3.
	nine := fleetOf(t, 10).Without(first.Chosen[0].Cluster)
	second := decide(t, pickN, nine, first)
	step(published{first, 2}, second, 3, false, 2)
	if d.RemovalReason(first.Chosen[0].Cluster) == "" {
		t.Errorf("the removed cluster has no reason: %+v", d.Removed)
	}
}
