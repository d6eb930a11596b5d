package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

func ownerToken(placement string) string {
	return manifest.OwnerLabel(placement)[len(manifest.OwnerLabelPrefix):]
}

// handle takes one message of the cluster's WORK consumer: it records the
// desired state and queues the placement. The apply itself runs in the
// placement queue, so a slow or unreachable member never holds messages.
func (w *Worker) handle(ctx context.Context, ev cloudevents.Event, m bus.Meta) error {
	return w.take(ctx, ev, m.Sequence)
}

// take records desired state carried by ev, stored at stream sequence seq,
// and the trace of ctx it came in. Older messages than the one held for the
// placement are ignored (redeliveries, and the replay overlapping the
// consumer).
func (w *Worker) take(ctx context.Context, ev cloudevents.Event, seq uint64) error {
	d := &desired{seq: seq, at: time.Now(), trace: trace.SpanContextFromContext(ctx)}
	var placement, cluster string
	switch ev.Type() {
	case events.TypeWorkDesired:
		p, err := events.DecodeAs[events.WorkDesired](ev)
		if err != nil {
			return bus.Permanent(err)
		}
		d.work, placement, cluster = p, p.Placement, p.Cluster
	case events.TypeWorkTombstoned:
		p, err := events.DecodeAs[events.WorkTombstoned](ev)
		if err != nil {
			return bus.Permanent(err)
		}
		d.tomb, placement, cluster = p, p.Placement, p.Cluster
	case events.TypeWorkRemoved:
		p, err := events.DecodeAs[events.WorkRemoved](ev)
		if err != nil {
			return bus.Permanent(err)
		}
		if p.Cluster != w.cfg.Cluster {
			return bus.Permanent(fmt.Errorf("a removal record of cluster %q reached the worker of %q", p.Cluster, w.cfg.Cluster))
		}
		w.tookRemoved(p)
		return nil
	default:
		return bus.Permanent(fmt.Errorf("event type %q does not belong on the work stream", ev.Type()))
	}
	if cluster != w.cfg.Cluster {
		return bus.Permanent(fmt.Errorf("desired state for cluster %q reached the worker of %q", cluster, w.cfg.Cluster))
	}
	w.mu.Lock()
	if cur := w.desired[placement]; cur != nil && cur.seq >= seq {
		w.mu.Unlock()
		return nil
	}
	// A tombstone this worker carried out before (it found its own record) is done.
	d.done = d.tomb != nil && w.removed[placement] == seq
	w.desired[placement] = d
	w.mu.Unlock()
	if d.done {
		w.log.Debug("tombstone carried out before; not again", "placement", placement, "sequence", seq)
		return nil
	}
	w.queue.Add(item{reconcile, placement})
	return nil
}

// tookRemoved records that the tombstone at p.TombstoneSequence was carried out; if it is
// the placement's current desired state, it is done.
func (w *Worker) tookRemoved(p *events.WorkRemoved) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p.TombstoneSequence <= w.removed[p.Placement] {
		return
	}
	w.removed[p.Placement] = p.TombstoneSequence
	if cur := w.desired[p.Placement]; cur != nil && cur.tomb != nil && cur.seq == p.TombstoneSequence {
		cur.done = true
	}
}

// replay reads the current desired state of every placement of the cluster
// (the last message of each subject) before the worker starts consuming.
func (w *Worker) replay(ctx context.Context) error {
	tok, err := bus.SubjectToken(w.cfg.Cluster)
	if err != nil {
		return err
	}
	// A consumer that reads without acks and goes away by itself. Its name is
	// fixed and its one filter travels in the create request's subject, so a
	// worker's NATS credentials can allow exactly this consumer on exactly
	// its own cluster's subjects (deploy/kubernetes/member.sh). One left by a
	// worker that died mid-replay is removed first: it may have moved on.
	name := "replay-" + tok
	if err := w.cfg.JetStream.DeleteConsumer(ctx, bus.StreamWork, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("replay desired state: remove stale consumer: %w", err)
	}
	cons, err := w.cfg.JetStream.CreateConsumer(ctx, bus.StreamWork, jetstream.ConsumerConfig{
		Name:              name,
		FilterSubject:     bus.SubjectWorkPrefix + tok + ".>",
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return fmt.Errorf("replay desired state: %w", err)
	}
	defer func() {
		_ = w.cfg.JetStream.DeleteConsumer(context.WithoutCancel(ctx), bus.StreamWork, cons.CachedInfo().Name)
	}()
	pending := cons.CachedInfo().NumPending
	for pending > 0 {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			if errors.Is(err, context.Canceled) || ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("replay desired state: %w", err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("replay desired state: %w", err)
		}
		pending = md.NumPending
		ev, err := bus.DecodeJetStream(msg)
		if err != nil {
			w.log.Warn("skipping an undecodable desired state in replay; the consumer dead-letters it",
				"subject", msg.Subject(), "err", err)
			continue
		}
		// The replay is a second way in: it checks what the consumer checks.
		if err := events.Admit(msg.Subject(), ev); err != nil {
			w.log.Warn("skipping a desired state the catalogue refuses in replay; the consumer dead-letters it",
				"subject", msg.Subject(), "err", err)
			continue
		}
		if err := w.take(bus.TraceContext(ctx, ev), ev, md.Sequence.Stream); err != nil {
			w.log.Warn("skipping an invalid desired state in replay; the consumer dead-letters it",
				"subject", msg.Subject(), "err", err)
		}
	}
	return nil
}

// resolve returns work with its manifests: work itself when they came inline, or a copy
// with the manifests fetched from the blob its ManifestsRef names (the event's validation
// checked that the reference lies under this cluster's and placement's prefix). The fetched
// manifests stay with d, so resyncs do not fetch them again.
func (w *Worker) resolve(ctx context.Context, d *desired, work *events.WorkDesired) (*events.WorkDesired, error) {
	if work.ManifestsRef == nil {
		return work, nil
	}
	w.mu.Lock()
	resolved := d.resolved
	w.mu.Unlock()
	if resolved != nil {
		return resolved, nil
	}
	data, err := bus.GetBlob(ctx, w.cfg.JetStream.Conn(), bus.StreamWorkBlobs, *work.ManifestsRef, blobChunkWait)
	if err != nil {
		return nil, fmt.Errorf("fetch the manifests of %s (%d bytes): %w", work.Placement, work.ManifestsRef.Size, err)
	}
	var manifests []json.RawMessage
	if err := json.Unmarshal(data, &manifests); err != nil {
		return nil, fmt.Errorf("decode the manifests of %s: %w", work.Placement, err)
	}
	copied := *work
	copied.Manifests, copied.ManifestsRef = manifests, nil
	w.mu.Lock()
	d.resolved = &copied
	w.mu.Unlock()
	return &copied, nil
}

// blobChunkWait bounds the wait for each chunk of a work blob.
const blobChunkWait = 30 * time.Second
