package manifest_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// fuzzManifests reads fuzz input as a WorkDesired's manifests: a JSON array
// of them, or else one manifest.
func fuzzManifests(data []byte) []json.RawMessage {
	var list []json.RawMessage
	if err := json.Unmarshal(data, &list); err == nil {
		return list
	}
	return []json.RawMessage{data}
}

// FuzzParse turns arbitrary manifests into the objects an apply worker
// applies. Each manifest yields objects with its index, in order; an object
// is usable (an object, a name, a wave, its Hash) or carries a reason and an
// error, never half of each; no usable object keeps owner references or
// Flotilla's marks, and no two usable objects are one member object; Parse
// is deterministic, and a usable object's JSON parses to the same identity
// and hash, so that a later run recognises what it applied; ByWave orders
// them by wave, keeping their order within one.
func FuzzParse(f *testing.F) {
	golden, err := os.ReadFile("../../../events/testdata/payloads/work.desired.v1.json")
	if err != nil {
		f.Fatal(err)
	}
	var desired events.WorkDesired
	if err := json.Unmarshal(golden, &desired); err != nil {
		f.Fatal(err)
	}
	seed, _ := json.Marshal(desired.Manifests)
	f.Add(seed)
	for _, s := range []string{
		`[{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"app","uid":"1","ownerReferences":[{"uid":"x"}],"labels":{"flotilla.dev/managed-by":"flotilla","run":"web"}},"spec":{"clusterIP":"10.0.0.1"}},{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"app"}}]`,
		`[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"env","namespace":"app","annotations":{"kubernetes-fleet.io/envelope-configmap":"true"}},"data":{"a.yaml":"apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: other\n","b.json":"{\"kind\":\"x\"}"}}]`,
		`[{"apiVersion":"placement.kubernetes-fleet.io/v1beta1","kind":"ResourceEnvelope","metadata":{"name":"e","namespace":"app"},"data":{"a":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}},"b":"kind: Namespace\napiVersion: v1\nmetadata: {name: n}","c":3}}]`,
		`[{"apiVersion":"placement.kubernetes-fleet.io/v1beta1","kind":"ClusterResourceEnvelope","metadata":{"name":"e"},"data":{"a":{"apiVersion":"placement.kubernetes-fleet.io/v1beta1","kind":"ClusterResourceEnvelope","metadata":{"name":"nested"}}}}]`,
		`[{"apiVersion":"v1","kind":"List","items":[]},{"kind":"Pod"},{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"p-"}},null,"x",[]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		manifests := fuzzManifests(data)
		objs := manifest.Parse(manifests)
		if got := describe(manifest.Parse(manifests)); got != describe(objs) {
			t.Fatalf("Parse is not deterministic:\n%s\n%s", describe(objs), got)
		}
		if len(manifests) > 0 && len(objs) == 0 {
			t.Fatalf("%d manifests gave no object at all", len(manifests))
		}
		seen := map[manifest.Key]bool{}
		for i, o := range objs {
			if o.Index < 0 || o.Index >= len(manifests) || i > 0 && o.Index < objs[i-1].Index {
				t.Fatalf("object %d has index %d (of %d manifests, after %d)", i, o.Index, len(manifests), objs[max(i-1, 0)].Index)
			}
			if (o.Err == nil) != (o.Reason == "") {
				t.Fatalf("object %d: reason %q with error %v", i, o.Reason, o.Err)
			}
			if o.Object == nil && o.Err == nil {
				t.Fatalf("object %d has neither an object nor an error", i)
			}
			if o.Err != nil {
				continue
			}
			checkUsable(t, o)
			if seen[o.Key()] {
				t.Fatalf("%s is usable twice", o.Key())
			}
			seen[o.Key()] = true
			if o.Resource.Envelope != nil {
				continue
			}
			out, err := json.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			again := manifest.Parse([]json.RawMessage{out})
			if len(again) != 1 || again[0].Err != nil || again[0].Hash != o.Hash || again[0].Resource != o.Resource {
				t.Fatalf("the JSON of usable object %s parses to %s", describe([]manifest.Object{o}), describe(again))
			}
		}

		waves := manifest.ByWave(objs, func(o manifest.Object) int { return o.Wave })
		var flat []manifest.Object
		for i, w := range waves {
			if len(w) == 0 || i > 0 && w[0].Wave <= waves[i-1][0].Wave {
				t.Fatalf("wave %d: %d objects, out of order", i, len(w))
			}
			for _, o := range w {
				if o.Wave != w[0].Wave {
					t.Fatalf("wave %d holds waves %d and %d", i, w[0].Wave, o.Wave)
				}
			}
			flat = append(flat, w...)
		}
		want := slices.Clone(objs)
		slices.SortStableFunc(want, func(a, b manifest.Object) int { return a.Wave - b.Wave })
		if describe(flat) != describe(want) {
			t.Fatalf("ByWave changed the order within a wave:\n%s\n%s", describe(flat), describe(want))
		}
	})
}

func checkUsable(t *testing.T, o manifest.Object) {
	t.Helper()
	u := o.Object
	if u == nil || o.Resource.Name == "" || o.Resource.Name != u.GetName() || o.Resource.Kind != u.GetKind() {
		t.Fatalf("usable object %s does not identify its object %v", describe([]manifest.Object{o}), u)
	}
	if o.Wave < 0 || o.Wave >= manifest.NumWaves {
		t.Fatalf("%s: wave %d", o.Key(), o.Wave)
	}
	if o.Hash == "" || o.Hash != manifest.Hash(u) {
		t.Fatalf("%s: hash %q, but the object hashes to %q", o.Key(), o.Hash, manifest.Hash(u))
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, "metadata", "ownerReferences"); found {
		t.Fatalf("%s keeps its owner references", o.Key())
	}
	for _, m := range []map[string]string{u.GetLabels(), u.GetAnnotations()} {
		for k := range m {
			if manifest.IsOwnMark(k) {
				t.Fatalf("%s keeps the mark %s", o.Key(), k)
			}
		}
	}
	stripped := u.DeepCopy()
	manifest.Strip(stripped)
	if manifest.Hash(stripped) != o.Hash {
		t.Fatalf("%s: stripping again changes the object", o.Key())
	}
}

// describe renders objects for comparison and messages.
func describe(objs []manifest.Object) string {
	var b strings.Builder
	for _, o := range objs {
		env := ""
		if o.Resource.Envelope != nil {
			env = fmt.Sprintf(" in %+v", *o.Resource.Envelope)
		}
		fmt.Fprintf(&b, "%d %s%s wave %d hash %s reason %q err %v\n", o.Index, o.Key(), env, o.Wave, o.Hash, o.Reason, o.Err)
	}
	return b.String()
}

// FuzzOwnerMarks marks an object for arbitrary placement names: a valid
// placement name gives a valid label key, and the marks read back.
func FuzzOwnerMarks(f *testing.F) {
	for _, s := range []string{"web-2-crp", "pp.default.nginx-pp", strings.Repeat("a", 63), strings.Repeat("a.", 40) + "b", strings.Repeat("x", 253), "", "UPPER"} {
		f.Add(s, "other")
	}
	f.Fuzz(func(t *testing.T, placement, other string) {
		if len(validation.IsDNS1123Subdomain(placement)) > 0 {
			return // not a placement name
		}
		key := manifest.OwnerLabel(placement)
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			t.Fatalf("OwnerLabel(%q) = %q is not a label key: %v", placement, key, errs)
		}
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		u.SetLabels(map[string]string{"app": "web"})
		manifest.SetMarks(u, []string{placement}, "abc")
		labels := u.GetLabels()
		if !manifest.OwnedBy(labels, placement) || !manifest.Owned(labels) || labels["app"] != "web" {
			t.Fatalf("marks for %q: %v", placement, labels)
		}
		tokens := manifest.OwnerTokens(labels)
		if len(tokens) != 1 || manifest.OwnerLabel(tokens[0]) != key {
			t.Fatalf("owner tokens of %q: %v", placement, tokens)
		}
		if other != placement && manifest.OwnerLabel(other) != key && manifest.OwnedBy(labels, other) {
			t.Fatalf("marks for %q also mark %q", placement, other)
		}
	})
}
