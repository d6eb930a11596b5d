package events_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-dev/flotilla/events"
)

// fuzzTypes is the catalogue in a fixed order, so that a fuzzed index names
// the same type from run to run.
func fuzzTypes() []string {
	types := events.Types()
	slices.Sort(types)
	return types
}

// payloadEvent is an event of type typ carrying data as it came off the bus.
func payloadEvent(t *testing.T, typ string, data []byte) cloudevents.Event {
	t.Helper()
	ev := cloudevents.New()
	ev.SetID("fuzz")
	ev.SetSource("/fuzz")
	ev.SetType(typ)
	if err := ev.SetData("application/json", data); err != nil {
		t.Fatal(err)
	}
	return ev
}

// FuzzDecodePayload decodes arbitrary data as the payload of every event type
// (typ indexes the sorted catalogue). Decode returns a payload or an error
// wrapping ErrInvalidPayload, never both nor neither; Validate agrees with it;
// and a payload it accepts encodes to JSON that decodes and validates again
// and encodes to the same bytes, so a consumer can republish what it read.
func FuzzDecodePayload(f *testing.F) {
	types := fuzzTypes()
	for i, typ := range types {
		data, err := os.ReadFile(goldenPath(typ))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), data)
		f.Add(uint8(i), []byte(`{}`))
	}
	f.Add(uint8(0), []byte(`null`))
	f.Add(uint8(1), []byte(`{"name":"a"} trailing`))
	f.Fuzz(func(t *testing.T, typ uint8, data []byte) {
		if len(data) > 64<<10 {
			return
		}
		ev := payloadEvent(t, types[int(typ)%len(types)], data)
		p, err := events.Decode(ev)
		switch {
		case err != nil && p != nil:
			t.Fatalf("Decode returned a payload and error %v", err)
		case err == nil && p == nil:
			t.Fatal("Decode returned neither a payload nor an error")
		case err != nil && !errors.Is(err, events.ErrInvalidPayload):
			t.Fatalf("error %v does not wrap ErrInvalidPayload", err)
		}
		if verr := events.Validate(ev); (verr == nil) != (err == nil) {
			t.Fatalf("Validate says %v where Decode says %v", verr, err)
		}
		if err != nil {
			return
		}

		out, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("encode a decoded %T: %v", p, err)
		}
		again, err := events.Decode(payloadEvent(t, ev.Type(), out))
		if err != nil {
			t.Fatalf("the JSON of a decoded %T does not decode: %v\n%s", p, err, out)
		}
		out2, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, out2) {
			t.Fatalf("decode -> encode -> decode is not stable for %s:\n%s\n%s", ev.Type(), out, out2)
		}
		if _, err := events.New(ev.Type(), "/fuzz", "", "", p); err != nil {
			t.Fatalf("a decoded %T cannot be published again: %v", p, err)
		}
	})
}

// decodeQuery decodes a query request as the status service does (its
// answer function): an empty body is the zero query.
func decodeQuery[Q any](data []byte) (Q, error) {
	var q Q
	if len(bytes.TrimSpace(data)) > 0 {
		if err := json.Unmarshal(data, &q); err != nil {
			return q, err
		}
	}
	return q, nil
}

// queryRoundTrip decodes data as a Q, and checks that what decodes encodes
// to JSON that decodes to the same request.
func queryRoundTrip[Q comparable](t *testing.T, data []byte) (Q, bool) {
	t.Helper()
	q, err := decodeQuery[Q](data)
	if err != nil {
		return q, false
	}
	out, err := json.Marshal(q)
	if err != nil {
		t.Fatalf("encode %T: %v", q, err)
	}
	back, err := decodeQuery[Q](out)
	if err != nil || back != q {
		t.Fatalf("%T round trip: %+v -> %s -> %+v, %v", q, q, out, back, err)
	}
	return q, true
}

