package printer

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// replySeed turns a golden List (kubectl's -o json of several objects) into
// the query reply the status service sends for it.
func replySeed(f *testing.F, file string) []byte {
	f.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		f.Fatal(err)
	}
	var list struct{ Items []json.RawMessage }
	if err := json.Unmarshal(data, &list); err != nil {
		f.Fatalf("%s: %v", file, err)
	}
	out, err := json.Marshal(map[string]any{"result": list.Items})
	if err != nil {
		f.Fatal(err)
	}
	return out
}

// FuzzPrintReply prints an arbitrary query reply of the status service
// (kind picks placements, members, a history or takeovers), decoded as
// fleetctl decodes it, in every output format, with an arbitrary jsonpath
// template. Nothing panics; JSON output is JSON, and YAML output says the
// same as the JSON output.
func FuzzPrintReply(f *testing.F) {
	placements := replySeed(f, "testdata/golden/placements-json.txt")
	members := replySeed(f, "testdata/golden/members-json.txt")
	history, err := os.ReadFile("testdata/golden/history-json.txt")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(0), placements, "{.items[*].metadata.name}")
	f.Add(uint8(0), placements, "{range .items[*]}{.status.placementStatuses[0].clusterName}{\"\\n\"}{end}")
	f.Add(uint8(1), members, "{.items[0].status.properties}")
	f.Add(uint8(2), []byte(`{"result":`+string(history)+`}`), "{.decisions[?(@.action==\"added\")].cluster}")
	f.Add(uint8(3), []byte(`{"result":[{"placement":"web","cluster":"m1","resource":{"version":"v1","kind":"Namespace","name":"web"},"mode":"IfNoDiff","comparison":"PartialComparison","outcome":"NotTakenOver","diffs":[{"path":"/data/a","valueInMember":"1","valueInHub":"2"}],"decidedAt":"2026-11-21T11:55:00Z"}]}`), "{..cluster}")
	f.Add(uint8(0), []byte(`{"result":[{"metadata":{"name":"x\n\ty"},"status":{"conditions":[{"type":"","status":"","lastTransitionTime":null}],"placementStatuses":[{}]}}]}`), "{")
	f.Fuzz(func(t *testing.T, kind uint8, data []byte, template string) {
		if len(data) > 64<<10 || len(template) > 1<<10 {
			return
		}
		var print func(Printer, *bytes.Buffer) error
		switch kind % 4 {
		case 0:
			crps, ok := decodeReply[[]api.ClusterResourcePlacement](data)
			if !ok {
				return
			}
			print = func(p Printer, w *bytes.Buffer) error {
				if p.Output.Format == Table {
					for i := range crps {
						if err := p.DescribePlacement(w, &crps[i]); err != nil {
							return err
						}
					}
				}
				return p.Placements(w, crps, len(crps) == 1)
			}
		case 1:
			ms, ok := decodeReply[[]api.MemberCluster](data)
			if !ok {
				return
			}
			print = func(p Printer, w *bytes.Buffer) error {
				if p.Output.Format == Table {
					for i := range ms {
						if err := p.DescribeMember(w, &ms[i]); err != nil {
							return err
						}
					}
				}
				return p.Members(w, ms, len(ms) == 1)
			}
		case 2:
			h, ok := decodeReply[events.PlacementHistory](data)
			if !ok {
				return
			}
			print = func(p Printer, w *bytes.Buffer) error { return p.History(w, &h) }
		case 3:
			records, ok := decodeReply[[]events.TakeoverRecord](data)
			if !ok {
				return
			}
			print = func(p Printer, w *bytes.Buffer) error { return p.Takeovers(w, records) }
		}

		outputs := map[Format][]byte{}
		for _, o := range []Output{{Format: Table}, {Format: Wide}, {Format: Name}, {Format: JSON}, {Format: YAML},
			{Format: JSONPath, Template: template}, {Format: JSONPathAsJSON, Template: template}} {
			var buf bytes.Buffer
			p := Printer{Output: o, Now: clock}
			err := print(p, &buf)
			// Templates may not parse; history and takeovers have no names.
			if err != nil && o.Format != JSONPath && o.Format != JSONPathAsJSON && (o.Format != Name || kind%4 < 2) {
				t.Fatalf("print as %s: %v", o.Format, err)
			}
			outputs[o.Format] = buf.Bytes()
		}
		if js := outputs[JSON]; len(js) > 0 {
			if !json.Valid(js) {
				t.Fatalf("JSON output is not JSON:\n%s", js)
			}
			fromYAML, err := yaml.YAMLToJSON(outputs[YAML])
			if err != nil {
				t.Fatalf("YAML output does not parse: %v\n%s", err, outputs[YAML])
			}
			var a, b any
			if err := json.Unmarshal(js, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(fromYAML, &b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("YAML output says something else than JSON output:\n%s\n%s", js, outputs[YAML])
			}
		}
	})
}

// decodeReply decodes a reply's result as fleetctl's query client does.
func decodeReply[T any](data []byte) (T, bool) {
	var reply events.QueryReply[T]
	if err := json.Unmarshal(data, &reply); err != nil || reply.Error != "" {
		return reply.Result, false
	}
	return reply.Result, true
}

// Found by FuzzPrintReply: a string holding DEL or a C1 control character
// (which encoding/json leaves as is) made -o yaml fail with "yaml: control
// characters are not allowed"; a member's error message can hold one.
func TestYAMLPrintsControlCharacters(t *testing.T) {
	m := api.MemberCluster{}
	m.Name = "member-1"
	m.Annotations = map[string]string{"note": "a\x7fb\u0080c\u0085d\u009fe\ufffff"}
	var buf bytes.Buffer
	if err := (Printer{Output: Output{Format: YAML}, Now: clock}).Members(&buf, []api.MemberCluster{m}, true); err != nil {
		t.Fatal(err)
	}
	var back api.MemberCluster
	if err := yaml.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("%v\n%s", err, buf.Bytes())
	}
	if got := back.Annotations["note"]; got != m.Annotations["note"] {
		t.Errorf("note = %q, want %q", got, m.Annotations["note"])
	}
}
