package events_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/flotilla-dev/flotilla/events"
)

// FuzzAdmit checks arbitrary payloads of every type on arbitrary subjects: Admit
// and CheckSubject never panic, Admit never admits what CheckSubject refuses,
// and an admitted event's payload names what its subject names (SubjectOf
// gives that same subject back, for types with one route).
func FuzzAdmit(f *testing.F) {
	types := fuzzTypes()
	for i, typ := range types {
		data, err := os.ReadFile(goldenPath(typ))
		if err != nil {
			f.Fatal(err)
		}
		if s, err := events.SubjectOf(typ, json.RawMessage(data)); err == nil {
			f.Add(uint8(i), s, data)
		}
		f.Add(uint8(i), "flotilla.member.member-1", data)
		f.Add(uint8(i), "flotilla.workstatus.member-1.web-2-crp", data)
	}
	f.Add(uint8(0), "flotilla.placement.a..b", []byte(`{}`))
	f.Add(uint8(1), "flotilla.hub.core.Namespace.-.x_2e_y", []byte(`{"manifest":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"x.y"}}}`))
	f.Fuzz(func(t *testing.T, typ uint8, subject string, data []byte) {
		if len(data) > 64<<10 || len(subject) > 1024 {
			return
		}
		name := types[int(typ)%len(types)]
		ev := payloadEvent(t, name, data)
		admitted := events.Admit(subject, ev) == nil
		checked := events.CheckSubject(subject, ev) == nil
		if admitted && !checked {
			t.Fatalf("Admit admits %s on %q, CheckSubject refuses it", name, subject)
		}
		if !admitted {
			return
		}
		p, err := events.Decode(ev)
		if err != nil {
			t.Fatalf("admitted %s on %q does not decode: %v", name, subject, err)
		}
		back, err := events.SubjectOf(name, p)
		if err == nil && back != subject && !strings.HasSuffix(subject, ".heartbeat") && !strings.HasPrefix(subject, "flotilla.member.") {
			t.Fatalf("admitted %s on %q, but its payload names %q", name, subject, back)
		}
	})
}
