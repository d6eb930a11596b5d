package bus_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events/bus"
)

func TestPublishDropsDuplicateEventID(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	p := bus.NewPublisher(js)
	ev := newEvent(t, "placement-web-created-1", "io.flotilla.placement.created.v1")

	first, err := p.Publish(t.Context(), "flotilla.placement.web", ev)
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.Publish(t.Context(), "flotilla.placement.web", ev)
	if err != nil {
		t.Fatalf("re-publishing the same event: %v, want no error", err)
	}
	if first.Duplicate || !again.Duplicate {
		t.Errorf("Duplicate = %v then %v, want false then true", first.Duplicate, again.Duplicate)
	}
	if again.Sequence != first.Sequence {
		t.Errorf("duplicate reported sequence %d, want the original %d", again.Sequence, first.Sequence)
	}

	s, err := js.Stream(t.Context(), bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Errorf("stream %s holds %d messages, want 1", bus.StreamEvents, info.State.Msgs)
	}
}

func TestPublishExpectLast(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	p := bus.NewPublisher(js)
	subject, err := bus.WorkSubject("member-1", "web")
	if err != nil {
		t.Fatal(err)
	}

	first, err := p.PublishExpectLast(t.Context(), subject, newEvent(t, "w1", "io.flotilla.work.v1"), 0)
	if err != nil {
		t.Fatalf("first publish expecting an empty subject: %v", err)
	}
	_, err = p.PublishExpectLast(t.Context(), subject, newEvent(t, "w2", "io.flotilla.work.v1"), 0)
	if !errors.Is(err, bus.ErrWrongLastSequence) {
		t.Fatalf("publish with a stale sequence: err = %v, want ErrWrongLastSequence", err)
	}
	if _, err := p.PublishExpectLast(t.Context(), subject, newEvent(t, "w3", "io.flotilla.work.v1"), first.Sequence); err != nil {
		t.Fatalf("publish with the current sequence: %v", err)
	}
}

func TestPublishRejectsInvalidEvent(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	ev := newEvent(t, "x", "t")
	ev.SetSource("")
	if _, err := bus.NewPublisher(js).Publish(t.Context(), "flotilla.placement.x", ev); err == nil {
		t.Fatal("Publish accepted an event without a source")
	}
}

func TestWorkStreamKeepsLastPerSubject(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	p := bus.NewPublisher(js)
	web, _ := bus.WorkSubject("eu.prod", "web")
	api, _ := bus.WorkSubject("eu.prod", "api")
	other, _ := bus.WorkSubject("eu", "web")
	for _, pub := range []struct{ subject, id string }{
		{web, "web-1"}, {web, "web-2"}, {api, "api-1"}, {web, "web-3"}, {other, "other-1"},
	} {
		if _, err := p.Publish(t.Context(), pub.subject, newEvent(t, pub.id, "io.flotilla.work.v1")); err != nil {
			t.Fatal(err)
		}
	}

	s, err := js.Stream(t.Context(), bus.StreamWork)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 3 {
		t.Errorf("stream %s holds %d messages, want 3 (one per subject)", bus.StreamWork, info.State.Msgs)
	}
	last, err := s.GetLastMsgForSubject(t.Context(), web)
	if err != nil {
		t.Fatal(err)
	}
	if id := last.Header.Get("ce-id"); id != "web-3" {
		t.Errorf("last message on %s is %q, want web-3", web, id)
	}

	// The apply worker of eu.prod sees the current state of its own
	// placements only, not eu's.
	name, err := bus.EnsureApplyConsumer(t.Context(), js, "eu.prod", bus.TopologyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.Consumer(t.Context(), bus.StreamWork, name)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.FetchNoWait(10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		ev, err := bus.DecodeJetStream(m)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev.ID())
		_ = m.Ack()
	}
	if len(got) != 2 || got[0] != "api-1" || got[1] != "web-3" {
		t.Errorf("apply consumer for eu.prod got %v, want [api-1 web-3]", got)
	}
}

func TestEnsureTopologyIsIdempotent(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatalf("second EnsureTopology: %v", err)
	}
	// A changed tuning updates in place.
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{MaxAckPending: 10, MaxDeliver: 3}); err != nil {
		t.Fatalf("EnsureTopology with new tuning: %v", err)
	}
	c, err := js.Consumer(t.Context(), bus.StreamEvents, bus.ConsumerRollout)
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.CachedInfo().Config
	if cfg.MaxAckPending != 10 || cfg.MaxDeliver != 3 || cfg.AckPolicy != jetstream.AckExplicitPolicy {
		t.Errorf("rollout consumer config = %+v", cfg)
	}
	if len(cfg.FilterSubjects) != 7 {
		t.Errorf("rollout consumer filters = %v", cfg.FilterSubjects)
	}
}
