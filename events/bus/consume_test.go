package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

const knownType = "io.flotilla.placement.created.v1"

// rejectUnknownTypes is the kind of validator services pass.
func rejectUnknownTypes(_ string, ev event.Event) error {
	if ev.Type() != knownType {
		return fmt.Errorf("unknown event type %q", ev.Type())
	}
	return nil
}

// recorder is a handler that records what it saw.
type recorder struct {
	mu     sync.Mutex
	events []event.Event
	metas  []bus.Meta
	fail   func(ev event.Event, m bus.Meta) error // nil: succeed
}

func (r *recorder) handle(_ context.Context, ev event.Event, m bus.Meta) error {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.metas = append(r.metas, m)
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		return fail(ev, m)
	}
	return nil
}

func (r *recorder) calls() ([]event.Event, []bus.Meta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event.Event(nil), r.events...), append([]bus.Meta(nil), r.metas...)
}

func (r *recorder) seen(id string) error {
	evs, _ := r.calls()
	for _, ev := range evs {
		if ev.ID() == id {
			return nil
		}
	}
	return fmt.Errorf("event %s not handled yet (handled %d events)", id, len(evs))
}

func TestConsumeDeliversPublishedEvent(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	ev := fullEvent(t)
	if _, err := bus.NewPublisher(js).Publish(t.Context(), "flotilla.placement.web", ev); err != nil {
		t.Fatal(err)
	}

	var r recorder
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerScheduler, r.handle, bus.WithDoubleAck())
	poll.Until(t, patience, "the event handled", func() error { return r.seen(ev.ID()) })
	poll.Until(t, patience, "the consumer settled", func() error { return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerScheduler) })

	evs, metas := r.calls()
	if len(evs) != 1 {
		t.Fatalf("handled %d events, want 1", len(evs))
	}
	// The publisher adds the trace the event goes out in, and nothing else.
	tp, _ := evs[0].Extensions()[bus.ExtensionTraceparent].(string)
	if !validTraceparent.MatchString(tp) {
		t.Errorf("the event came with traceparent %q, want a W3C traceparent", tp)
	}
	want := ev.Clone()
	want.SetExtension(bus.ExtensionTraceparent, tp)
	if a, b := mustJSON(t, evs[0]), mustJSON(t, want); a != b {
		t.Errorf("event changed on the bus:\n got %s\nwant %s", a, b)
	}
	m := metas[0]
	if m.Subject != "flotilla.placement.web" || m.Stream != bus.StreamEvents || m.Consumer != bus.ConsumerScheduler ||
		m.Sequence != 1 || m.NumDelivered != 1 || m.Time.IsZero() {
		t.Errorf("meta = %+v", m)
	}
}

func TestConsumeDeadLettersPoisonAndContinues(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	ctx := t.Context()
	// Garbage bytes, an event of a type nobody knows, then a good event.
	if _, err := js.Publish(ctx, "flotilla.placement.garbage", []byte("\xff\x00 not an event")); err != nil {
		t.Fatal(err)
	}
	p := bus.NewPublisher(js)
	if _, err := p.Publish(ctx, "flotilla.placement.web", newEvent(t, "unknown-1", "io.example.unknown.v1")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(ctx, "flotilla.placement.web", newEvent(t, "good-1", knownType)); err != nil {
		t.Fatal(err)
	}

	var r recorder
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerScheduler, r.handle, bus.WithValidator(rejectUnknownTypes))
	poll.Until(t, patience, "the good event handled", func() error { return r.seen("good-1") })
	poll.Until(t, patience, "the consumer settled", func() error { return settled(ctx, js, bus.StreamEvents, bus.ConsumerScheduler) })

	if evs, _ := r.calls(); len(evs) != 1 {
		t.Errorf("handler saw %d events, want only the good one", len(evs))
	}
	dls := deadLetters(t, js)
	if len(dls) != 2 {
		t.Fatalf("dead letters = %d, want 2", len(dls))
	}
	garbage, unknown := dls[0], dls[1]
	for _, dl := range dls {
		if dl.Subject != "flotilla.deadletter.scheduler" {
			t.Errorf("dead letter subject = %q", dl.Subject)
		}
		if dl.Header.Get(bus.HeaderDeadLetterReason) == "" {
			t.Errorf("dead letter has no reason: %v", dl.Header)
		}
		if dl.Header.Get(bus.HeaderDeadLetterStream) != bus.StreamEvents ||
			dl.Header.Get(bus.HeaderDeadLetterConsumer) != bus.ConsumerScheduler ||
			dl.Header.Get(bus.HeaderDeadLetterDelivered) != "1" {
			t.Errorf("dead letter headers = %v", dl.Header)
		}
	}
	if string(garbage.Data) != "\xff\x00 not an event" || garbage.Header.Get(bus.HeaderDeadLetterSubject) != "flotilla.placement.garbage" ||
		garbage.Header.Get(bus.HeaderDeadLetterSequence) != "1" {
		t.Errorf("garbage dead letter = %q %v", garbage.Data, garbage.Header)
	}
	t.Logf("garbage reason: %s", garbage.Header.Get(bus.HeaderDeadLetterReason))
	// The rejected event keeps its CloudEvents headers, so it can be replayed.
	if unknown.Header.Get("ce-id") != "unknown-1" || unknown.Header.Get("ce-type") != "io.example.unknown.v1" ||
		unknown.Header.Get("Nats-Msg-Id") != "EVENTS-2-scheduler" || unknown.Header.Get(bus.HeaderDeadLetterSequence) != "2" {
		t.Errorf("unknown-type dead letter headers = %v", unknown.Header)
	}
	t.Logf("unknown-type reason: %s", unknown.Header.Get(bus.HeaderDeadLetterReason))
}