// FuzzQueryRequest decodes arbitrary bytes as each query request (endpoint
// picks NameQuery, ListQuery or TakeoverQuery), as the status service reads
// them: what decodes re-encodes to the same request, and a list query's label
// selector, when it parses, prints as a selector that parses to the same
// selector (fleetctl shows it, the service matches with it).
func FuzzQueryRequest(f *testing.F) {
	for _, s := range []string{``, ` `, `{}`, `{"name":"web-2-crp"}`, `{"labelSelector":"app=web,tier in (a,b),!canary"}`,
		`{"labelSelector":"x notin (), y"}`, `{"placement":"web","limit":100}`, `{"limit":-1}`, `null`, `[]`} {
		for e := range 5 {
			f.Add(uint8(e), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, endpoint uint8, data []byte) {
		switch endpoint % 5 {
		case 0:
			queryRoundTrip[events.NameQuery](t, data)
		case 1:
			q, ok := queryRoundTrip[events.ListQuery](t, data)
			if !ok || q.LabelSelector == "" {
				return
			}
			sel, err := labels.Parse(q.LabelSelector)
			if err != nil {
				return
			}
			again, err := labels.Parse(sel.String())
			if err != nil {
				t.Fatalf("selector %q prints as %q, which does not parse: %v", q.LabelSelector, sel.String(), err)
			}
			if again.String() != sel.String() {
				t.Fatalf("selector %q prints as %q, which parses to %q", q.LabelSelector, sel.String(), again.String())
			}
		case 2:
			queryRoundTrip[events.TakeoverQuery](t, data)
		case 3:
			queryRoundTrip[events.DisruptionKey](t, data)
		case 4:
			queryRoundTrip[events.DisruptionListQuery](t, data)
		}
	})
}

// FuzzSubjects builds every subject from arbitrary names: a name is accepted
// or refused the same way by every subject, what is accepted is one subject
// token, and SubjectNames reads the names back.
func FuzzSubjects(f *testing.F) {
	for _, s := range []string{"web-2-crp", "member-1", "a.b.c", "-", "", "a_b", "a b", "*", ">", "é.ü", "a\x00b"} {
		f.Add(s, "member-1")
	}
	f.Fuzz(func(t *testing.T, name, cluster string) {
		subjects := map[string]func(string) (string, error){
			"placement": events.PlacementSubject, "scheduling": events.SchedulingSubject, "rollout": events.RolloutSubject,
			"status": events.StatusSubject, "outbox": events.OutboxSubject,
		}
		_, tokErr := events.PlacementSubject(name)
		for kind, subject := range subjects {
			s, err := subject(name)
			if kind == "outbox" && name == "" {
				if err != nil || s != "flotilla.outbox.-" {
					t.Fatalf("OutboxSubject(\"\") = %q, %v", s, err)
				}
				continue
			}
			if (err == nil) != (tokErr == nil) {
				t.Fatalf("%s subject of %q: %v, but placement subject: %v", kind, name, err, tokErr)
			}
			if err != nil {
				continue
			}
			if got := strings.Count(s, "."); got != 2 {
				t.Fatalf("%s subject %q of %q has %d dots, want 2", kind, s, name, got)
			}
			want := name
			if name == "-" {
				want = "" // '-' stands for no placement
			}
			if p, c := events.SubjectNames(s); p != want || c != "" {
				t.Fatalf("SubjectNames(%q) = %q, %q, want %q", s, p, c, want)
			}
		}
		if s, err := events.MemberSubject(name); err == nil && name != "-" {
			if p, c := events.SubjectNames(s); p != "" || c != name {
				t.Fatalf("SubjectNames(%q) = %q, %q, want cluster %q", s, p, c, name)
			}
		}
		for _, work := range []func(string, string) (string, error){events.WorkSubject, events.WorkStatusSubject} {
			s, err := work(cluster, name)
			if err != nil || name == "-" || cluster == "-" {
				continue
			}
			if p, c := events.SubjectNames(s); p != name || c != cluster {
				t.Fatalf("SubjectNames(%q) = %q, %q, want %q, %q", s, p, c, name, cluster)
			}
		}
	})
}
