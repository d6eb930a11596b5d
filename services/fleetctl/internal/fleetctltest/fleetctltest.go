// Package fleetctltest holds what fleetctl's printer and command tests share:
// the fleet of seed 000 as the status service reports it (placements.yaml and
// members.yaml), and the decoding of such YAML fixtures.
package fleetctltest

import (
	_ "embed"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/events/api"
)

var (
	//go:embed placements.yaml
	placements string
	//go:embed members.yaml
	members string
)

// Placements are the fleet's placements as the status service reports them.
func Placements(t testing.TB) []api.ClusterResourcePlacement {
	t.Helper()
	return Decode[api.ClusterResourcePlacement](t, "placements.yaml", placements)
}

// Members are the fleet's members as the status service reports them.
func Members(t testing.TB) []api.MemberCluster {
	t.Helper()
	return Decode[api.MemberCluster](t, "members.yaml", members)
}

// Decode decodes the YAML documents of text (named name in failures), each a T.
func Decode[T any](t testing.TB, name, text string) []T {
	t.Helper()
	docs, err := api.DecodeAll(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out []T
	for _, d := range docs {
		obj, ok := any(d.Object).(*T)
		if !ok {
			t.Fatalf("%s holds a %T", name, d.Object)
		}
		out = append(out, *obj)
	}
	return out
}
