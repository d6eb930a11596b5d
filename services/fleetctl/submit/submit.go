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
	"sync"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
)

// Source is the CloudEvent source of fleetctl's events.
const Source = "fleetctl"

// HubSource is the CloudEvent source of hubsync's events: what users applied to a hub
// cluster. The hub keeps those objects; fleetctl refuses to change them (ErrHubOwned).
const HubSource = "hubsync"

// ErrHubOwned: the object is kept on a hub cluster, and a change published here would be
// undone by hubsync at the hub's next change, or undo the hub's.
var ErrHubOwned = errors.New("is kept on the hub cluster (hubsync published it from there): change it there, with kubectl")

// deletions are the event types that take an object off the bus: after one, the subject is
// free for anyone again.
var deletions = map[string]bool{
	events.TypePlacementDeleted:   true,
	events.TypeMemberLeft:         true,
	events.TypeHubResourceDeleted: true,
}

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
	source string
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
	return &Publisher{js: js, stream: stream, source: Source}, nil
}

// AsHub makes the publisher hubsync's: its events carry HubSource, and it may change what
// the hub owns.
func (p *Publisher) AsHub() *Publisher {
	p.source = HubSource
	return p
}

// Publish stores c as an event and waits for the stream's acknowledgement.
//
// The event id is derived from the content and from the sequence of the
// subject's last event, so a retried or concurrent identical publish is
// dropped by the stream's duplicate window, while applying A, then B, then A
// again publishes A again (a content-only id would drop the second A as a
// duplicate of the first and leave B in force).
func (p *Publisher) Publish(ctx context.Context, c change.Change) (Outcome, error) {
	out, err := p.PublishAll(ctx, []change.Change{c})
	if err != nil {
		return 0, err
	}
	return out[0], nil
}

// maxParallelReads bounds the reads of subjects' last events PublishAll runs at once.
const maxParallelReads = 16

// PublishAll stores the changes as events, in order, as Publish does each, and
// returns what it did with each. The subjects' last events are read in parallel
// and the events are published without waiting for each acknowledgement in turn,
// so applying 20 objects takes a few round trips to NATS rather than 40. A
// connection keeps its messages in order, so the stream stores them in the order
// given. Changes that share a subject are published one after another: each one's
// id depends on the one before.
//
// An error names the change it concerns (*ChangeError); changes before it were
// stored, later ones may have been.
//
// The last event published is marked as such (events.MarkLast): the rollout
// cuts the snapshots the changes concern at once instead of waiting for more.
func (p *Publisher) PublishAll(ctx context.Context, cs []change.Change) ([]Outcome, error) {
	return p.publishAll(ctx, cs, true)
}

// publishAll is PublishAll; markLast says whether its last event ends the
// whole call's.
func (p *Publisher) publishAll(ctx context.Context, cs []change.Change, markLast bool) ([]Outcome, error) {
	out := make([]Outcome, len(cs))
	seen := map[string]bool{}
	for i, c := range cs {
		if seen[c.Subject] {
			// A subject twice: the first of them must be stored before the
			// second's id can be derived.
			head, err := p.publishAll(ctx, cs[:i], false)
			if err != nil {
				return nil, err
			}
			tail, err := p.publishAll(ctx, cs[i:], markLast)
			if err != nil {
				var ce *ChangeError
				if errors.As(err, &ce) {
					ce.Index += i
				}
				return nil, err
			}
			return append(head, tail...), nil
		}
		seen[c.Subject] = true
	}
	evs := make([]*cloudevents.Event, len(cs))
	if err := p.prepare(ctx, cs, evs, out); err != nil {
		return nil, err
	}
	if markLast {
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i] != nil {
				events.MarkLast(evs[i])
				break
			}
		}
	}
	acks := make([]jetstream.PubAckFuture, len(cs))
	for i, ev := range evs {
		if ev == nil {
			continue
		}
		msg, err := bus.Encode(*ev, cs[i].Subject)
		if err == nil {
			acks[i], err = p.js.PublishMsgAsync(msg, jetstream.WithMsgID(ev.ID()))
		}
		if err != nil {
			return nil, &ChangeError{Index: i, Err: fmt.Errorf("publish %s to %s: %w", ev.ID(), cs[i].Subject, err)}
		}
	}
	for i, f := range acks {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				out[i] = Unchanged
			}
		case err := <-f.Err():
			return nil, &ChangeError{Index: i, Err: fmt.Errorf("publish %s to %s: %w", evs[i].ID(), cs[i].Subject, err)}
		case <-ctx.Done():
			return nil, &ChangeError{Index: i, Err: fmt.Errorf("publish %s to %s: %w", evs[i].ID(), cs[i].Subject, ctx.Err())}
		}
	}
	return out, nil
}

// prepare builds each change's event (nil when the subject's last event already
// says the same: out is then Unchanged), reading the subjects' last events in
// parallel.
func (p *Publisher) prepare(ctx context.Context, cs []change.Change, evs []*cloudevents.Event, out []Outcome) error {
	errs := make([]error, len(cs))
	slots := make(chan struct{}, maxParallelReads)
	var wg sync.WaitGroup
	for i := range cs {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			ev, unchanged, err := p.event(ctx, cs[i])
			switch {
			case err != nil:
				errs[i] = err
			case unchanged:
				out[i] = Unchanged
			default:
				evs[i] = ev
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return &ChangeError{Index: i, Err: err}
		}
	}
	return nil
}

// event builds the event of c with its id (see Publish), or reports that the last
// event on c's subject already says the same.
func (p *Publisher) event(ctx context.Context, c change.Change) (*cloudevents.Event, bool, error) {
	payload, err := p.claimCheck(ctx, c.Payload)
	if err != nil {
		return nil, false, err
	}
	ev, err := events.New(c.Type, p.source, c.EventSubject, "", payload)
	if err != nil {
		return nil, false, fmt.Errorf("build %s event: %w", c.Type, err)
	}
	var lastSeq uint64
	last, err := p.stream.GetLastMsgForSubject(ctx, c.Subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		return nil, false, fmt.Errorf("read the last event on %s: %w", c.Subject, err)
	default:
		lastSeq = last.Sequence
		prev, err := bus.Decode(&nats.Msg{Subject: last.Subject, Header: last.Header, Data: last.Data})
		if err == nil && prev.Type() == ev.Type() && bytes.Equal(prev.Data(), ev.Data()) {
			return nil, true, nil
		}
		if err == nil && prev.Source() == HubSource && p.source != HubSource && !deletions[prev.Type()] {
			return nil, false, ErrHubOwned
		}
	}
	sum := sha256.Sum256(ev.Data())
	ev.SetID(events.ID(p.source, c.Type, c.Subject, hex.EncodeToString(sum[:]), strconv.FormatUint(lastSeq, 10)))
	return &ev, false, nil
}

// ChangeError is PublishAll's error about one of its changes.
type ChangeError struct {
	// Index is the change's place in the list given.
	Index int
	Err   error
}

func (e *ChangeError) Error() string { return e.Err.Error() }
func (e *ChangeError) Unwrap() error { return e.Err }

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
