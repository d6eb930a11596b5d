package api

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"
)

// Typed objects survive JSON (event payloads) and YAML (fleetctl output) and
// decode strictly again: the Go types and their tags agree with the decoder.
func TestTypedObjectsRoundTrip(t *testing.T) {
	for _, file := range []string{"000-2.yaml", "001-3.completed.yaml", "001-4.completed.yaml", "003-5.completed.yaml", "004-3.reindented.yaml"} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "seeds", file))
			if err != nil {
				t.Fatal(err)
			}
			obj, err := Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			Default(obj)
			for name, marshal := range map[string]func(any) ([]byte, error){"json": json.Marshal, "yaml": sigsyaml.Marshal} {
				out, err := marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				back, err := Decode(out)
				if err != nil {
					t.Fatalf("%s: decode own output: %v\n%s", name, err, out)
				}
				if !reflect.DeepEqual(back, obj) {
					t.Errorf("%s round trip changed the object:\n%s", name, out)
				}
			}
		})
	}
}
