package revision_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/revision"
)

func setProgress(p *events.RolloutProgressedV2, piece, pieces int, cs []events.ClusterProgress) {
	p.Piece, p.Pieces, p.Clusters = piece, pieces, cs
}

// TestCutNumbersThePiecesOfTheHead cuts more clusters than a piece holds:
// every piece is the head with its number, the count and its clusters, in
// order.
func TestCutNumbersThePiecesOfTheHead(t *testing.T) {
	head := events.RolloutProgressedV2{Placement: "web", Revision: 7, Base: true, ClusterCount: events.MaxPieceClusters + 1}
	clusters := make([]events.ClusterProgress, events.MaxPieceClusters+1)
	for i := range clusters {
		clusters[i] = events.ClusterProgress{Cluster: "member-" + strings.Repeat("x", i%7)}
	}
	out, err := revision.Cut(head, clusters, setProgress)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 {
		t.Fatalf("%d pieces, want 2", len(out))
	}
	n := 0
	for i, p := range out {
		if p.Piece != i || p.Pieces != 2 || p.Placement != "web" || p.Revision != 7 || !p.Base {
			t.Errorf("piece %d: %+v", i, p.Part())
		}
		for _, c := range p.Clusters {
			if c != clusters[n] {
				t.Fatalf("piece %d holds %+v at %d, want %+v", i, c, n, clusters[n])
			}
			n++
		}
	}
	if n != len(clusters) {
		t.Errorf("the pieces hold %d clusters, want %d", n, len(clusters))
	}
}

// TestCutOfNoClusters is one piece whose clusters encode as an empty list.
func TestCutOfNoClusters(t *testing.T) {
	out, err := revision.Cut(events.RolloutProgressedV2{Placement: "web", Revision: 1}, nil, setProgress)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Piece != 0 || out[0].Pieces != 1 {
		t.Fatalf("Cut of no clusters = %+v, want one piece", out)
	}
	b, err := json.Marshal(out[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"clusters":[]`) {
		t.Errorf("piece of no clusters encodes as %s, want an empty clusters list", b)
	}
}
