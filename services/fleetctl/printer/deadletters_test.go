package printer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/golden"
)

// deadLetterFixtures are two dead letters as fleetctl deadletters lists them.
func deadLetterFixtures() []bus.DeadLetter {
	return []bus.DeadLetter{
		{ID: 7, Consumer: "status", Stream: bus.StreamEvents, Subject: "flotilla.placement.web", Sequence: 41, Deliveries: 10,
			Reason:  `Handling event delete-web of type "io.flotilla.placement.deleted.v1" failed on all 10 deliveries; last error: relation "audit_log" does not exist (SQLSTATE 42P01).`,
			EventID: "delete-web", EventType: "io.flotilla.placement.deleted.v1", EventSource: "/flotilla/fleetctl",
			DeadAt: now.Add(-3 * time.Minute), Size: 15},
		{ID: 9, Consumer: "apply-member-1", Stream: bus.StreamWork, Subject: "flotilla.work.member-1.web", Sequence: 3, Deliveries: 1,
			Reason: "The message is not a valid CloudEvent: no ce-specversion header.",
			DeadAt: now.Add(-50 * time.Hour), Size: 9},
	}
}

// TestDeadLetters prints the list, one dead letter and the redrive outcomes in every output
// format, compared with golden files.
func TestDeadLetters(t *testing.T) {
	dls := deadLetterFixtures()
	shown := dls[0]
	shown.Headers = nats.Header{"ce-id": {"delete-web"}, "ce-type": {"io.flotilla.placement.deleted.v1"}, "ce-specversion": {"1.0"},
		"ce-source": {"/flotilla/fleetctl"}, "Content-Type": {"application/json"}}
	shown.Data = []byte(`{"name":"web"}`)
	redriven := []bus.Redriven{
		{DeadLetter: dls[0], Outcome: bus.OutcomeRedriven, NewSequence: 57},
		{DeadLetter: dls[1], Outcome: bus.OutcomeSuperseded},
	}
	all := func(o string) [3]string { return [3]string{o, o, o} }
	for _, tc := range []struct {
		name string
		// outputs of the list, show and redrive
		outputs [3]string
	}{
		{"table", all("")},
		{"wide", all("wide")},
		{"yaml", all("yaml")},
		{"json", all("json")},
		{"name", all("name")},
		{"jsonpath", [3]string{`jsonpath={range [*]}{.id}{"\t"}{.consumer}{"\t"}{.reason}{"\n"}{end}`,
			`jsonpath={.eventId}{"\t"}{.data.name}{"\n"}`, `jsonpath={range [*]}{.id}{"\t"}{.outcome}{"\n"}{end}`}},
		{"jsonpath-as-json", [3]string{`jsonpath-as-json={[*].eventId}`, `jsonpath-as-json={.headers}`, `jsonpath-as-json={[*].newSequence}`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var outs [3]Output
			for i, o := range tc.outputs {
				var err error
				if outs[i], err = ParseOutput(o); err != nil {
					t.Fatal(err)
				}
			}
			var list, show, redrive bytes.Buffer
			if err := (Printer{Output: outs[0], Now: clock}).DeadLetters(&list, dls); err != nil {
				t.Fatal(err)
			}
			if err := (Printer{Output: outs[1], Now: clock}).DeadLetter(&show, &shown); err != nil {
				t.Fatal(err)
			}
			if err := (Printer{Output: outs[2], Now: clock}).Redriven(&redrive, redriven); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "testdata/golden/deadletters-"+tc.name+".txt", list.Bytes())
			golden.Check(t, "testdata/golden/deadletter-show-"+tc.name+".txt", show.Bytes())
			golden.Check(t, "testdata/golden/deadletters-redrive-"+tc.name+".txt", redrive.Bytes())
		})
	}
}

func TestNoDeadLettersIsAnEmptyListInStructuredFormats(t *testing.T) {
	var buf bytes.Buffer
	if err := (Printer{Output: Output{Format: JSON}}).DeadLetters(&buf, nil); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(buf.String()) != "[]" {
		t.Errorf("no dead letters as JSON: %q", buf.String())
	}
}

// TestShowRedactsSecrets: a dead-lettered hub resource or work that carries a Secret is
// shown without the Secret's values, in every format; a payload that is not JSON is shown
// in base64.
func TestShowRedactsSecrets(t *testing.T) {
	secret := `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db"},"data":{"password":"aHVudGVyMg=="},"stringData":{"token":"hunter2"}}`
	for name, data := range map[string]string{
		"hub resource": `{"manifest":` + secret + `}`,
		"work":         `{"cluster":"member-1","placement":"web","manifests":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"v"}},` + secret + `]}`,
	} {
		for _, format := range []Format{Table, YAML, JSON} {
			var buf bytes.Buffer
			dl := bus.DeadLetter{ID: 1, Consumer: "rollout", Data: []byte(data), Size: len(data)}
			if err := (Printer{Output: Output{Format: format}, Now: clock}).DeadLetter(&buf, &dl); err != nil {
				t.Fatal(err)
			}
			out := buf.String()
			if strings.Contains(out, "aHVudGVyMg==") || strings.Contains(out, "hunter2") {
				t.Errorf("%s, %s: a Secret value is shown:\n%s", name, format, out)
			}
			if !strings.Contains(out, redacted) {
				t.Errorf("%s, %s: no sign of redaction:\n%s", name, format, out)
			}
			if name == "work" && !strings.Contains(out, `"k": "v"`) && !strings.Contains(out, "k: v") {
				t.Errorf("%s, %s: the ConfigMap's data is gone too:\n%s", name, format, out)
			}
		}
	}
	var buf bytes.Buffer
	dl := bus.DeadLetter{ID: 2, Data: []byte("\xff\x00 not an event")}
	if err := (Printer{Output: Output{Format: JSON}}).DeadLetter(&buf, &dl); err != nil {
		t.Fatal(err)
	}
	var v DeadLetterView
	if err := json.Unmarshal(buf.Bytes(), &v); err != nil || v.DataBase64 != "/wAgbm90IGFuIGV2ZW50" {
		t.Errorf("binary payload: %s (%v)", buf.String(), err)
	}
}
