package printer

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
)

// now is the clock of every printer test: fixtures were created at 11:55.
var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func clock() time.Time { return now }

func decodeFile[T any](t *testing.T, name string) []T {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs, err := api.DecodeAll(f)
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

func placementsFixture(t *testing.T) []api.ClusterResourcePlacement {
	return decodeFile[api.ClusterResourcePlacement](t, "placements.yaml")
}

func membersFixture(t *testing.T) []api.MemberCluster {
	return decodeFile[api.MemberCluster](t, "members.yaml")
}
