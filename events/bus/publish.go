package bus

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrWrongLastSequence reports that PublishExpectLast found a different last
// sequence on the subject: someone else published first.
var ErrWrongLastSequence = errors.New("last sequence on subject does not match")

// Publisher publishes events to JetStream, one at a time, waiting for the
// stream's acknowledgement.
type Publisher struct {
	js jetstream.JetStream
}

// NewPublisher returns a Publisher on js.
func NewPublisher(js jetstream.JetStream) *Publisher {
	return &Publisher{js: js}
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
	opts = append(opts, jetstream.WithMsgID(ev.ID()))
	ack, err := p.js.PublishMsg(ctx, msg, opts...)
	if err != nil {
		if isWrongLastSequence(err) {
			return nil, fmt.Errorf("publish %s to %s: %w: %w", ev.ID(), subject, ErrWrongLastSequence, err)
		}
		return nil, fmt.Errorf("publish %s to %s: %w", ev.ID(), subject, err)
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
