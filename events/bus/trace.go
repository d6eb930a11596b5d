package bus

import (
	"context"
	"crypto/rand"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Trace context rides in each event as the CloudEvents distributed tracing
// extension: the W3C traceparent and tracestate as the extension attributes
// of those names, that is the ce-traceparent and ce-tracestate headers in
// binary mode. One trace then follows a placement from fleetctl through every
// service to each member's apply: a consumer handles an event within the
// event's trace (Delivery.Context), and the events it emits meanwhile carry
// that trace (Publisher and the outbox set the headers from the context).
//
// Without an OpenTelemetry SDK installed (no OTLP endpoint configured), no
// span is recorded: the trace id and parent pass through unchanged, and a
// publish with no trace in its context starts one with fresh ids.
const (
	ExtensionTraceparent = extensions.TraceParentExtension
	ExtensionTracestate  = extensions.TraceStateExtension
)

// tracerName names the tracer of the bus's spans.
const tracerName = "github.com/flotilla-dev/flotilla/events/bus"

var traceContext = propagation.TraceContext{}

// TraceContext returns ctx within the trace ev carries, or ctx itself when ev
// carries none (or a malformed one: it is ignored, never copied on).
func TraceContext(ctx context.Context, ev event.Event) context.Context {
	c := eventCarrier{ext: ev.Extensions()}
	if c.Get(ExtensionTraceparent) == "" {
		return ctx
	}
	sc := trace.SpanContextFromContext(traceContext.Extract(context.Background(), c))
	if !sc.IsValid() {
		return ctx
	}
	if len(sc.TraceState().String()) > MaxTracestate {
		// Whoever publishes chooses it; the events emitted in its trace
		// would all carry it.
		sc = sc.WithTraceState(trace.TraceState{})
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// MaxTracestate bounds the tracestate an event's trace carries on: a longer
// one is dropped (W3C Trace Context lets a vendor cut it at 512 characters).
const MaxTracestate = 512

// InjectTrace writes the trace of ctx into the binary-mode headers h of an
// event, unless they carry a valid trace already (the event's own wins) or
// ctx has none.
func InjectTrace(ctx context.Context, h nats.Header) {
	if hasTrace(h) {
		return
	}
	traceContext.Inject(ctx, headerCarrier(h))
}

// hasTrace reports whether headers h carry a valid trace.
func hasTrace(h nats.Header) bool {
	return trace.SpanContextFromContext(traceContext.Extract(context.Background(), headerCarrier(h))).IsValid()
}

// HeaderTraceparent is the header that carries an event's traceparent.
const HeaderTraceparent = HeaderPrefix + ExtensionTraceparent

// eventCarrier reads an event's tracing extensions.
type eventCarrier struct{ ext map[string]any }

func (c eventCarrier) Get(key string) string {
	s, _ := c.ext[strings.ToLower(key)].(string)
	return s
}
func (c eventCarrier) Set(string, string) {}
func (c eventCarrier) Keys() []string {
	return []string{ExtensionTraceparent, ExtensionTracestate}
}

// headerCarrier reads and writes the ce- headers of the tracing extensions.
type headerCarrier nats.Header

func (c headerCarrier) Get(key string) string {
	v, _ := headerValue(nats.Header(c), HeaderPrefix+strings.ToLower(key))
	return v
}

func (c headerCarrier) Set(key, value string) {
	// A header given under another spelling would make the message ambiguous
	// (duplicateHeader): replace it.
	name := HeaderPrefix + strings.ToLower(key)
	for k := range c {
		if strings.EqualFold(k, name) {
			delete(c, k)
		}
	}
	nats.Header(c).Set(name, value)
}

func (c headerCarrier) Keys() []string {
	return []string{ExtensionTraceparent, ExtensionTracestate}
}

// StartTrace starts a span named name in the global tracer provider, as a
// child of ctx's span if it has one. Without an SDK installed the context
// still holds a trace of fresh ids, so that every event published within it
// (a command's several events) belongs to one trace.
func StartTrace(ctx context.Context, name string) (context.Context, trace.Span) {
	return startSpan(ctx, nil, name, trace.SpanKindInternal)
}

// startSpan starts a span of kind in tp, as a child of ctx's span. When there
// is no span to be a child of and tp records none (no SDK installed), the
// returned context holds a fresh root span context anyway, so that the
// events published within it start a trace the services downstream follow.
func startSpan(ctx context.Context, tp trace.TracerProvider, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	ctx, span := tp.Tracer(tracerName).Start(ctx, name, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	if !span.SpanContext().IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, newRoot())
	}
	return ctx, span
}

// newRoot is a fresh sampled span context: sampled, so that services which
// do export spans record what follows from it.
func newRoot() trace.SpanContext {
	var b [24]byte
	_, _ = rand.Read(b[:])
	var cfg trace.SpanContextConfig
	copy(cfg.TraceID[:], b[:16])
	copy(cfg.SpanID[:], b[16:])
	cfg.TraceFlags = trace.FlagsSampled
	return trace.NewSpanContext(cfg)
}

// eventAttributes describe an event on a span, after the OpenTelemetry
// conventions for messaging and CloudEvents.
func eventAttributes(ev event.Event, subject string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("messaging.system", "nats"),
		attribute.String("messaging.destination.name", subject),
		attribute.String("cloudevents.event_id", ev.ID()),
		attribute.String("cloudevents.event_type", ev.Type()),
		attribute.String("cloudevents.event_source", ev.Source()),
		attribute.String("cloudevents.event_subject", ev.Subject()),
	}
}
