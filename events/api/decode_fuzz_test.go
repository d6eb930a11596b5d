package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// fuzzInputLimit keeps the fuzzers on inputs of a manifest's size: larger
// ones only slow the search down.
const fuzzInputLimit = 64 << 10

// addSeedFiles adds every file matching the patterns to the seed corpus.
func addSeedFiles(f *testing.F, patterns ...string) {
	f.Helper()
	n := 0
	for _, p := range patterns {
		files, err := filepath.Glob(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
			n++
		}
	}
	if n == 0 {
		f.Fatalf("no seed files match %q", patterns)
	}
}

// addDecodeSeeds seeds a decoder of manifests: the seed blocks and the shapes
// the decoder treats specially.
func addDecodeSeeds(f *testing.F) {
	addSeedFiles(f, "testdata/seeds/*")
	for _, s := range []string{
		"",
		rpYAML, // namespaced, and keyed apart from ClusterResourcePlacements
		"---\n---\n",
		"# apiVersion: v1\n",
		`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},3]}`,
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  annotations:\n    kubernetes-fleet.io/envelope-configmap: \"true\"\ndata:\n  a.yaml: |\n    apiVersion: v1\n    kind: Secret\n    metadata: {name: s}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: &m\n  name: a\nb: *m\nc: {<<: *m}\n",
		"apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourceEnvelope\nmetadata: {name: e}\ndata:\n  r.yaml: {apiVersion: v1, kind: Namespace, metadata: {name: n}}\n",
		"apiVersion: cluster.kubernetes-fleet.io/v1beta1\nkind: MemberCluster\nmetadata: {name: m}\nspec: {heartbeatPeriodSeconds: yes}\n",
		"apiVersion: placement.kubernetes-fleet.io/v1\nkind: Work\n",
	} {
		f.Add([]byte(s))
	}
}

// FuzzDecodeAll decodes arbitrary bytes as fleetctl reads a file. Whatever the
// input: no panic, no hang; the error is one *DocumentError per failed
// document; every decoded object defaults and validates without panicking,
// each problem at a field path; Decode agrees with DecodeAll; and a valid
// object survives JSON (event payloads) and decodes to itself again.
func FuzzDecodeAll(f *testing.F) {
	addDecodeSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > fuzzInputLimit {
			return
		}
		docs, err := DecodeAll(bytes.NewReader(data))
		checkDocumentErrors(t, err)
		for i, d := range docs {
			if d.Object == nil {
				t.Fatalf("document %d decoded to a nil object", i)
			}
			if d.Line < 1 {
				t.Errorf("document %d starts at line %d", i, d.Line)
			}
			if i > 0 && (d.Index < docs[i-1].Index || d.Index == docs[i-1].Index && d.Item <= docs[i-1].Item) {
				t.Errorf("documents out of order: %d/%d after %d/%d", d.Index, d.Item, docs[i-1].Index, docs[i-1].Item)
			}
		}

		one, oneErr := Decode(data)
		switch {
		case err == nil && len(docs) == 1:
			if oneErr != nil || !reflect.DeepEqual(one, docs[0].Object) {
				t.Fatalf("Decode = %v, %v; DecodeAll decoded one object %v", one, oneErr, docs[0].Object)
			}
		case oneErr == nil:
			t.Fatalf("Decode succeeded where DecodeAll gave %d documents and error %v", len(docs), err)
		case one != nil:
			t.Fatalf("Decode returned both %v and error %v", one, oneErr)
		}

		for _, d := range docs {
			obj := d.Object
			Default(obj)
			again := deepCopyObject(t, obj)
			Default(again)
			if !reflect.DeepEqual(obj, again) {
				t.Errorf("defaulting is not idempotent for %T", obj)
			}
			errs := Validate(obj)
			checkFieldErrors(t, errs)
			if len(errs) == 0 {
				checkRoundTrip(t, obj)
			}
		}
	})
}

// checkDocumentErrors checks the contract of DecodeAll's error: nil, or
// joined *DocumentError values that each say something.
func checkDocumentErrors(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, e := range errs {
		var de *DocumentError
		if !errors.As(e, &de) {
			t.Fatalf("error %q (%T) is not a *DocumentError", e, e)
		}
		if de.Err == nil || de.Error() == "" {
			t.Fatalf("document error without a cause: %+v", de)
		}
		var list ErrorList
		if errors.As(de.Err, &list) {
			if len(list) == 0 {
				t.Fatalf("document error with an empty ErrorList: %+v", de)
			}
			for _, fe := range list {
				if fe.Detail == "" {
					t.Errorf("field error without detail: %+v", fe)
				}
			}
		}
	}
}

