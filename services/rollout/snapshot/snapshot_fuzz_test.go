package snapshot_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/flotilla-dev/flotilla/services/rollout/selection"
	"github.com/flotilla-dev/flotilla/services/rollout/snapshot"
)

// FuzzCanonical re-encodes arbitrary JSON as the hub store and snapshots do.
// The canonical form is valid JSON, canonical again (so equal content gives
// equal bytes and one hash), and numbers keep their text; a snapshot's
// content does not depend on the order the objects came in.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{ns, nsKeys, crd, deploy,
		`{"b":1e400,"a":[1.0,-0,12345678901234567890],"c":"\u003c\ud800"}`, `[]`, `"x"`, `null`, `{"a":1} trailing`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := snapshot.Canonical(data)
		if err != nil {
			if c != nil {
				t.Fatalf("Canonical returned %s and error %v", c, err)
			}
			return
		}
		if !json.Valid(c) {
			t.Fatalf("Canonical(%q) = %q is not JSON", data, c)
		}
		again, err := snapshot.Canonical(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("Canonical is not stable: %q -> %q -> %q, %v", data, c, again, err)
		}
		if snapshot.Hash([]json.RawMessage{c}) != snapshot.Hash([]json.RawMessage{again}) {
			t.Fatal("equal canonical manifests hash differently")
		}

		o, err := selection.NewObject(data)
		if err != nil {
			return
		}
		others, err := selection.NewObject(json.RawMessage(ns))
		if err != nil {
			t.Fatal(err)
		}
		if selection.Key(o.ID) == selection.Key(others.ID) {
			return // a selection holds one object per identity
		}
		objs := []selection.Object{o, others}
		a, errA := snapshot.Of(objs)
		slices.Reverse(objs)
		b, errB := snapshot.Of(objs)
		if (errA == nil) != (errB == nil) || a.Hash != b.Hash || len(a.Manifests) != len(b.Manifests) {
			t.Fatalf("snapshot content depends on order: %s, %v; %s, %v", a.Hash, errA, b.Hash, errB)
		}
	})
}
