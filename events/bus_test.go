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

// subjectFor picks the subject an event of typ travels on.
func subjectFor(t *testing.T, typ string) string {
	t.Helper()
	var s string
	var err error
	switch strings.Split(typ, ".")[2] {
	case "placement":
		if typ == events.TypePlacementScheduled {
			s, err = events.SchedulingSubject("web-2-crp")
		} else {
			s, err = events.PlacementSubject("web-2-crp")
		}
	case "member":
		s, err = events.MemberSubject("member-1")
	case "hubresource":
		s, err = events.HubResourceSubject("", "Namespace", "", "web-2")
	case "resourcesnapshot", "rollout":
		s, err = events.RolloutSubject("web-2-crp")
	case "work":
		if typ == events.TypeWorkReported {
			s, err = events.WorkStatusSubject("member-1", "web-2-crp")
		} else {
			s, err = events.WorkSubject("member-1", "web-2-crp")
		}
	case "placementstatus":
		s, err = events.StatusSubject("web-2-crp")
	case "outbox":
		s, err = events.OutboxSubject("web-2-crp")
	default:
		t.Fatalf("no subject for %s", typ)
	}
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
	applyConsumer, err := bus.EnsureApplyConsumer(t.Context(), js, "member-1", bus.TopologyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Work events are last-value per subject: publish the tombstone after the
	// apply consumer has seen the desired state.
	bustest.Consume(t, js, bus.StreamWork, applyConsumer, record)

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