func TestEachConsumerDeadLettersSeparately(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	if _, err := js.Publish(t.Context(), "flotilla.placement.garbage", []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	var r recorder
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerScheduler, r.handle)
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerStatus, r.handle)
	poll.Until(t, patience, "a dead letter per consumer", func() error {
		if n := len(deadLetters(t, js)); n != 2 {
			return fmt.Errorf("%d dead letters, want one per consumer", n)
		}
		return nil
	})
	for _, c := range []string{bus.ConsumerScheduler, bus.ConsumerStatus} {
		poll.Until(t, patience, "consumer "+c+" settled", func() error { return settled(t.Context(), js, bus.StreamEvents, c) })
	}
}

func TestConsumeRetriesThenSucceeds(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	if _, err := bus.NewPublisher(js).Publish(t.Context(), "flotilla.member.m1", newEvent(t, "m1", knownType)); err != nil {
		t.Fatal(err)
	}
	r := recorder{fail: func(_ event.Event, m bus.Meta) error {
		if m.NumDelivered < 3 {
			return errors.New("database unavailable")
		}
		return nil
	}}
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerRollout, r.handle, bus.WithRetryDelay(10*time.Millisecond, 50*time.Millisecond))
	poll.Until(t, patience, "three deliveries, then settled", func() error {
		if _, metas := r.calls(); len(metas) < 3 {
			return fmt.Errorf("%d deliveries", len(metas))
		}
		return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerRollout)
	})
	_, metas := r.calls()
	for i, m := range metas {
		if m.NumDelivered != uint64(i+1) {
			t.Errorf("delivery %d reported NumDelivered %d", i+1, m.NumDelivered)
		}
	}
	if len(metas) != 3 {
		t.Errorf("handler ran %d times, want 3", len(metas))
	}
	if dls := deadLetters(t, js); len(dls) != 0 {
		t.Errorf("a retried-then-successful message was dead-lettered: %v", dls[0].Header)
	}
}

func TestConsumeRecoversFromPanic(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	if _, err := bus.NewPublisher(js).Publish(t.Context(), "flotilla.placement.p", newEvent(t, "p1", knownType)); err != nil {
		t.Fatal(err)
	}
	r := recorder{fail: func(_ event.Event, m bus.Meta) error {
		if m.NumDelivered == 1 {
			panic("a handler bug")
		}
		return nil
	}}
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerScheduler, r.handle, bus.WithRetryDelay(10*time.Millisecond, 50*time.Millisecond))
	poll.Until(t, patience, "two deliveries, then settled", func() error {
		if _, metas := r.calls(); len(metas) < 2 {
			return fmt.Errorf("%d deliveries", len(metas))
		}
		return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerScheduler)
	})
	if dls := deadLetters(t, js); len(dls) != 0 {
		t.Errorf("message dead-lettered after one panic: %v", dls[0].Header)
	}
}

