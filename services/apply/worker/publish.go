package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"

	"github.com/flotilla-dev/flotilla/events"
)

// publish sends a report unless it says the same as the last one published for the
// placement. One the bus does not take is kept and sent again until it is (see resend),
// unless a newer report for the placement replaces it first: the newest state wins, and at
// most one report per placement waits. The caller holds the placement's lock, so reports
// leave in the order they were made.
func (w *Worker) publish(ctx context.Context, r *events.WorkReported) {
	w.metrics.reported(r)
	w.publishTakeovers(ctx, r)
	digest := ReportDigest(r)
	key := outKey{placement: r.Placement, kind: outReport}
	w.mu.Lock()
	same := w.published[r.Placement] == digest
	if same {
		// The bus has this state already: an older report must not follow it.
		delete(w.unsent, key)
	}
	w.mu.Unlock()
	if same {
		return
	}
	subject, ev, err := ReportEvent(w.source, r, digest)
	if err != nil {
		w.log.Error("cannot publish a report", "placement", r.Placement, "err", err)
		return
	}
	w.send(ctx, key, &outgoing{subject: subject, ev: ev, sent: func() { w.published[r.Placement] = digest }})
}

// recordRemoved publishes the worker's record that it carried out tomb, the desired state
// at WORK sequence seq, where a restarted worker finds it (see take).
func (w *Worker) recordRemoved(ctx context.Context, tomb *events.WorkTombstoned, seq uint64) {
	w.mu.Lock()
	known := w.removed[tomb.Placement] >= seq
	w.mu.Unlock()
	if known {
		return
	}
	subject, err := events.WorkRemovedSubject(w.cfg.Cluster, tomb.Placement)
	if err != nil {
		w.log.Error("cannot record a carried-out tombstone", "placement", tomb.Placement, "err", err)
		return
	}
	p := events.WorkRemoved{Cluster: w.cfg.Cluster, Placement: tomb.Placement, TombstoneSequence: seq, RemovedAt: time.Now().UTC()}
	id := events.ID("removed", w.cfg.Cluster, tomb.Placement, strconv.FormatUint(seq, 10))
	ev, err := events.New(events.TypeWorkRemoved, w.source, subject, id, p)
	if err != nil {
		w.log.Error("cannot record a carried-out tombstone", "placement", tomb.Placement, "err", err)
		return
	}
	w.send(ctx, outKey{placement: tomb.Placement, kind: outRemoved}, &outgoing{subject: subject, ev: ev, sent: func() {
		w.removed[tomb.Placement] = max(w.removed[tomb.Placement], seq)
	}})
}

// outKey names what waits to be sent: one report and one removal record per placement.
type outKey struct {
	placement string
	kind      outKind
}

type outKind int

const (
	outReport outKind = iota
	outRemoved
)

// outgoing is an event to publish; sent runs, under the worker's mutex, once the bus took it.
type outgoing struct {
	subject string
	ev      cloudevents.Event
	sent    func()
}

// send publishes o now, unless others wait because the bus is not taking them: then, and if
// the bus refuses o, o waits in unsent, replacing an older one of its key, for resend. The
// caller holds the placement's lock.
func (w *Worker) send(ctx context.Context, key outKey, o *outgoing) {
	w.mu.Lock()
	backlog := len(w.unsent) > 0
	_, replaces := w.unsent[key]
	if backlog {
		w.unsent[key] = o
	}
	w.mu.Unlock()
	if backlog {
		if !replaces {
			w.log.Debug("the bus is not taking events; this one waits", "placement", key.placement, "subject", o.subject)
		}
		w.wakeResend()
		return
	}
	if err := w.publishOnce(ctx, o); err != nil {
		if ctx.Err() != nil {
			return
		}
		w.log.Warn("event not published; it waits and is sent again until the bus takes it, unless a newer one replaces it",
			"placement", key.placement, "subject", o.subject, "err", err)
		w.mu.Lock()
		w.unsent[key] = o
		w.mu.Unlock()
		w.wakeResend()
		return
	}
}

// publishOnce publishes o and records that it was sent.
func (w *Worker) publishOnce(ctx context.Context, o *outgoing) error {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	if _, err := w.publisher.Publish(ctx, o.subject, o.ev); err != nil {
		return err
	}
	w.mu.Lock()
	o.sent()
	w.mu.Unlock()
	return nil
}

func (w *Worker) wakeResend() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Pacing of resend. A publish in flight when the NATS server restarts gets no
// acknowledgement: it waits for publishTimeout before it is sent again (the
// event's id makes the second copy a duplicate if the first was stored), so
// the timeout bounds how long a report can lag a bus restart. JetStream
// acknowledges in milliseconds otherwise; at 10 s, a report lagged the
// restart by ~8 s in half of e2e/faults' NATS restarts.
const (
	publishTimeout = 3 * time.Second
	resendFirst    = 100 * time.Millisecond
	resendMax      = 10 * time.Second
)

// resend sends what waits in unsent until ctx ends: each in turn, under its placement's
// lock, stopping at the first refusal and trying again later, with backoff. Event ids are
// fixed per event, so a publish that reached the bus though its acknowledgement was lost is
// dropped as a duplicate when sent again.
func (w *Worker) resend(ctx context.Context) {
	delay := resendFirst
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		for {
			n, err := w.resendRound(ctx)
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, errMore) {
				continue // added while sending: no need to wait
			}
			if err == nil {
				if n > 0 {
					w.log.Info("the bus takes events again; the waiting ones were sent", "events", n)
				}
				delay = resendFirst
				break
			}
			w.log.Debug("the bus still refuses events; trying again", "retry_in", delay, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, resendMax)
		}
	}
}

// resendRound sends what waits, and returns how many it sent, or the first refusal.
func (w *Worker) resendRound(ctx context.Context) (int, error) {
	w.mu.Lock()
	keys := make([]outKey, 0, len(w.unsent))
	for k := range w.unsent {
		keys = append(keys, k)
	}
	w.mu.Unlock()
	sent := 0
	for _, k := range keys {
		err := func() error {
			unlock := w.locks.lock(k.placement)
			defer unlock()
			w.mu.Lock()
			o := w.unsent[k]
			w.mu.Unlock()
			if o == nil {
				return nil // replaced and sent meanwhile
			}
			if err := w.publishOnce(ctx, o); err != nil {
				return err
			}
			w.mu.Lock()
			if w.unsent[k] == o {
				delete(w.unsent, k)
			}
			w.mu.Unlock()
			sent++
			return nil
		}()
		if err != nil {
			return sent, err
		}
	}
	w.mu.Lock()
	more := len(w.unsent) > 0
	w.mu.Unlock()
	if more {
		return sent, errMore
	}
	return sent, nil
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

// errMore says that events were added while a round was sending.
var errMore = errors.New("more events wait")
