package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/bustest"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

// patience bounds every wait for the bus in these tests.
const patience = 20 * time.Second

func startBus(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	_, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{AckWait: 2 * time.Second, MaxDeliver: 5}); err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// subjectFor is the subject the example of typ travels on.
func subjectFor(t *testing.T, typ string) string {
	t.Helper()
	s, err := events.SubjectOf(typ, examples()[typ])
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEveryEventTypeCrossesTheBus publishes one event of each type with the
// publish helper and reads each back, typed, through the consume helper.
func TestEveryEventTypeCrossesTheBus(t *testing.T) {
	_, js := startBus(t)
	pub := bus.NewPublisher(js)

	var mu sync.Mutex
	got := map[string]any{}
	record := func(_ context.Context, ev cloudevents.Event, _ bus.Meta) error {
		p, err := events.Decode(ev)
		if err != nil {
			return err
		}
		mu.Lock()
		got[ev.Type()] = p
		mu.Unlock()
		return nil
	}
	bustest.Consume(t, js, bus.StreamEvents, bus.ConsumerStatus, record)
	// The examples' desired state is member-1's, their tombstone member-2's. Work
	// events are last-value per subject: the tombstone goes after the desired state.
	for _, member := range []string{"member-1", "member-2"} {
		applyConsumer, err := bus.EnsureApplyConsumer(t.Context(), js, member, bus.TopologyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		bustest.Consume(t, js, bus.StreamWork, applyConsumer, record)
	}

	ex := examples()
	// The tombstone goes last: it replaces the desired state on its subject.
	order := slices.DeleteFunc(events.Types(), func(t string) bool { return t == events.TypeWorkTombstoned })
	slices.Sort(order)
	order = append(order, events.TypeWorkTombstoned)
	for _, typ := range order {
		ev, err := events.New(typ, "/flotilla/test", "web-2-crp", events.ID("test", typ), ex[typ])
		if err != nil {
			t.Fatalf("new %s: %v", typ, err)
		}
		if typ == events.TypeWorkTombstoned {
			poll.Until(t, patience, "work desired consumed before its tombstone", func() error {
				mu.Lock()
				defer mu.Unlock()
				if got[events.TypeWorkDesired] == nil {
					return fmt.Errorf("work desired not consumed yet")
				}
				return nil
			})
		}
		if _, err := pub.Publish(t.Context(), subjectFor(t, typ), ev); err != nil {
			t.Fatalf("publish %s: %v", typ, err)
		}
	}
	poll.Until(t, patience, "every event consumed", func() error {
		mu.Lock()
		defer mu.Unlock()
		for _, typ := range order {
			if got[typ] == nil {
				return fmt.Errorf("%s not consumed", typ)
			}
		}
		return nil
	})
	for typ, p := range got {
		want, _ := json.Marshal(ex[typ])
		have, _ := json.Marshal(p)
		if string(want) != string(have) {
			t.Errorf("%s came back different:\n got %s\nwant %s", typ, have, want)
		}
	}
}

// TestBadMessagesAreDeadLetteredAndTheQueueMovesOn sends garbage and an event
// of an unknown type: both land in the dead-letter stream with a reason, and
// the good message behind them is still handled.
func TestBadMessagesAreDeadLetteredAndTheQueueMovesOn(t *testing.T) {
	nc, js := startBus(t)
	var handled atomic.Int32
	bustest.Consume(t, js, bus.StreamEvents, bus.ConsumerScheduler, func(ctx context.Context, ev cloudevents.Event, m bus.Meta) error {
		handled.Add(1)
		return nil
	})
	subj, _ := events.PlacementSubject("web")

	if _, err := js.PublishMsg(t.Context(), &nats.Msg{Subject: subj, Data: []byte("\x00\x01 not an event")}); err != nil {
		t.Fatal(err)
	}
	good, err := events.New(events.TypePlacementDeleted, "/flotilla/test", "web", "", events.PlacementDeleted{Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	unknown := good.Clone()
	unknown.SetID("unknown-1")
	unknown.SetType("io.flotilla.placement.exploded.v1")
	msg, err := bus.Encode(unknown, subj)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewPublisher(js).Publish(t.Context(), subj, good); err != nil {
		t.Fatal(err)
	}

	poll.Until(t, patience, "the good event handled once", func() error {
		if handled.Load() != 1 {
			return fmt.Errorf("good event handled %d times", handled.Load())
		}
		return nil
	})
	dl, err := js.OrderedConsumer(t.Context(), bus.StreamDeadLetter, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	poll.Until(t, patience, "two dead letters", func() error {
		batch, err := dl.FetchNoWait(10)
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			reasons = append(reasons, m.Headers().Get("Flotilla-Dead-Letter-Reason"))
		}
		if len(reasons) < 2 {
			return fmt.Errorf("%d dead letters, want 2", len(reasons))
		}
		return nil
	})
	all := strings.Join(reasons, "\n")
	for _, want := range []string{"io.flotilla.placement.exploded.v1", "unknown event type"} {
		if !strings.Contains(all, want) {
			t.Errorf("dead-letter reasons %q do not mention %q", reasons, want)
		}
	}
	_ = nc
}

// A member's worker may publish on its own member's subjects. A member.left naming
// another member, published there, is refused by every consumer before its handler
// runs, and lands in the dead-letter stream with a reason naming the type, the subject
// and the rule; the events behind it are still handled.
func TestForgedEventIsDeadLetteredWithItsReason(t *testing.T) {
	_, js := startBus(t)
	var handled atomic.Int32
	bustest.Consume(t, js, bus.StreamEvents, bus.ConsumerScheduler, func(ctx context.Context, ev cloudevents.Event, m bus.Meta) error {
		handled.Add(1)
		return nil
	})
	pub := bus.NewPublisher(js)
	forged, err := events.New(events.TypeMemberLeft, "/flotilla/apply/member-1", "member-2", "forged-1",
		events.MemberLeft{Name: "member-2", LeavePolicy: events.LeaveDelete})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(t.Context(), "flotilla.member.member-1", forged); err != nil {
		t.Fatal(err)
	}
	beat, err := events.New(events.TypeMemberHeartbeat, "/flotilla/apply/member-1", "member-1", "beat-1",
		events.MemberHeartbeat{Name: "member-1", Healthy: true, ObservedAt: exampleTime})
	if err != nil {
		t.Fatal(err)
	}
	own, err := events.HeartbeatSubject("member-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(t.Context(), own, beat); err != nil {
		t.Fatal(err)
	}

	poll.Until(t, patience, "the member's own heartbeat handled", func() error {
		if handled.Load() != 1 {
			return fmt.Errorf("handled %d events, want the heartbeat only", handled.Load())
		}
		return nil
	})
	dl, err := js.OrderedConsumer(t.Context(), bus.StreamDeadLetter, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var letters []jetstream.Msg
	poll.Until(t, patience, "the forged event dead-lettered", func() error {
		batch, err := dl.FetchNoWait(10)
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			letters = append(letters, m)
		}
		if len(letters) == 0 {
			return fmt.Errorf("no dead letter yet")
		}
		return nil
	})
	if len(letters) != 1 || letters[0].Headers().Get("ce-id") != "forged-1" {
		t.Fatalf("dead letters %d, the first %v; want the forged event alone", len(letters), letters[0].Headers())
	}
	h := letters[0].Headers()
	if h.Get(bus.HeaderDeadLetterSubject) != "flotilla.member.member-1" || h.Get(bus.HeaderDeadLetterConsumer) != bus.ConsumerScheduler {
		t.Errorf("dead letter headers %v", h)
	}
	reason := h.Get(bus.HeaderDeadLetterReason)
	for _, want := range []string{events.TypeMemberLeft, "flotilla.member.member-1", "flotilla.member.{member} with member = name",
		`the payload's name is "member-2"`} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q does not say %q", reason, want)
		}
	}
	t.Logf("reason: %s", reason)
}