func TestConsumeDeadLettersAfterMaxDeliver(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{MaxDeliver: 3})
	p := bus.NewPublisher(js)
	if _, err := p.Publish(t.Context(), "flotilla.placement.stuck", newEvent(t, "stuck-1", knownType)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(t.Context(), "flotilla.placement.fine", newEvent(t, "fine-1", knownType)); err != nil {
		t.Fatal(err)
	}
	r := recorder{fail: func(ev event.Event, _ bus.Meta) error {
		if ev.ID() == "stuck-1" {
			return errors.New("member apiserver unreachable")
		}
		return nil
	}}
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerScheduler, r.handle, bus.WithRetryDelay(10*time.Millisecond, 50*time.Millisecond))
	poll.Until(t, patience, "the event dead-lettered", func() error {
		if n := len(deadLetters(t, js)); n != 1 {
			return fmt.Errorf("%d dead letters", n)
		}
		return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerScheduler)
	})
	if err := r.seen("fine-1"); err != nil {
		t.Error(err)
	}
	evs, _ := r.calls()
	stuck := 0
	for _, ev := range evs {
		if ev.ID() == "stuck-1" {
			stuck++
		}
	}
	if stuck != 3 {
		t.Errorf("failing handler ran %d times, want MaxDeliver (3)", stuck)
	}
	dl := deadLetters(t, js)[0]
	if dl.Header.Get("ce-id") != "stuck-1" || dl.Header.Get(bus.HeaderDeadLetterDelivered) != "3" {
		t.Errorf("dead letter headers = %v", dl.Header)
	}
	t.Logf("reason: %s", dl.Header.Get(bus.HeaderDeadLetterReason))
}

func TestConsumeDeadLettersPermanentError(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	if _, err := bus.NewPublisher(js).Publish(t.Context(), "flotilla.placement.bad", newEvent(t, "bad-1", knownType)); err != nil {
		t.Fatal(err)
	}
	r := recorder{fail: func(event.Event, bus.Meta) error {
		return fmt.Errorf("schedule placement bad: %w", bus.Permanent(errors.New("policy names an unknown affinity key")))
	}}
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerScheduler, r.handle)
	poll.Until(t, patience, "the permanent failure dead-lettered", func() error {
		if n := len(deadLetters(t, js)); n != 1 {
			return fmt.Errorf("%d dead letters", n)
		}
		return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerScheduler)
	})
	if evs, _ := r.calls(); len(evs) != 1 {
		t.Errorf("handler ran %d times, want 1 (no retries for a permanent error)", len(evs))
	}
	reason := deadLetters(t, js)[0].Header.Get(bus.HeaderDeadLetterReason)
	if want := "policy names an unknown affinity key"; !strings.Contains(reason, want) {
		t.Errorf("reason %q does not mention %q", reason, want)
	}
}

func TestConsumeKeepsLongHandlerInProgress(t *testing.T) {
	// AckWait 1s; the handler works for longer. Without in-progress
	// reports the server would deliver the message again meanwhile.
	_, js := startBus(t, bus.TopologyOptions{AckWait: time.Second})
	if _, err := bus.NewPublisher(js).Publish(t.Context(), "flotilla.placement.slow", newEvent(t, "slow-1", knownType)); err != nil {
		t.Fatal(err)
	}
	r := recorder{fail: func(event.Event, bus.Meta) error {
		time.Sleep(2500 * time.Millisecond) // the long work
		return nil
	}}
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerScheduler, r.handle)
	poll.Until(t, patience, "the consumer settled", func() error { return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerScheduler) })

	c, err := js.Consumer(t.Context(), bus.StreamEvents, bus.ConsumerScheduler)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumRedelivered != 0 {
		t.Errorf("%d messages redelivered while the handler was still working", info.NumRedelivered)
	}
	if evs, _ := r.calls(); len(evs) != 1 {
		t.Errorf("handler ran %d times, want 1", len(evs))
	}
}

func TestConsumeStopsWithContext(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- bus.Consume(ctx, js, bus.StreamEvents, bus.ConsumerStatus, func(context.Context, event.Event, bus.Meta) error { return nil },
			bus.WithValidator(admitAll))
	}()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Consume returned %v, want nil after its context ended", err)
	}
}

func TestConsumeUnknownConsumer(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	err := bus.Consume(t.Context(), js, bus.StreamEvents, "nobody", func(context.Context, event.Event, bus.Meta) error { return nil },
		bus.WithValidator(admitAll))
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("err = %v, want ErrConsumerNotFound", err)
	}
}

