package bus_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// validTraceparent is a W3C traceparent of version 00.
var validTraceparent = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// spanContext is a sampled span context with the given ids (hex).
func spanContext(t testing.TB, traceID, spanID string) trace.SpanContext {
	t.Helper()
	tid, err := trace.TraceIDFromHex(traceID)
	if err != nil {
		t.Fatal(err)
	}
	sid, err := trace.SpanIDFromHex(spanID)
	if err != nil {
		t.Fatal(err)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
}

func TestTheTraceRidesInTheEventsHeaders(t *testing.T) {
	sc := spanContext(t, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	msg, err := bus.Encode(newEvent(t, "e1", knownType), "flotilla.placement.web")
	if err != nil {
		t.Fatal(err)
	}
	bus.InjectTrace(ctx, msg.Header)
	if got := msg.Header.Get(bus.HeaderTraceparent); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("ce-traceparent = %q", got)
	}
	ev, err := bus.Decode(msg)
	if err != nil {
		t.Fatal(err)
	}
	got := trace.SpanContextFromContext(bus.TraceContext(context.Background(), ev))
	if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsRemote() {
		t.Errorf("the consumer sees span context %v, want %v as its remote parent", got, sc)
	}

	// An event's own trace wins over the context's.
	other := trace.ContextWithSpanContext(context.Background(), spanContext(t, "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"))
	bus.InjectTrace(other, msg.Header)
	if got := msg.Header.Get(bus.HeaderTraceparent); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("InjectTrace replaced the event's own trace: %q", got)
	}
}

func TestALongTracestateIsNotCarriedOn(t *testing.T) {
	var members []string
	for i := range 32 {
		members = append(members, fmt.Sprintf("vendor%02d=%s", i, strings.Repeat("x", 200)))
	}
	for _, c := range []struct {
		tracestate string
		kept       bool
	}{{"congo=t61rcWkgMzE", true}, {strings.Join(members, ","), false}} {
		ev := newEvent(t, "e1", knownType)
		ev.SetExtension(bus.ExtensionTraceparent, "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		ev.SetExtension(bus.ExtensionTracestate, c.tracestate)
		sc := trace.SpanContextFromContext(bus.TraceContext(context.Background(), ev))
		if !sc.IsValid() {
			t.Fatalf("tracestate of %d bytes: the trace was dropped", len(c.tracestate))
		}
		if kept := sc.TraceState().String() == c.tracestate; kept != c.kept {
			t.Errorf("tracestate of %d bytes kept: %v, want %v", len(c.tracestate), kept, c.kept)
		}
	}
}

func TestAMalformedTraceIsNotCarriedOn(t *testing.T) {
	for _, tp := range []string{"garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-zz"} {
		t.Run(tp, func(t *testing.T) {
			ev := newEvent(t, "e1", knownType)
			ev.SetExtension(bus.ExtensionTraceparent, tp)
			ctx := bus.TraceContext(context.Background(), ev)
			if trace.SpanContextFromContext(ctx).IsValid() {
				t.Errorf("traceparent %q gave a trace", tp)
			}
			// And a header holding it is replaced, under one spelling.
			msg, err := bus.Encode(ev, "flotilla.placement.web")
			if err != nil {
				t.Fatal(err)
			}
			sc := spanContext(t, "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
			bus.InjectTrace(trace.ContextWithSpanContext(context.Background(), sc), msg.Header)
			if got := msg.Header.Get(bus.HeaderTraceparent); got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
				t.Errorf("ce-traceparent = %q", got)
			}
			if _, err := bus.Decode(msg); err != nil {
				t.Errorf("the message does not decode: %v", err)
			}
		})
	}
}

// lastEvent is the last event stored on subject.
func lastEvent(t testing.TB, js jetstream.JetStream, subject string) event.Event {
	t.Helper()
	s, err := js.Stream(t.Context(), bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(t.Context(), subject)
	if err != nil {
		t.Fatalf("no event on %s: %v", subject, err)
	}
	ev, err := bus.Decode(&nats.Msg{Subject: m.Subject, Header: m.Header, Data: m.Data})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func traceparentOf(ev event.Event) string {
	s, _ := ev.Extensions()[bus.ExtensionTraceparent].(string)
	return s
}

// relay consumes as the scheduler and publishes, for each event it handles
// (but its own), an event with the id out-<id> on flotilla.placement.out-<id>,
// within the handled event's context.
func relay(t *testing.T, js jetstream.JetStream, tp trace.TracerProvider) {
	pub := bus.NewPublisher(js, bus.WithTracerProvider(tp))
	h := func(ctx context.Context, batch []bus.Delivery) error {
		for _, d := range batch {
			if strings.HasPrefix(d.Event.ID(), "out-") {
				continue // its own
			}
			out := newEvent(t, "out-"+d.Event.ID(), knownType)
			if _, err := pub.Publish(d.Context(ctx), "flotilla.placement.out-"+d.Event.ID(), out); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- bus.ConsumeBatches(ctx, js, bus.StreamEvents, bus.ConsumerScheduler, h,
			bus.WithLogger(testLogger(t)), bus.WithTracerProvider(tp), bus.WithValidator(admitAll))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ConsumeBatches: %v", err)
		}
	})
}

func TestWhatAHandlerPublishesCarriesTheTraceOfWhatItHandles(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	ctx, root := tp.Tracer("test").Start(t.Context(), "fleetctl apply")
	if _, err := bus.NewPublisher(js, bus.WithTracerProvider(tp)).Publish(ctx, "flotilla.placement.web", newEvent(t, "in", knownType)); err != nil {
		t.Fatal(err)
	}
	root.End()
	relay(t, js, tp)
	poll.Until(t, patience, "the handler's event published", func() error { return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerScheduler) })

	in, out := lastEvent(t, js, "flotilla.placement.web"), lastEvent(t, js, "flotilla.placement.out-in")
	inSC := trace.SpanContextFromContext(bus.TraceContext(t.Context(), in))
	outSC := trace.SpanContextFromContext(bus.TraceContext(t.Context(), out))
	if inSC.TraceID() != root.SpanContext().TraceID() || outSC.TraceID() != inSC.TraceID() {
		t.Fatalf("traces: root %s, handled event %s, published event %s; want one trace",
			root.SpanContext().TraceID(), inSC.TraceID(), outSC.TraceID())
	}
	// The spans chain: publishing "in" -> handling it -> publishing "out",
	// each event naming its publishing span as its parent.
	var process, publishOut sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		switch {
		case s.Name() == "process "+knownType && s.Parent().SpanID() == inSC.SpanID():
			process = s
		case s.SpanContext().SpanID() == outSC.SpanID():
			publishOut = s
		}
	}
	if process == nil || publishOut == nil {
		t.Fatalf("no handling span whose parent is the span the handled event names (%s), or no span for the event "+
			"published; spans recorded: %v", inSC.SpanID(), names(spans.Ended()))
	}
	if process.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("the handling span is of kind %s", process.SpanKind())
	}
	if publishOut.Parent().SpanID() != process.SpanContext().SpanID() || publishOut.SpanKind() != trace.SpanKindProducer {
		t.Errorf("the published event's span is not a child of the handling span: spans %v", names(spans.Ended()))
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, fmt.Sprintf("%s(%s<-%s)", s.Name(), s.SpanContext().SpanID(), s.Parent().SpanID()))
	}
	return out
}

