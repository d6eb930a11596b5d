package bus_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// TestMessageWhoseHandlerDiedIsDeadLettered: a consumer takes a message and
// never acknowledges it, as when its process dies mid-handler, until its
// deliveries run out. The server drops it; the rescue loop puts it in the
// dead-letter stream with a reason.
func TestMessageWhoseHandlerDiedIsDeadLettered(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- bus.RescueMaxDeliveries(ctx, js, testLogger(t)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RescueMaxDeliveries: %v", err)
		}
	})

	cons, err := js.CreateOrUpdateConsumer(t.Context(), bus.StreamEvents, jetstream.ConsumerConfig{
		Durable: "crashy", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 300 * time.Millisecond, MaxDeliver: 2, FilterSubject: "flotilla.placement.>",
	})
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvent(t, "crash-1", "io.flotilla.placement.deleted.v1")
	if _, err := bus.NewPublisher(js).Publish(t.Context(), "flotilla.placement.web", ev); err != nil {
		t.Fatal(err)
	}
	// Take both deliveries and acknowledge neither.
	for i := range 2 {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for range batch.Messages() {
			n++
		}
		if n != 1 {
			t.Fatalf("delivery %d: got %d messages", i+1, n)
		}
	}

	// The server notices the exhausted message when the consumer next pulls,
	// as a restarted service would.
	time.Sleep(400 * time.Millisecond)
	if batch, err := cons.Fetch(1, jetstream.FetchMaxWait(500*time.Millisecond)); err == nil {
		for m := range batch.Messages() {
			t.Fatalf("message delivered a third time: %s", m.Subject())
		}
	}

	dl, err := js.OrderedConsumer(t.Context(), bus.StreamDeadLetter, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, patience, "the message dead-lettered", func() error {
		batch, err := dl.FetchNoWait(1)
		if err != nil {
			return err
		}
		m, ok := <-batch.Messages()
		if !ok {
			return fmt.Errorf("nothing dead-lettered yet")
		}
		h := m.Headers()
		reason := h.Get(bus.HeaderDeadLetterReason)
		if h.Get("ce-id") != "crash-1" || h.Get(bus.HeaderDeadLetterConsumer) != "crashy" ||
			!strings.Contains(reason, "gave up after 2 deliveries") {
			return fmt.Errorf("dead letter %v does not describe the lost message", h)
		}
		return nil
	})
}