func TestConsumeReturnsWhenConsumerDeleted(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	if _, err := bus.NewPublisher(js).Publish(t.Context(), "flotilla.placement.p", newEvent(t, "p1", knownType)); err != nil {
		t.Fatal(err)
	}
	var r recorder
	done := make(chan error, 1)
	go func() {
		done <- bus.Consume(t.Context(), js, bus.StreamEvents, bus.ConsumerStatus, r.handle, bus.WithLogger(testLogger(t)), bus.WithValidator(admitAll))
	}()
	poll.Until(t, patience, "the consumer consuming", func() error { return r.seen("p1") }) // consuming
	if err := js.DeleteConsumer(t.Context(), bus.StreamEvents, bus.ConsumerStatus); err != nil {
		t.Fatal(err)
	}
	err := <-done
	if !errors.Is(err, jetstream.ErrConsumerDeleted) && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("Consume returned %v after its consumer was deleted, want a consumer-deleted error", err)
	}
	t.Logf("Consume: %v", err)
}

// deletingJetStream deletes a consumer right after handing it out, so the
// first pull goes to a consumer that no longer exists.
type deletingJetStream struct{ jetstream.JetStream }

func (d deletingJetStream) Consumer(ctx context.Context, stream, name string) (jetstream.Consumer, error) {
	c, err := d.JetStream.Consumer(ctx, stream, name)
	if err == nil {
		err = d.JetStream.DeleteConsumer(ctx, stream, name)
	}
	return c, err
}

func TestConsumeReturnsWhenConsumerDeletedBeforeFirstPull(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	err := bus.Consume(t.Context(), deletingJetStream{js}, bus.StreamEvents, bus.ConsumerStatus,
		func(context.Context, event.Event, bus.Meta) error { return nil }, bus.WithLogger(testLogger(t)), bus.WithValidator(admitAll))
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("Consume returned %v, want ErrConsumerNotFound", err)
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("bad spec")
	err := fmt.Errorf("handle: %w", bus.Permanent(base))
	if !bus.IsPermanent(err) || !errors.Is(err, base) {
		t.Errorf("wrapped Permanent error lost its meaning: %v", err)
	}
	if bus.IsPermanent(base) || bus.Permanent(nil) != nil {
		t.Error("plain errors and nil are not permanent")
	}
}

// A consumer without a validator would hand its handler events nobody checked against
// their subjects: Consume refuses to start.
func TestConsumeRequiresAValidator(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	var r recorder
	err := bus.Consume(t.Context(), js, bus.StreamEvents, bus.ConsumerStatus, r.handle, bus.WithLogger(testLogger(t)))
	if !errors.Is(err, bus.ErrNoValidator) {
		t.Fatalf("Consume without a validator returned %v, want ErrNoValidator", err)
	}
	err = bus.ConsumeBatches(t.Context(), js, bus.StreamEvents, bus.ConsumerStatus,
		func(context.Context, []bus.Delivery) error { return nil }, bus.WithLogger(testLogger(t)))
	if !errors.Is(err, bus.ErrNoValidator) {
		t.Fatalf("ConsumeBatches without a validator returned %v, want ErrNoValidator", err)
	}
}

// The validator judges an event together with the subject it was stored under (which
// is what the publisher's permissions covered), and a rejection's reason names both.
func TestValidatorSeesTheSubject(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	p := bus.NewPublisher(js)
	if _, err := p.Publish(t.Context(), "flotilla.member.m1", newEvent(t, "own-1", knownType)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Publish(t.Context(), "flotilla.member.m2", newEvent(t, "forged-1", knownType)); err != nil {
		t.Fatal(err)
	}
	onlyM1 := func(subject string, ev event.Event) error {
		if subject != "flotilla.member.m1" {
			return fmt.Errorf("only m1 may speak here")
		}
		return nil
	}
	var r recorder
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerScheduler, r.handle, bus.WithValidator(onlyM1))
	poll.Until(t, patience, "the consumer settled", func() error {
		return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerScheduler)
	})
	if evs, _ := r.calls(); len(evs) != 1 || evs[0].ID() != "own-1" {
		t.Errorf("handler saw %v, want only own-1", evs)
	}
	dls := deadLetters(t, js)
	if len(dls) != 1 {
		t.Fatalf("dead letters = %d, want 1", len(dls))
	}
	reason := dls[0].Header.Get(bus.HeaderDeadLetterReason)
	for _, want := range []string{"forged-1", knownType, "flotilla.member.m2", "only m1 may speak here"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q does not name %q", reason, want)
		}
	}
}
