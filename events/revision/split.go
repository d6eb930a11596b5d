package revision

import (
	"encoding/json"
	"fmt"

	"github.com/flotilla-dev/flotilla/events"
)

// Split cuts a revision's clusters, in order, into pieces of at most
// events.MaxPieceClusters clusters each, whose JSON fits a piece of
// events.MaxPieceBytes beside an envelope (the payload with no clusters) of
// envelopeBytes. It returns at least one piece, empty when there are no
// clusters. A cluster that cannot fit a piece on its own is an error (the
// bounds on names and messages rule it out).
func Split[T any](clusters []T, envelopeBytes int) ([][]T, error) {
	budget := events.MaxPieceBytes - envelopeBytes
	out := [][]T{}
	var cur []T
	used := 0
	for i, c := range clusters {
		b, err := json.Marshal(c)
		if err != nil {
			return nil, fmt.Errorf("split: cluster %d: %w", i, err)
		}
		n := len(b) + 1 // and a comma
		if n > budget {
			return nil, fmt.Errorf("split: cluster %d is %d bytes of JSON, over the %d a piece has room for", i, len(b), budget)
		}
		if len(cur) == events.MaxPieceClusters || used+n > budget {
			out = append(out, cur)
			cur, used = nil, 0
		}
		cur = append(cur, c)
		used += n
	}
	return append(out, cur), nil
}

// EnvelopeBytes is the size of a payload's JSON without its clusters, for
// Split: p is encoded as it is, so pass it with no clusters.
func EnvelopeBytes(p any) (int, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return 0, fmt.Errorf("envelope: %w", err)
	}
	// The piece number and count may grow to a few digits more than in p.
	return len(b) + 32, nil
}

// Cut cuts a revision into its pieces: head (the payload with no clusters)
// once per piece of clusters as Split cuts them, each given its piece number,
// the number of pieces and its clusters (an empty list, never nil) by set.
func Cut[P, C any](head P, clusters []C, set func(p *P, piece, pieces int, clusters []C)) ([]P, error) {
	env, err := EnvelopeBytes(head)
	if err != nil {
		return nil, err
	}
	cut, err := Split(clusters, env)
	if err != nil {
		return nil, err
	}
	out := make([]P, len(cut))
	for i, cs := range cut {
		if cs == nil {
			cs = []C{}
		}
		out[i] = head
		set(&out[i], i, len(cut), cs)
	}
	return out, nil
}
