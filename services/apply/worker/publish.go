package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flotilla-dev/flotilla/events"
)

// publish sends a report unless it says the same as the last one published
// for the placement. It retries a few times; a report that still cannot be
// sent is logged, and the next one for the placement goes out regardless.
func (w *Worker) publish(ctx context.Context, r *events.WorkReported) {
	digest := ReportDigest(r)
	w.mu.Lock()
	same := w.published[r.Placement] == digest
	w.mu.Unlock()
	if same {
		return
	}
	subject, ev, err := ReportEvent(w.source, r, digest)
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

// reportWindow is how long reports on member changes of one placement gather before the
// newest goes out: applying a placement makes each object's availability change in turn,
// and one report with them all says what several would, without the traffic.
const reportWindow = 50 * time.Millisecond

// publishSoon publishes r, the placement's complete state after a member change, at the
// end of its placement's report window; a newer report replaces it until then.
func (w *Worker) publishSoon(ctx context.Context, r *events.WorkReported) {
	w.mu.Lock()
	first := w.pending[r.Placement] == nil
	w.pending[r.Placement] = r
	w.mu.Unlock()
	if !first {
		return
	}
	time.AfterFunc(reportWindow, func() {
		unlock := w.locks.lock(r.Placement)
		defer unlock()
		w.mu.Lock()
		newest := w.pending[r.Placement]
		delete(w.pending, r.Placement)
		w.mu.Unlock()
		if newest != nil && ctx.Err() == nil {
			w.publish(ctx, newest)
		}
	})
}

// dropPending forgets the report waiting for the placement: one made later replaces it.
// The caller holds the placement's lock.
func (w *Worker) dropPending(placement string) {
	w.mu.Lock()
	delete(w.pending, placement)
	w.mu.Unlock()
}

// ReportEvent is the event that publishes report r, whose ReportDigest is
// digest, from source, and the subject it goes on. Its id is fixed per
// report, so a retried publish is dropped as a duplicate by the bus, and
// later reports (even identical ones after a change in between) are not.
func ReportEvent(source string, r *events.WorkReported, digest string) (subject string, ev cloudevents.Event, err error) {
	subject, err = events.WorkStatusSubject(r.Cluster, r.Placement)
	if err != nil {
		return "", ev, err
	}
	id := events.ID(r.Cluster, r.Placement, r.ObservedAt.Format(time.RFC3339Nano), digest)
	ev, err = events.New(events.TypeWorkReported, source, subject, id, r)
	return subject, ev, err
}

// ReportDigest identifies what a report says, leaving out when it was
// observed: a report whose digest is the last one published for the
// placement says nothing new.
func ReportDigest(r *events.WorkReported) string {
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
