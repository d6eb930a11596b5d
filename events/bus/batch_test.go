package bus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/nats-io/nats.go/jetstream"
)

// ledger is a batch handler that behaves like one database transaction per batch: an
// effect is recorded only when the whole batch succeeds.
type ledger struct {
	mu      sync.Mutex
	batches []int    // size of each batch handed over
	applied []string // event ids whose effects committed, in order
	poison  string   // an event id that fails permanently
}

func (l *ledger) handle(_ context.Context, batch []bus.Delivery) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches = append(l.batches, len(batch))
	var ids []string
	for _, d := range batch {
		if d.Event.ID() == l.poison {
			return bus.Permanent(fmt.Errorf("event %s is poison", d.Event.ID()))
		}
		ids = append(ids, d.Event.ID())
	}
	l.applied = append(l.applied, ids...)
	return nil
}

func (l *ledger) snapshot() ([]int, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.batches), slices.Clone(l.applied)
}

func consumeBatchesInBackground(t *testing.T, h bus.BatchHandler, js jetstream.JetStream, opts ...bus.Option) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts = append([]bus.Option{bus.WithLogger(testLogger(t)), bus.WithValidator(admitAll)}, opts...)
	go func() { done <- bus.ConsumeBatches(ctx, js, bus.StreamEvents, bus.ConsumerStatus, h, opts...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ConsumeBatches returned %v after its context ended, want nil", err)
		}
	})
}

// TestBurstIsHandledInBatchesInStreamOrder publishes a burst before the consumer starts:
// the handler gets it in batches within the limit, every event once, in stream order.
func TestBurstIsHandledInBatchesInStreamOrder(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	pub := bus.NewPublisher(js)
	var want []string
	for i := range 60 {
		ev := newEvent(t, fmt.Sprintf("burst-%02d", i), knownType)
		if _, err := pub.Publish(t.Context(), "flotilla.placement.web", ev); err != nil {
			t.Fatal(err)
		}
		want = append(want, ev.ID())
	}
	var l ledger
	consumeBatchesInBackground(t, l.handle, js, bus.WithBatchLimits(25, 1<<20), bus.WithValidator(rejectUnknownTypes))
	poll.Until(t, patience, "the burst handled", func() error {
		if _, applied := l.snapshot(); len(applied) < len(want) {
			return fmt.Errorf("%d of %d events handled", len(applied), len(want))
		}
		return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerStatus)
	})
	batches, applied := l.snapshot()
	if !slices.Equal(applied, want) {
		t.Errorf("handled %v, want each event once in stream order %v", applied, want)
	}
	if slices.Max(batches) > 25 {
		t.Errorf("batch sizes %v exceed the limit of 25", batches)
	}
	if len(batches) >= len(want) {
		t.Errorf("batch sizes %v: a waiting burst was handled one event at a time", batches)
	}
}

// TestPoisonEventFailsAloneInABatch puts an event that always fails in the middle of a
// burst: the batch falls back to one event at a time, the poison is dead-lettered with its
// reason, and every other event takes effect exactly once.
func TestPoisonEventFailsAloneInABatch(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	pub := bus.NewPublisher(js)
	var want []string
	for i := range 10 {
		ev := newEvent(t, fmt.Sprintf("ev-%d", i), knownType)
		if _, err := pub.Publish(t.Context(), "flotilla.placement.web", ev); err != nil {
			t.Fatal(err)
		}
		if i != 4 {
			want = append(want, ev.ID())
		}
	}
	l := ledger{poison: "ev-4"}
	consumeBatchesInBackground(t, l.handle, js)
	poll.Until(t, patience, "the burst settled", func() error {
		if len(deadLetters(t, js)) == 0 {
			return errors.New("no dead letter yet")
		}
		return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerStatus)
	})
	if _, applied := l.snapshot(); !slices.Equal(applied, want) {
		t.Errorf("took effect %v, want every event but the poison once, in order: %v", applied, want)
	}
	dl := deadLetters(t, js)
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	if reason := dl[0].Header.Get("Flotilla-Dead-Letter-Reason"); !strings.Contains(reason, "ev-4 is poison") {
		t.Errorf("dead-letter reason %q does not say why", reason)
	}
}

// TestSkippedEventsAreAckedUnseen: the events WithSkip names are acknowledged without
// reaching the validator or the handler (a service's own events coming back), even one
// the validator would reject; the others are handled as usual.
func TestSkippedEventsAreAckedUnseen(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	pub := bus.NewPublisher(js)
	var want []string
	for i := range 10 {
		typ := knownType
		if i%2 == 1 {
			typ = "io.flotilla.not-a-type.v1" // the validator rejects it: skipped, it is not dead-lettered
		}
		ev := newEvent(t, fmt.Sprintf("ev-%d", i), typ)
		if _, err := pub.Publish(t.Context(), "flotilla.placement.web", ev); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			want = append(want, ev.ID())
		}
	}
	var l ledger
	consumeBatchesInBackground(t, l.handle, js, bus.WithValidator(rejectUnknownTypes),
		bus.WithSkip(func(d bus.Delivery) bool {
			return d.Event.Type() != knownType && d.Meta.Subject == "flotilla.placement.web"
		}))
	poll.Until(t, patience, "every event settled", func() error {
		return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerStatus)
	})
	if _, applied := l.snapshot(); !slices.Equal(applied, want) {
		t.Errorf("handled %v, want only the events not skipped, in order: %v", applied, want)
	}
	if dl := deadLetters(t, js); len(dl) != 0 {
		t.Errorf("%d dead letters, want none: skipped events are not validated", len(dl))
	}
}
