package scheduler_test

import (
	"encoding/json"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// Found by FuzzDecide (schedule): a heartbeat whose property value is not a
// quantity passed the payload rules, and the scheduler then could not build
// the member: it was kept in memory and stored all the same, and every later
// decision, after a restart too, failed on it. Such a heartbeat is now
// invalid, dead-lettered before the scheduler sees it.
func TestAHeartbeatPropertyThatIsNoQuantityIsRefused(t *testing.T) {
	f := newFixture(t)
	stop := f.startScheduler()
	prod := map[string]string{"environment": "production"}
	f.join("member-1", prod)
	f.join("member-2", prod)
	// Published as a member would, past the producer's checks.
	subj, _ := events.MemberSubject("member-1")
	ev := cloudevents.New()
	ev.SetID("bad-heartbeat")
	ev.SetSource("/member-1")
	ev.SetType(events.TypeMemberHeartbeat)
	data, _ := json.Marshal(events.MemberHeartbeat{Name: "member-1", Healthy: true, ObservedAt: time.Now(),
		Properties: map[api.PropertyName]api.PropertyValue{api.NodeCountProperty: {Value: "lots"}}})
	if err := ev.SetData("application/json", data); err != nil {
		t.Fatal(err)
	}
	msg, err := bus.Encode(ev, subj)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.JS.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	f.place("web", 2)
	f.latest("web", wantChosen("member-1", "member-2"))

	stop()
	f.startScheduler()
	f.place("api", 2)
	f.latest("api", wantChosen("member-1", "member-2"))
}
