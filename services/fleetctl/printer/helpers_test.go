package printer

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// now is the clock of every printer test: fixtures were created at 11:55.
var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func clock() time.Time { return now }

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run go test -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

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
