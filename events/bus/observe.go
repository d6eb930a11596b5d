package bus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Observer learns what happens to events on the bus, for metrics (package
// platform/metrics implements it). Its methods must be quick and safe for
// concurrent use. eventType is what the event's ce-type header says, as
// sent: an observer that labels by it must bound the values it accepts.
type Observer interface {
	// Published is called once the bus has stored an event a Publisher sent.
	Published(eventType string)
	// Handled is called after each handler call an event went through, with
	// how long the call took: for a batch, each of its events saw the
	// batch's time.
	Handled(consumer, eventType string, took time.Duration)
	// Settled is called once per delivery: acknowledged, handed back for a
	// retry, or dead-lettered.
	Settled(consumer, eventType string, outcome Outcome)
}

// Outcome is how a delivery was settled.
type Outcome int

const (
	// Acked: the event was handled (or had been before) and acknowledged.
	Acked Outcome = iota
	// Retried: handling failed and the event will be delivered again.
	Retried
	// DeadLettered: the event can never be handled; it went to the
	// dead-letter stream.
	DeadLettered
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "acked"
	case Retried:
		return "retried"
	case DeadLettered:
		return "dead_lettered"
	}
	return "unknown"
}

// WithObserver tells o what happens to each delivery (Consume) or publish
// (NewPublisher).
func WithObserver(o Observer) Option {
	return func(c *consumeOptions) {
		if o != nil {
			c.observer = o
		}
	}
}

// WithTracerProvider records the spans of handling (Consume) or publishing
// (NewPublisher) in tp. Default the global provider (otel.GetTracerProvider).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *consumeOptions) { c.tracer = tp }
}

type noObserver struct{}

func (noObserver) Published(string)                      {}
func (noObserver) Handled(string, string, time.Duration) {}
func (noObserver) Settled(string, string, Outcome)       {}

// settled tells the observer how msg was settled.
func (w *worker) settled(msg jetstream.Msg, consumer string, outcome Outcome) {
	typ, _ := headerValue(msg.Headers(), HeaderPrefix+"type")
	w.opts.observer.Settled(consumer, typ, outcome)
}

// startHandling starts the span of handling each of ps, a child of the span
// that published it, and returns a function that ends them with err.
func (w *worker) startHandling(ctx context.Context, ps []pending) (end func(took time.Duration, err error)) {
	spans := make([]trace.Span, len(ps))
	for i := range ps {
		d := &ps[i].d
		attrs := append(eventAttributes(d.Event, d.Meta.Subject), attribute.String("messaging.consumer.group.name", d.Meta.Consumer))
		sctx, span := startSpan(TraceContext(ctx, d.Event), w.opts.tracer, "process "+d.Event.Type(), trace.SpanKindConsumer, attrs...)
		d.trace = trace.SpanContextFromContext(sctx)
		spans[i] = span
	}
	return func(took time.Duration, err error) {
		for i, span := range spans {
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, "handler failed")
			}
			span.End()
			w.opts.observer.Handled(ps[i].d.Meta.Consumer, ps[i].d.Event.Type(), took)
		}
	}
}

// Context returns ctx within the event's trace: the span of its handling,
// whose child every event emitted while handling it becomes (the publisher and
// the outbox take the trace from the context). A batch handler passes each
// event's Context to the work it does for that event.
func (d Delivery) Context(ctx context.Context) context.Context {
	if !d.trace.IsValid() {
		return TraceContext(ctx, d.Event)
	}
	return trace.ContextWithSpanContext(ctx, d.trace)
}