func TestWithoutTracingTheTracePassesThroughUnchanged(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	tp := noop.NewTracerProvider()
	// Two events in two traces, handled in one batch: each handler's event
	// carries its own event's trace, as it came.
	pub := bus.NewPublisher(js, bus.WithTracerProvider(tp))
	want := map[string]string{
		"a": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"b": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}
	for id, parent := range want {
		ev := newEvent(t, id, knownType)
		ev.SetExtension(bus.ExtensionTraceparent, parent)
		if _, err := pub.Publish(t.Context(), "flotilla.placement."+id, ev); err != nil {
			t.Fatal(err)
		}
	}
	relay(t, js, tp)
	poll.Until(t, patience, "the handler's events published", func() error { return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerScheduler) })
	for id, parent := range want {
		if got := traceparentOf(lastEvent(t, js, "flotilla.placement.out-"+id)); got != parent {
			t.Errorf("the event published for %s carries traceparent %q, want %q", id, got, parent)
		}
	}

	// An event published with no trace in its context starts one.
	if _, err := pub.Publish(t.Context(), "flotilla.placement.c", newEvent(t, "c", knownType)); err != nil {
		t.Fatal(err)
	}
	if got := traceparentOf(lastEvent(t, js, "flotilla.placement.c")); !validTraceparent.MatchString(got) || got == want["a"] || got == want["b"] {
		t.Errorf("an event published outside any trace carries traceparent %q, want a new one", got)
	}
}

// observed records what an Observer is told.
type observed struct {
	mu        sync.Mutex
	published []string
	handled   []string
	settled   []string
}

func (o *observed) Published(typ string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.published = append(o.published, typ)
}

func (o *observed) Handled(consumer, typ string, took time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.handled = append(o.handled, consumer+" "+typ)
}

func (o *observed) Settled(consumer, typ string, outcome bus.Outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.settled = append(o.settled, fmt.Sprintf("%s %s %s", consumer, typ, outcome))
}

func (o *observed) snapshot() (published, handled, settled []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Sorted(slices.Values(o.published)), slices.Sorted(slices.Values(o.handled)), slices.Sorted(slices.Values(o.settled))
}

func TestTheObserverLearnsHowEveryDeliveryEnded(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{})
	var o observed
	pub := bus.NewPublisher(js, bus.WithObserver(&o))
	for _, id := range []string{"good", "flaky", "doomed", "good"} { // the second "good" is a duplicate
		if _, err := pub.Publish(t.Context(), "flotilla.placement."+id, newEvent(t, id, knownType)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(t.Context(), "flotilla.placement.garbage", []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	h := func(_ context.Context, ev event.Event, m bus.Meta) error {
		switch {
		case ev.ID() == "flaky" && m.NumDelivered == 1:
			return errors.New("try again")
		case ev.ID() == "doomed":
			return bus.Permanent(errors.New("never"))
		}
		return nil
	}
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerStatus, h, bus.WithObserver(&o), bus.WithRetryDelay(10*time.Millisecond, 10*time.Millisecond))
	poll.Until(t, patience, "the consumer settled", func() error { return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerStatus) })

	published, handled, settledAs := o.snapshot()
	if want := []string{knownType, knownType, knownType}; !slices.Equal(published, want) {
		t.Errorf("published = %v, want %v (a duplicate is not published again)", published, want)
	}
	c := bus.ConsumerStatus + " " + knownType
	if want := []string{c, c, c, c}; !slices.Equal(handled, want) {
		t.Errorf("handled = %v, want %v (flaky twice)", handled, want)
	}
	want := []string{
		bus.ConsumerStatus + "  dead_lettered", // garbage: no type
		c + " acked", c + " acked", c + " dead_lettered", c + " retried",
	}
	if !slices.Equal(settledAs, want) {
		t.Errorf("settled = %q\nwant %q", settledAs, want)
	}
}
