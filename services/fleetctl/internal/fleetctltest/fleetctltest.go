// Package fleetctltest holds what fleetctl's printer and command tests share:
// the fleet of seed 000 as the status service reports it (placements.yaml and
// members.yaml), and the decoding of such YAML fixtures.
package fleetctltest

import (
	"bytes"
	_ "embed"
	"io"
	"os"
	"testing"

	"github.com/flotilla-dev/flotilla/events/api"
)

var (
	//go:embed placements.yaml
	placements []byte
	//go:embed members.yaml
	members []byte
)

// Placements are the fleet's placements as the status service reports them.
func Placements(t testing.TB) []api.ClusterResourcePlacement {
	t.Helper()
	return decode[api.ClusterResourcePlacement](t, "placements.yaml", bytes.NewReader(placements))
}

// Members are the fleet's members as the status service reports them.
func Members(t testing.TB) []api.MemberCluster {
	t.Helper()
	return decode[api.MemberCluster](t, "members.yaml", bytes.NewReader(members))
}

// Decode decodes the YAML file at path, each document a T.
func Decode[T any](t testing.TB, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return decode[T](t, path, f)
}

func decode[T any](t testing.TB, name string, r io.Reader) []T {
	t.Helper()
	docs, err := api.DecodeAll(r)
	if err != nil {
		t.Fatal(err)
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
