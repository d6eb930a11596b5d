package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// ErrWrongLastSequence reports that PublishExpectLast found a different last
// sequence on the subject: someone else published first.
var ErrWrongLastSequence = errors.New("last sequence on subject does not match")

// Publisher publishes events to JetStream, one at a time, waiting for the
// stream's acknowledgement. An event goes out within the trace of the
// context it is published in, or starts one (see ExtensionTraceparent).
type Publisher struct {
	js       jetstream.JetStream
	observer Observer
	tracer   trace.TracerProvider
}

// NewPublisher returns a Publisher on js. Of the options it takes
// WithObserver and WithTracerProvider.
func NewPublisher(js jetstream.JetStream, opts ...Option) *Publisher {
	o := newConsumeOptions(opts)
	return &Publisher{js: js, observer: o.observer, tracer: o.tracer}
}

// Publish stores ev on subject. The event id is the Nats-Msg-Id, so a
// re-publish within the stream's duplicate window is dropped; that is not an
// error, and the returned PubAck has Duplicate set.
func (p *Publisher) Publish(ctx context.Context, subject string, ev event.Event) (*jetstream.PubAck, error) {
	return p.publish(ctx, subject, ev)
}

// PublishExpectLast stores ev on subject only if the subject's last message
// has stream sequence lastSeq (0: the subject has no message), for
// optimistic concurrency. A mismatch returns an error matching
// ErrWrongLastSequence.
func (p *Publisher) PublishExpectLast(ctx context.Context, subject string, ev event.Event, lastSeq uint64) (*jetstream.PubAck, error) {
	return p.publish(ctx, subject, ev, jetstream.WithExpectLastSequencePerSubject(lastSeq))
}

func (p *Publisher) publish(ctx context.Context, subject string, ev event.Event, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	msg, err := Encode(ev, subject)
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w", subject, err)
	}
	if !hasTrace(msg.Header) {
		// An event that brings no trace of its own goes out in a span of the
		// caller's trace, or starts a trace.
		var span trace.Span
		ctx, span = startSpan(ctx, p.tracer, "publish "+ev.Type(), trace.SpanKindProducer, eventAttributes(ev, subject)...)
		InjectTrace(ctx, msg.Header)
		defer func() {
			if err != nil {
				span.SetStatus(codes.Error, err.Error())
			}
			span.End()
		}()
	}
	opts = append(opts, jetstream.WithMsgID(ev.ID()))
	ack, err := p.js.PublishMsg(ctx, msg, opts...)
	if err != nil {
		if isWrongLastSequence(err) {
			return nil, fmt.Errorf("publish %s to %s: %w: %w", ev.ID(), subject, ErrWrongLastSequence, err)
		}
		return nil, fmt.Errorf("publish %s to %s: %w", ev.ID(), subject, err)
	}
	if !ack.Duplicate {
		p.observer.Published(ev.Type())
	}
	return ack, nil
}

func isWrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	// 10164 is the code replicated streams use for the same conflict.
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
}
