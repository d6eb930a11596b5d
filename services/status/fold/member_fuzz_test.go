package fold_test

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/status/fold"
)

// memberTypes are the events a member's status is folded from.
var memberTypes = []string{events.TypeMemberJoined, events.TypeMemberUpdated, events.TypeMemberLeft, events.TypeMemberHeartbeat}

// FuzzMember folds arbitrary member events, decoded and validated as the
// status service receives them (kinds[i] picks the type of the i-th payload
// of the JSON array data). An event that changes nothing leaves the inputs
// as they were; the inputs survive their JSON (the status_members row) and
// fold to the same member; and the folded member is valid, with conditions
// of a known status, as fleetctl get shows it.
func FuzzMember(f *testing.F) {
	var seeds []json.RawMessage
	for _, name := range []string{"member.joined.v1.json", "member.updated.v1.json", "member.heartbeat.v1.json", "member.left.v1.json"} {
		data, err := os.ReadFile("../../../events/testdata/payloads/" + name)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, data)
	}
	all, _ := json.Marshal(seeds)
	f.Add([]byte{0, 1, 3, 2}, all)
	f.Add([]byte{3, 0, 3, 3, 1, 2, 0}, []byte(`[`+string(seeds[2])+`,`+string(seeds[0])+`,`+string(seeds[2])+`,{"name":"member-1","healthy":false,"observedAt":"2020-01-01T00:00:00Z"},`+string(seeds[1])+`,`+string(seeds[3])+`,`+string(seeds[0])+`]`))
	f.Fuzz(func(t *testing.T, kinds []byte, data []byte) {
		var payloads []json.RawMessage
		if err := json.Unmarshal(data, &payloads); err != nil || len(payloads) > 32 {
			return
		}
		now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
		var m fold.MemberInputs
		for i, raw := range payloads {
			if i >= len(kinds) {
				break
			}
			ev := cloudevents.New()
			ev.SetID("fuzz")
			ev.SetSource("/fuzz")
			ev.SetType(memberTypes[int(kinds[i])%len(memberTypes)])
			if err := ev.SetData("application/json", []byte(raw)); err != nil {
				t.Fatal(err)
			}
			p, err := events.Decode(ev)
			if err != nil {
				continue // dead-lettered, never folded
			}
			now = now.Add(time.Minute)
			before := memberJSON(t, &m)
			if !m.Apply(p, int64(i+1), now) && memberJSON(t, &m) != before {
				t.Fatalf("%s reported no change but changed the inputs:\n%s\n%s", ev.Type(), before, memberJSON(t, &m))
			}
		}
		if !m.Known() {
			return
		}
		mc := fold.Member(&m, now)
		var back fold.MemberInputs
		if err := json.Unmarshal([]byte(memberJSON(t, &m)), &back); err != nil {
			t.Fatalf("stored inputs do not load: %v", err)
		}
		if a, b := memberJSON(t, fold.Member(&back, now)), memberJSON(t, mc); a != b {
			t.Fatalf("stored and loaded inputs fold differently:\n%s\n%s", a, b)
		}
		if errs := api.ValidateMemberCluster(&mc); len(errs) > 0 {
			t.Fatalf("folded member is invalid: %v\n%s", errs, memberJSON(t, mc))
		}
		if mc.Labels[api.MemberNameLabel] != mc.Name {
			t.Fatalf("member %q is labelled %q", mc.Name, mc.Labels[api.MemberNameLabel])
		}
		for _, c := range mc.Status.Conditions {
			switch c.Status {
			case metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
			default:
				t.Fatalf("condition %s has status %q", c.Type, c.Status)
			}
			if c.Reason == "" {
				t.Fatalf("condition %s has no reason", c.Type)
			}
		}
	})
}

func memberJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
