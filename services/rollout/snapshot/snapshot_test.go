package snapshot_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/services/rollout/selection"
	"github.com/flotilla-dev/flotilla/services/rollout/snapshot"
)

func objs(t *testing.T, manifests ...string) []selection.Object {
	t.Helper()
	var out []selection.Object
	for _, m := range manifests {
		o, err := selection.NewObject(json.RawMessage(m))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

const (
	ns      = `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"web","labels":{"app":"web"}}}`
	nsKeys  = `{"metadata":{"labels":{"app":"web"},"name":"web"},"kind":"Namespace","apiVersion":"v1"}`
	crd     = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"widgets.example.com"}}`
	deploy  = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"web"},"spec":{"replicas":2}}`
	deploy3 = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"web"},"spec":{"replicas":3}}`
	big     = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n","namespace":"web"},"data":{"x":"1"},"spec":{"n":12345678901234567890}}`
)

func TestHashIgnoresOrderAndFormatting(t *testing.T) {
	a, err := snapshot.Of(objs(t, deploy, ns, crd))
	if err != nil {
		t.Fatal(err)
	}
	b, err := snapshot.Of(objs(t, crd, nsKeys, deploy))
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash != b.Hash {
		t.Errorf("the same objects hash differently: %s and %s", a.Hash, b.Hash)
	}
	var kinds []string
	for _, r := range a.Resources {
		kinds = append(kinds, r.Kind)
	}
	if want := []string{"Namespace", "CustomResourceDefinition", "Deployment"}; !slices.Equal(kinds, want) {
		t.Errorf("order %v, want %v (namespaces, then CRDs, then the rest)", kinds, want)
	}
}

func TestHashChangesWithContent(t *testing.T) {
	base, _ := snapshot.Of(objs(t, ns, deploy))
	for name, set := range map[string][]string{
		"a field changed": {ns, deploy3},
		"an object less":  {ns},
		"an object more":  {ns, deploy, crd},
		"empty selection": nil,
	} {
		c, err := snapshot.Of(objs(t, set...))
		if err != nil {
			t.Fatal(err)
		}
		if c.Hash == base.Hash {
			t.Errorf("%s: hash unchanged", name)
		}
	}
}

func TestCanonicalKeepsNumbersExact(t *testing.T) {
	c, err := snapshot.Canonical(json.RawMessage(big))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"v1","data":{"x":"1"},"kind":"ConfigMap","metadata":{"name":"n","namespace":"web"},"spec":{"n":12345678901234567890}}`
	if string(c) != want {
		t.Errorf("canonical\n  %s\nwant\n  %s", c, want)
	}
}

func TestPruned(t *testing.T) {
	tests := []struct {
		indexes []int64
		limit   int
		want    []int64
	}{
		{[]int64{0, 1, 2}, 10, nil},
		{[]int64{3, 0, 2, 1}, 2, []int64{0, 1}},
		{[]int64{5, 6, 7}, 1, []int64{5, 6}},
		{[]int64{5, 6}, 0, []int64{5}}, // at least the current one is kept
	}
	for _, tt := range tests {
		if got := snapshot.Pruned(tt.indexes, tt.limit); !slices.Equal(got, tt.want) {
			t.Errorf("Pruned(%v, %d) = %v, want %v", tt.indexes, tt.limit, got, tt.want)
		}
	}
}

func TestDueAtDebouncesWithinAMaximum(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const quiet, maxWait = 50 * time.Millisecond, time.Second
	due, opened := snapshot.DueAt(nil, t0, quiet, maxWait)
	if !due.Equal(t0.Add(quiet)) || !opened.Equal(t0) {
		t.Fatalf("first change: due %v, opened %v; want a quiet period after it, window opened at it", due, opened)
	}
	// A change inside the window pushes the evaluation a quiet period on,
	// and keeps the window's start.
	due, opened = snapshot.DueAt(&opened, t0.Add(30*time.Millisecond), quiet, maxWait)
	if !due.Equal(t0.Add(80*time.Millisecond)) || !opened.Equal(t0) {
		t.Errorf("a change inside the window: due %v, opened %v", due, opened)
	}
	// A stream of changes is still evaluated maxWait after the first.
	due, _ = snapshot.DueAt(&opened, t0.Add(990*time.Millisecond), quiet, maxWait)
	if !due.Equal(t0.Add(maxWait)) {
		t.Errorf("a change near the maximum: due %v, want %v", due, t0.Add(maxWait))
	}
}