// checkFieldErrors checks that every validation problem names its field.
func checkFieldErrors(t *testing.T, errs ErrorList) {
	t.Helper()
	for _, e := range errs {
		if e == nil {
			t.Fatal("nil field error")
		}
		if e.Field == "" || e.Detail == "" || e.Type == "" {
			t.Errorf("validation problem without a field path, type or detail: %+v", *e)
		}
	}
}

// checkRoundTrip checks that a valid object's JSON decodes to the same object.
func checkRoundTrip(t *testing.T, obj Object) {
	t.Helper()
	out, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("encode %T: %v", obj, err)
	}
	back, err := Decode(out)
	if err != nil {
		t.Fatalf("decode own JSON of a valid %T: %v\n%s", obj, err, out)
	}
	Default(back)
	if !reflect.DeepEqual(normalised(t, back), normalised(t, obj)) {
		t.Fatalf("JSON round trip changed the %T:\n%s\nback: %s", obj, out, mustJSON(t, back))
	}
}

// normalised is an object as JSON sees it: unstructured objects compare by
// their JSON (numbers decode as int64 or float64 depending on their text).
func normalised(t *testing.T, obj Object) any {
	t.Helper()
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return mustJSON(t, u)
	}
	return obj
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func deepCopyObject(t *testing.T, obj Object) Object {
	t.Helper()
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		return o.DeepCopy()
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(Object)
	if err := json.Unmarshal([]byte(mustJSON(t, obj)), out); err != nil {
		t.Fatalf("copy %T: %v", obj, err)
	}
	// Placeholders do not travel in JSON.
	if f := reflect.ValueOf(obj).Elem().FieldByName("Placeholders"); f.IsValid() {
		reflect.ValueOf(out).Elem().FieldByName("Placeholders").Set(f)
	}
	return out
}

// FuzzEnvelopeContents reads arbitrary bytes as one entry of each kind of
// envelope. Unwrapping and validation agree: an entry validation accepts
// unwraps, and one it rejects does not; what unwraps identifies an object.
func FuzzEnvelopeContents(f *testing.F) {
	addSeedFiles(f, "testdata/seeds/*")
	for _, s := range []string{
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"}}`,
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n  namespace: app\n",
		`"just a string"`, "null", "[]", "---\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > fuzzInputLimit {
			return
		}
		cm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "env", "namespace": "app",
				"annotations": map[string]any{EnvelopeConfigMapAnnotation: "true"}},
			"data": map[string]any{"entry.yaml": string(data)},
		}}
		cre := &ClusterResourceEnvelope{Data: map[string]runtime.RawExtension{"entry.yaml": {Raw: data}}}
		cre.Name = "env"
		re := &ResourceEnvelope{Data: map[string]runtime.RawExtension{"entry.yaml": {Raw: data}}}
		re.Name, re.Namespace = "env", "app"

		for _, env := range []Object{cm, cre, re} {
			if !IsEnvelope(env) {
				t.Fatalf("%T is not an envelope", env)
			}
			objs, id, err := EnvelopeContents(env)
			if id.Name != "env" {
				t.Errorf("envelope identifier %+v does not name the envelope", id)
			}
			errs := Validate(env)
			checkFieldErrors(t, errs)
			entryRejected := false
			for _, e := range errs {
				if strings.HasPrefix(e.Field, "data[entry.yaml]") && e.Type == ErrorTypeInvalid && !strings.HasPrefix(e.Field, "data[entry.yaml].") {
					entryRejected = true
				}
			}
			if (err != nil) != entryRejected {
				t.Fatalf("%T: EnvelopeContents error %v, but validation %v", env, err, errs)
			}
			if err != nil {
				if objs != nil {
					t.Fatalf("EnvelopeContents returned objects and error %v", err)
				}
				continue
			}
			if len(objs) != 1 {
				t.Fatalf("one entry unwrapped into %d objects", len(objs))
			}
			u := objs[0]
			if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
				t.Fatalf("unwrapped an object without apiVersion, kind or name: %v", u.Object)
			}
		}
	})
}

// FuzzStripServerFields strips arbitrary manifests: stripping is idempotent,
// reports whether it removed anything, and never adds.
func FuzzStripServerFields(f *testing.F) {
	addSeedFiles(f, "testdata/seeds/*.json")
	f.Add([]byte(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","uid":"1","annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}"}},"spec":{"clusterIP":"10.0.0.1","template":{"metadata":{"creationTimestamp":null}}},"status":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > fuzzInputLimit {
			return
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return
		}
		before := mustJSON(t, u.Object)
		removed := StripServerFields(u)
		after := mustJSON(t, u.Object)
		if removed != (before != after) {
			t.Fatalf("StripServerFields reported %v, but the object went from %s to %s", removed, before, after)
		}
		if len(after) > len(before) {
			t.Fatalf("stripping grew the object from %s to %s", before, after)
		}
		if StripServerFields(u) {
			t.Fatalf("a second strip removed more from %s", after)
		}
	})
}
