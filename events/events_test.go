package events_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/harness/golden"
)

func goldenPath(typ string) string {
	return "testdata/payloads/" + strings.TrimPrefix(typ, "io.flotilla.") + ".json"
}

// TestGoldenPayloads checks that every event type has a golden example and
// that each example round-trips: JSON -> payload -> JSON is unchanged, and the
// payload decodes strictly through an event.
func TestGoldenPayloads(t *testing.T) {
	ex := examples()
	for _, typ := range events.Types() {
		if _, ok := ex[typ]; !ok {
			t.Errorf("event type %s has no example payload", typ)
		}
	}
	for typ, payload := range ex {
		t.Run(typ, func(t *testing.T) {
			want, err := json.MarshalIndent(payload, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, '\n')
			if !golden.Check(t, goldenPath(typ), want) {
				t.Fatalf("payload %s changed; a published type must not change (add a new version), or run -update if this is intended", typ)
			}

			var raw json.RawMessage = want
			ev, err := events.New(typ, "/flotilla/test", "subject", events.ID("golden", typ), raw)
			if err != nil {
				t.Fatalf("new event from golden file: %v", err)
			}
			decoded, err := events.Decode(ev)
			if err != nil {
				t.Fatalf("decode golden payload: %v", err)
			}
			if got := reflect.TypeOf(decoded).Elem(); got != reflect.TypeOf(payload) {
				t.Fatalf("decoded %s into %v, want %v", typ, got, reflect.TypeOf(payload))
			}
			again, err := json.MarshalIndent(decoded, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(append(again, '\n'), want) {
				t.Fatalf("golden payload does not round-trip:\n got %s\nwant %s", again, want)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	ev, err := events.New(events.TypePlacementDeleted, "/test", "s", "", events.PlacementDeleted{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		typ  string
		data string
		want error
		msg  string
	}{
		{"unknown type", "io.flotilla.placement.exploded.v1", `{"name":"x"}`, events.ErrUnknownType, "io.flotilla.placement.exploded.v1"},
		{"unknown field", events.TypePlacementDeleted, `{"name":"x","colour":"red"}`, events.ErrInvalidPayload, `unknown field "colour"`},
		{"not json", events.TypePlacementDeleted, `name: x`, events.ErrInvalidPayload, "data"},
		{"rule broken", events.TypePlacementDeleted, `{"name":""}`, events.ErrInvalidPayload, "name: required"},
		{"bad leave policy", events.TypeMemberLeft, `{"name":"m","leavePolicy":"Evaporate"}`, events.ErrInvalidPayload, `"Evaporate" is not Keep or Delete`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ev.Clone()
			e.SetType(tt.typ)
			e.DataEncoded = []byte(tt.data)
			err := events.Validate(e)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Validate() = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Validate() = %q, want it to mention %q", err, tt.msg)
			}
		})
	}
}

func TestNewRejectsUnknownType(t *testing.T) {
	_, err := events.New("io.flotilla.nothing.v1", "/test", "s", "", struct{}{})
	if !errors.Is(err, events.ErrUnknownType) {
		t.Fatalf("New() = %v, want ErrUnknownType", err)
	}
}

func TestIDIsDeterministic(t *testing.T) {
	a, b := events.ID("work", "member-1", "web", "4"), events.ID("work", "member-1", "web", "4")
	if a != b {
		t.Fatalf("ID not deterministic: %s != %s", a, b)
	}
	if c := events.ID("work", "member-1", "web4"); c == a {
		t.Fatal("ID collides when parts are joined differently")
	}
}

func TestSubjectsScopePerCluster(t *testing.T) {
	work, err := events.WorkSubject("member.eu-1", "web")
	if err != nil {
		t.Fatal(err)
	}
	status, err := events.WorkStatusSubject("member.eu-1", "web")
	if err != nil {
		t.Fatal(err)
	}
	member, err := events.MemberSubject("member.eu-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{work, status, member} {
		toks := strings.Split(s, ".")
		if !slices.Contains(toks, "member_eu-1") {
			t.Errorf("subject %s does not carry the cluster as one token", s)
		}
	}
	if _, err := events.PlacementSubject("a*b"); err == nil {
		t.Error("a name with a wildcard made a subject")
	}
}

// SubjectNames reads back what the subject functions put in.
func TestSubjectNames(t *testing.T) {
	must := func(s string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		subject            string
		placement, cluster string
	}{
		{must(events.PlacementSubject("web.v2")), "web.v2", ""},
		{must(events.SchedulingSubject("web")), "web", ""},
		{must(events.RolloutSubject("web")), "web", ""},
		{must(events.StatusSubject("web")), "web", ""},
		{must(events.OutboxSubject("web")), "web", ""},
		{must(events.OutboxSubject("")), "", ""},
		{must(events.MemberSubject("member.eu-1")), "", "member.eu-1"},
		{must(events.HeartbeatSubject("member.eu-1")), "", "member.eu-1"},
		{must(events.WorkSubject("member.eu-1", "web")), "web", "member.eu-1"},
		{must(events.WorkStatusSubject("member-1", "web.v2")), "web.v2", "member-1"},
		{must(events.WorkRemovedSubject("member.eu-1", "web.v2")), "web.v2", "member.eu-1"},
		{must(events.HubResourceSubject("apps", "Deployment", "shop", "web")), "", ""},
		{"elsewhere.work.member-1.web", "", ""},
	}
	for _, tt := range tests {
		p, c := events.SubjectNames(tt.subject)
		if p != tt.placement || c != tt.cluster {
			t.Errorf("SubjectNames(%q) = %q, %q; want %q, %q", tt.subject, p, c, tt.placement, tt.cluster)
		}
	}
}

// New checks a payload of its type's Go type by the type's rules without decoding it
// again: for every example, New of the value and of a pointer to it gives the event New
// of its JSON gives, and an example made to break a rule (an empty name) is refused
// both ways alike.
func TestNewChecksTypedPayloadsAsItDecodes(t *testing.T) {
	for typ, payload := range examples() {
		t.Run(typ, func(t *testing.T) {
			raw, err := json.Marshal(payload)
			if err != nil {
				t.Fatal(err)
			}
			fromJSON, err := events.New(typ, "/test", "s", "id", json.RawMessage(raw))
			if err != nil {
				t.Fatalf("New of the JSON: %v", err)
			}
			ptr := reflect.New(reflect.TypeOf(payload))
			ptr.Elem().Set(reflect.ValueOf(payload))
			for name, p := range map[string]any{"value": payload, "pointer": ptr.Interface()} {
				ev, err := events.New(typ, "/test", "s", "id", p)
				if err != nil {
					t.Fatalf("New of the %s: %v", name, err)
				}
				if !bytes.Equal(ev.Data(), fromJSON.Data()) {
					t.Errorf("New of the %s carries %s, of the JSON %s", name, ev.Data(), fromJSON.Data())
				}
			}
			// Blank every string field named like a name: a rule should refuse some.
			broken := reflect.New(reflect.TypeOf(payload)).Elem()
			broken.Set(reflect.ValueOf(payload))
			blankNames(broken)
			brokenRaw, _ := json.Marshal(broken.Interface())
			_, typedErr := events.New(typ, "/test", "s", "id", broken.Interface())
			_, jsonErr := events.New(typ, "/test", "s", "id", json.RawMessage(brokenRaw))
			if (typedErr == nil) != (jsonErr == nil) || (typedErr != nil && !errors.Is(typedErr, events.ErrInvalidPayload)) {
				t.Errorf("with names blanked: New of the value says %v, of its JSON %v", typedErr, jsonErr)
			}
		})
	}
}

// blankNames empties the string fields called Name, Placement or Cluster of v, a struct.
func blankNames(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch name := v.Type().Field(i).Name; {
		case f.Kind() == reflect.String && f.CanSet() && (name == "Name" || name == "Placement" || name == "Cluster"):
			f.SetString("")
		case f.Kind() == reflect.Struct && f.CanSet():
			blankNames(f)
		}
	}
}
