// Package submit publishes fleetctl's changes to the bus, once: a change
// identical to the last event on its subject is not published again.
package submit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
)

// Source is the CloudEvent source of fleetctl's events.
const Source = "fleetctl"

// Outcome says what Publish did.
type Outcome int

const (
	// Published: the event was stored.
	Published Outcome = iota
	// Unchanged: the last event on the subject already says the same, or the
	// same event was stored moments ago; nothing new was stored.
	Unchanged
)

// Publisher publishes changes to the EVENTS stream.
type Publisher struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	pub    *bus.Publisher
}

// New returns a Publisher on js. It declares the bus topology when the
// EVENTS stream does not exist yet, so that fleetctl can be the first to
// talk to a fresh NATS server; an existing topology is left as the services
// tuned it (EnsureTopology would reset it to the defaults).
func New(ctx context.Context, js jetstream.JetStream) (*Publisher, error) {
	stream, err := js.Stream(ctx, bus.StreamEvents)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if err := bus.EnsureTopology(ctx, js, bus.TopologyOptions{}); err != nil {
			return nil, fmt.Errorf("declare the bus topology: %w", err)
		}
		stream, err = js.Stream(ctx, bus.StreamEvents)
	}
	if err != nil {
		return nil, fmt.Errorf("open stream %s: %w", bus.StreamEvents, err)
	}
	return &Publisher{js: js, stream: stream, pub: bus.NewPublisher(js)}, nil
}

// Publish stores c as an event and waits for the stream's acknowledgement.
//
// The event id is derived from the content and from the sequence of the
// subject's last event, so a retried or concurrent identical publish is
// dropped by the stream's duplicate window, while applying A, then B, then A
// again publishes A again (a content-only id would drop the second A as a
// duplicate of the first and leave B in force).
func (p *Publisher) Publish(ctx context.Context, c change.Change) (Outcome, error) {
	payload, err := p.claimCheck(ctx, c.Payload)
	if err != nil {
		return 0, err
	}
	ev, err := events.New(c.Type, Source, c.EventSubject, "", payload)
	if err != nil {
		return 0, fmt.Errorf("build %s event: %w", c.Type, err)
	}
	var lastSeq uint64
	last, err := p.stream.GetLastMsgForSubject(ctx, c.Subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return 0, fmt.Errorf("read the last event on %s: %w", c.Subject, err)
	default:
		lastSeq = last.Sequence
		if prev, err := bus.Decode(&nats.Msg{Subject: last.Subject, Header: last.Header, Data: last.Data}); err == nil &&
			prev.Type() == ev.Type() && bytes.Equal(prev.Data(), ev.Data()) {
			return Unchanged, nil
		}
	}
	sum := sha256.Sum256(ev.Data())
	ev.SetID(events.ID(Source, c.Type, c.Subject, hex.EncodeToString(sum[:]), strconv.FormatUint(lastSeq, 10)))
	ack, err := p.pub.Publish(ctx, c.Subject, ev)
	if err != nil {
		return 0, err
	}
	if ack.Duplicate {
		return Unchanged, nil
	}
	return Published, nil
}

// claimCheck stores a hub object too large to travel inline as a blob and returns the
// payload that refers to it; any other payload is returned as it is. The blob is named by
// its digest, so publishing the same object again refers to the same blob.
func (p *Publisher) claimCheck(ctx context.Context, payload any) (any, error) {
	hub, ok := payload.(events.HubResourceUpserted)
	if !ok || len(hub.Manifest) <= events.InlineManifestBytes {
		return payload, nil
	}
	ref, err := bus.PutBlob(ctx, p.js, bus.StreamHubBlobs, bus.SubjectHubBlobPrefix, hub.Manifest)
	if err != nil {
		return nil, fmt.Errorf("store a hub object of %d bytes: %w", len(hub.Manifest), err)
	}
	return events.HubResourceUpserted{ManifestRef: &ref}, nil
}
