package bus_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// listDeadLetters lists every dead letter of consumer ("" for all).
func listDeadLetters(t *testing.T, js jetstream.JetStream, consumer string) []bus.DeadLetter {
	t.Helper()
	dls, more, err := bus.ListDeadLetters(t.Context(), js, bus.DeadLetterQuery{Consumer: consumer})
	if err != nil {
		t.Fatal(err)
	}
	if more != 0 {
		t.Fatalf("%d more dead letters beyond no limit", more)
	}
	return dls
}

func waitDeadLetters(t *testing.T, js jetstream.JetStream, n int) []bus.DeadLetter {
	t.Helper()
	var dls []bus.DeadLetter
	poll.Until(t, patience, fmt.Sprintf("%d dead letters", n), func() error {
		dls = listDeadLetters(t, js, "")
		if len(dls) != n {
			return fmt.Errorf("%d dead letters", len(dls))
		}
		return nil
	})
	return dls
}

// TestDeadLetterIsListedShownAndRedrivenOnce: an event the handler cannot take is
// dead-lettered; the list shows it with its reason, show returns the event as published, and
// after the fix a redrive hands it to the consumer again, unchanged and as old as it was. A
// redrive before the fix dead-letters it again instead of losing it.
func TestDeadLetterIsListedShownAndRedrivenOnce(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	p := bus.NewPublisher(js)
	broken := newEvent(t, "broken-1", knownType)
	ack, err := p.Publish(t.Context(), "flotilla.placement.web", broken)
	if err != nil {
		t.Fatal(err)
	}
	var fixed atomic.Bool
	r := recorder{fail: func(ev event.Event, _ bus.Meta) error {
		if ev.ID() == "broken-1" && !fixed.Load() {
			return bus.Permanent(errors.New("placement web: unknown field spec.polcy"))
		}
		return nil
	}}
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerScheduler, r.handle)

	dl := waitDeadLetters(t, js, 1)[0]
	if dl.Consumer != bus.ConsumerScheduler || dl.Stream != bus.StreamEvents || dl.Subject != "flotilla.placement.web" ||
		dl.Sequence != ack.Sequence || dl.EventID != "broken-1" || dl.EventType != knownType || dl.Deliveries != 1 ||
		dl.Size != len(broken.Data()) || dl.DeadAt.IsZero() {
		t.Errorf("listed dead letter = %+v", dl)
	}
	if want := "unknown field spec.polcy"; !strings.Contains(dl.Reason, want) {
		t.Errorf("reason %q does not say %q", dl.Reason, want)
	}
	shown, err := bus.GetDeadLetter(t.Context(), js, dl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(shown.Data) != string(broken.Data()) || shown.Headers.Get("ce-id") != "broken-1" || shown.Headers.Get(bus.HeaderDeadLetterReason) != "" {
		t.Errorf("shown dead letter: data %q, headers %v", shown.Data, shown.Headers)
	}

	// Redriven before the fix: it fails again and is dead-lettered again, not lost.
	if _, err := bus.Redrive(t.Context(), js, dl.ID); err != nil {
		t.Fatal(err)
	}
	again := waitDeadLetters(t, js, 1)[0]
	if again.ID == dl.ID || again.EventID != "broken-1" {
		t.Fatalf("dead letter after a failed redrive = %+v", again)
	}

	fixed.Store(true)
	res, err := bus.Redrive(t.Context(), js, again.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != bus.OutcomeRedriven || res.NewSequence <= again.Sequence {
		t.Errorf("redrive = %+v", res)
	}
	poll.Until(t, patience, "the redriven event handled", func() error {
		if err := settled(t.Context(), js, bus.StreamEvents, bus.ConsumerScheduler); err != nil {
			return err
		}
		evs, _ := r.calls()
		if len(evs) != 3 {
			return fmt.Errorf("%d calls", len(evs))
		}
		return nil
	})
	evs, metas := r.calls()
	last, m := evs[len(evs)-1], metas[len(metas)-1]
	// The trace the republish started is not the event's own.
	last.SetExtension("traceparent", nil)
	if mustJSON(t, last) != mustJSON(t, broken) {
		t.Errorf("redriven event differs:\n got %s\nwant %s", mustJSON(t, last), mustJSON(t, broken))
	}
	if m.Sequence != ack.Sequence {
		t.Errorf("redriven event has sequence %d, want the original's %d", m.Sequence, ack.Sequence)
	}
	if dls := listDeadLetters(t, js, ""); len(dls) != 0 {
		t.Errorf("dead letters after a successful redrive: %+v", dls)
	}
	if _, err := bus.Redrive(t.Context(), js, again.ID); !errors.Is(err, bus.ErrDeadLetterNotFound) {
		t.Errorf("second redrive of one dead letter: %v, want ErrDeadLetterNotFound", err)
	}
}

// TestRedriveOfWorkKeepsTheCurrentDesiredState: a dead-lettered work message is redriven while
// it is still its subject's desired state, and dropped once newer work replaced it, so a
// redrive never brings back old desired state.
func TestRedriveOfWorkKeepsTheCurrentDesiredState(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	consumer, err := bus.EnsureApplyConsumer(t.Context(), js, "c1", bus.TopologyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var fixed atomic.Bool
	r := recorder{fail: func(_ event.Event, _ bus.Meta) error {
		if !fixed.Load() {
			return bus.Permanent(errors.New("manifest does not decode"))
		}
		return nil
	}}
	consumeInBackground(t, js, bus.StreamWork, consumer, r.handle)
	p := bus.NewPublisher(js)
	subject, _ := bus.WorkSubject("c1", "web")
	if _, err := p.Publish(t.Context(), subject, newEvent(t, "work-1", knownType)); err != nil {
		t.Fatal(err)
	}
	first := waitDeadLetters(t, js, 1)[0]
	if _, err := p.Publish(t.Context(), subject, newEvent(t, "work-2", knownType)); err != nil {
		t.Fatal(err)
	}
	second := waitDeadLetters(t, js, 2)[1]

	res, err := bus.Redrive(t.Context(), js, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != bus.OutcomeSuperseded {
		t.Errorf("redrive of replaced work: %+v, want superseded", res)
	}
	if id := lastOn(t, js, subject).Header.Get("ce-id"); id != "work-2" {
		t.Errorf("desired state after redriving replaced work is %s, want work-2", id)
	}

	fixed.Store(true)
	if res, err = bus.Redrive(t.Context(), js, second.ID); err != nil || res.Outcome != bus.OutcomeRedriven {
		t.Fatalf("redrive of current work: %+v, %v", res, err)
	}
	poll.Until(t, patience, "the current work handled", func() error {
		evs, _ := r.calls()
		if last := evs[len(evs)-1]; last.ID() != "work-2" || len(evs) != 3 {
			return fmt.Errorf("%d calls, last %s", len(evs), last.ID())
		}
		return nil
	})
	if dls := listDeadLetters(t, js, ""); len(dls) != 0 {
		t.Errorf("dead letters left: %+v", dls)
	}
}

func lastOn(t *testing.T, js jetstream.JetStream, subject string) *jetstream.RawStreamMsg {
	t.Helper()
	s, err := js.Stream(t.Context(), bus.StreamWork)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(t.Context(), subject)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestListDeadLettersFiltersAndPages(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	for i, consumer := range []string{"rollout", "status", "rollout", "apply-m1", "rollout"} {
		msg := nats.NewMsg(bus.DeadLetterSubject(consumer))
		msg.Header.Set("ce-id", fmt.Sprint("ev-", i))
		msg.Header.Set(bus.HeaderDeadLetterConsumer, consumer)
		msg.Header.Set(bus.HeaderDeadLetterReason, "test")
		msg.Data = []byte("{}")
		if _, err := js.PublishMsg(t.Context(), msg); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(dls []bus.DeadLetter) (out []string) {
		for _, dl := range dls {
			out = append(out, dl.EventID)
		}
		return out
	}
	if got := ids(listDeadLetters(t, js, "rollout")); fmt.Sprint(got) != "[ev-0 ev-2 ev-4]" {
		t.Errorf("rollout's dead letters: %v", got)
	}
	page, more, err := bus.ListDeadLetters(t.Context(), js, bus.DeadLetterQuery{Limit: 2})
	if err != nil || fmt.Sprint(ids(page)) != "[ev-0 ev-1]" || more != 3 {
		t.Fatalf("first page: %v, %d more, %v", ids(page), more, err)
	}
	page, more, err = bus.ListDeadLetters(t.Context(), js, bus.DeadLetterQuery{Limit: 2, After: page[1].ID})
	if err != nil || fmt.Sprint(ids(page)) != "[ev-2 ev-3]" || more != 1 {
		t.Fatalf("second page: %v, %d more, %v", ids(page), more, err)
	}
	if none, _, err := bus.ListDeadLetters(t.Context(), js, bus.DeadLetterQuery{Consumer: "scheduler"}); err != nil || len(none) != 0 {
		t.Errorf("scheduler's dead letters: %v, %v", none, err)
	}
}

func TestRedriveRefusesADeadLetterWithoutItsMessage(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	// What the rescue of exhausted deliveries records when the message had left its stream.
	msg := nats.NewMsg(bus.DeadLetterSubject("rollout"))
	msg.Header.Set(bus.HeaderDeadLetterConsumer, "rollout")
	msg.Header.Set(bus.HeaderDeadLetterStream, bus.StreamEvents)
	msg.Header.Set(bus.HeaderDeadLetterReason, "gave up; the message itself is no longer in the stream")
	ack, err := js.PublishMsg(t.Context(), msg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Redrive(t.Context(), js, ack.Sequence); !errors.Is(err, bus.ErrNotRedrivable) {
		t.Errorf("Redrive = %v, want ErrNotRedrivable", err)
	}
	if _, err := bus.GetDeadLetter(t.Context(), js, ack.Sequence+10); !errors.Is(err, bus.ErrDeadLetterNotFound) {
		t.Errorf("GetDeadLetter of an unknown id = %v", err)
	}
}
