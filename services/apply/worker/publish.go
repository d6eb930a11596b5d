package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	"github.com/flotilla-dev/flotilla/events"
)

// publish sends a report unless it says the same as the last one published
// for the placement. It retries a few times; a report that still cannot be
// sent is logged, and the next one for the placement goes out regardless.
func (w *Worker) publish(ctx context.Context, r *events.WorkReported) {
	digest := reportDigest(r)
	w.mu.Lock()
	same := w.published[r.Placement] == digest
	w.mu.Unlock()
	if same {
		return
	}
	subject, err := events.WorkStatusSubject(r.Cluster, r.Placement)
	if err != nil {
		w.log.Error("cannot publish a report", "placement", r.Placement, "err", err)
		return
	}
	// The id is fixed per report, so a retried publish is dropped as a
	// duplicate by the bus, and later reports (even identical ones after a
	// change in between) are not.
	id := events.ID(r.Cluster, r.Placement, r.ObservedAt.Format(time.RFC3339Nano), digest)
	ev, err := events.New(events.TypeWorkReported, w.source, subject, id, r)
	if err != nil {
		w.log.Error("cannot publish a report", "placement", r.Placement, "err", err)
		return
	}
	delay := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		_, err = w.publisher.Publish(ctx, subject, ev)
		if err == nil || attempt == 5 || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay *= 2
	}
	if err != nil {
		w.log.Error("report not published", "placement", r.Placement, "err", err)
		return
	}
	w.mu.Lock()
	w.published[r.Placement] = digest
	w.mu.Unlock()
}

// reportDigest identifies what a report says, leaving out when it was
// observed.
func reportDigest(r *events.WorkReported) string {
	c := *r
	c.ObservedAt = time.Time{}
	c.Takeovers = make([]events.TakeoverDecision, len(r.Takeovers))
	for i, d := range r.Takeovers {
		d.DecidedAt = time.Time{}
		c.Takeovers[i] = d
	}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// keyedLocks serialises work on one placement across the worker's queues,
// so that its reports are published in the order they were made.
type keyedLocks struct {
	m sync.Map // string -> *sync.Mutex
}

func (k *keyedLocks) lock(key string) func() {
	v, _ := k.m.LoadOrStore(key, &sync.Mutex{})
	mu := v.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}
