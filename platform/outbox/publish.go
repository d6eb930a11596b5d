package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
)

// claim reads the next rows of the held partitions in id order, leaving out
// a row waiting for a retry and every row behind it on its subject.
const claim = `
	select o.id, o.event_id, o.subject, o.type, o.headers, o.payload, o.attempts
	from outbox o
	where o.published_at is null and o.quarantined_at is null
	  and o.relay_partition = any($1::int[])
	  and not exists (
		select 1 from outbox h
		where h.subject = o.subject and h.id <= o.id
		  and h.published_at is null and h.quarantined_at is null and h.retry_at > now())
	order by o.id
	limit $2`

// row is an outbox row being published, and how its publish went.
type row struct {
	id                    int64
	eventID, subject, typ string
	headers, payload      []byte
	attempts              int

	size      int64
	err       error
	permanent bool // err can never go away: quarantine the row now
	busErr    bool // err may be the bus's, not the row's
	published bool
}

// errAckTimeout is a publish whose ack did not come within AckWait.
var errAckTimeout = errors.New("no ack from JetStream in time")

// errBadHeaders wraps headers that do not decode.
var errBadHeaders = errors.New("headers do not decode")

// round publishes one batch of the held partitions and records the outcome.
// It returns how many rows changed state (published, failed or quarantined);
// an error is the database's and ends the session.
func (s *session) round(ctx context.Context) (int, error) {
	parts := s.partitions()
	if len(parts) == 0 {
		return 0, nil
	}
	rows, err := s.conn.Query(ctx, claim, parts, s.r.Batch)
	if err != nil {
		return 0, fmt.Errorf("outbox relay: read rows: %w", err)
	}
	batch, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*row, error) {
		x := &row{}
		return x, r.Scan(&x.id, &x.eventID, &x.subject, &x.typ, &x.headers, &x.payload, &x.attempts)
	})
	if err != nil {
		return 0, fmt.Errorf("outbox relay: read rows: %w", err)
	}
	if len(batch) == 0 {
		return 0, nil
	}
	s.publish(ctx, batch)
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	countBusErrs := s.busUp(ctx, batch)
	return s.record(ctx, batch, countBusErrs)
}

// publish sends batch in waves: each wave holds the next row of every
// subject that has one and is not held back, and waits for their acks. A
// subject whose row failed (other than permanently) sends nothing more in
// this batch.
func (s *session) publish(ctx context.Context, batch []*row) {
	var order []string
	queues := map[string][]*row{}
	for _, x := range batch {
		if _, ok := queues[x.subject]; !ok {
			order = append(order, x.subject)
		}
		queues[x.subject] = append(queues[x.subject], x)
	}
	type sent struct {
		x   *row
		paf jetstream.PubAckFuture
	}
	for ctx.Err() == nil {
		var wave []sent
		for _, subj := range order {
			for len(queues[subj]) > 0 {
				x := queues[subj][0]
				queues[subj] = queues[subj][1:]
				paf, err := s.send(x)
				if err == nil {
					wave = append(wave, sent{x, paf})
					break
				}
				x.fail(err)
				if !x.permanent {
					queues[subj] = nil // the rest waits for x
				}
			}
		}
		if len(wave) == 0 {
			return
		}
		timer := time.NewTimer(s.r.AckWait)
		expired := false
		for _, w := range wave {
			var err error
			if expired {
				select {
				case <-w.paf.Ok():
				case err = <-w.paf.Err():
				default:
					err = errAckTimeout
				}
			} else {
				select {
				case <-w.paf.Ok():
				case err = <-w.paf.Err():
				case <-timer.C:
					expired, err = true, errAckTimeout
				case <-ctx.Done():
					err = ctx.Err()
				}
			}
			if err == nil {
				w.x.published = true
				continue
			}
			w.x.fail(err)
			if !w.x.permanent {
				queues[w.x.subject] = nil
			}
		}
		timer.Stop()
	}
}

// send publishes x asynchronously with its event id as Nats-Msg-Id.
func (s *session) send(x *row) (jetstream.PubAckFuture, error) {
	msg := &nats.Msg{Subject: x.subject, Data: x.payload, Header: nats.Header{}}
	if err := json.Unmarshal(x.headers, &msg.Header); err != nil {
		x.size = int64(len(x.headers) + len(x.payload))
		return nil, fmt.Errorf("%w: %v", errBadHeaders, err)
	}
	x.size = wireSize(msg, x.eventID)
	return s.r.JS.PublishMsgAsync(msg, jetstream.WithMsgID(x.eventID))
}

// fail records a failed publish of x and classifies the error.
func (x *row) fail(err error) {
	x.err = err
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, errBadHeaders),
		errors.Is(err, nats.ErrBadHeaderMsg), errors.Is(err, nats.ErrBadSubject):
		x.permanent = true
	case errors.As(err, &apiErr):
		// The stream answered about this very message.
		x.permanent = apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum
	default:
		// No answer, no responders, a closed connection: the bus may be down.
		x.busErr = true
	}
}

// busUp reports whether failures that may be the bus's count against their
// rows: they do when the bus answers (a row on a subject no stream takes has
// no responders while the bus is up), and not during an outage, which
// pauses the relay instead.
func (s *session) busUp(ctx context.Context, batch []*row) bool {
	some := false
	for _, x := range batch {
		some = some || x.busErr
	}
	if !some {
		return true
	}
	pctx, cancel := context.WithTimeout(ctx, s.r.AckWait)
	defer cancel()
	_, err := s.r.JS.AccountInfo(pctx)
	up := err == nil
	switch {
	case !up && !s.busDown:
		s.r.Logger.Warn("outbox relay cannot reach JetStream; publishing paused", "error", err)
	case up && s.busDown:
		s.r.Logger.Info("outbox relay reaches JetStream again")
	}
	s.busDown = !up
	return up
}

// record marks the published rows, schedules retries and quarantines, in one
// transaction with the quarantine notices.
func (s *session) record(ctx context.Context, batch []*row, countBusErrs bool) (int, error) {
	changed := 0
	var published []int64
	err := pgx.BeginFunc(ctx, s.conn, func(tx pgx.Tx) error {
		for _, x := range batch {
			switch {
			case x.published:
				published = append(published, x.id)
				if x.typ == events.TypeOutboxQuarantined {
					s.logNotice(x)
				}
			case x.err == nil, x.busErr && !countBusErrs:
				// Not sent (its subject waits), or failed while the bus was down.
				continue
			case x.permanent || x.attempts+1 >= s.r.MaxAttempts:
				if err := s.quarantine(ctx, tx, x); err != nil {
					return err
				}
			default:
				if err := s.retry(ctx, tx, x); err != nil {
					return err
				}
			}
			changed++
		}
		if len(published) == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, `
			update outbox set published_at = now(), attempts = attempts + 1, last_error = null, retry_at = null
			where id = any($1)`, published)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("outbox relay: record publishes: %w", err)
	}
	s.countPublished(batch)
	return changed + len(published), nil
}

// countPublished tells Relay.Published what was published.
func (s *session) countPublished(batch []*row) {
	if s.r.Published == nil {
		return
	}
	for _, x := range batch {
		if x.published {
			s.r.Published(x.typ)
		}
	}
}

// retry schedules the next attempt of x after its backoff.
func (s *session) retry(ctx context.Context, tx pgx.Tx, x *row) error {
	wait := s.r.backoff(x.attempts + 1)
	s.r.Logger.Warn("outbox event failed to publish; retrying", "event", x.eventID, "type", x.typ, "subject", x.subject,
		"attempt", x.attempts+1, "of", s.r.MaxAttempts, "retry_in", wait, "error", x.err)
	_, err := tx.Exec(ctx, `
		update outbox set attempts = attempts + 1, last_error = $2, retry_at = now() + make_interval(secs => $3),
			first_failed_at = coalesce(first_failed_at, now()), last_failed_at = now()
		where id = $1`, x.id, x.err.Error(), wait.Seconds())
	return err
}

// quarantine takes x out of the queue for good, with its reason and notice.
func (s *session) quarantine(ctx context.Context, tx pgx.Tx, x *row) error {
	q := quarantine{eventID: x.eventID, typ: x.typ, subject: x.subject, size: x.size, attempts: x.attempts + 1}
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(x.err, nats.ErrMaxPayload):
		q.limit = s.r.JS.Conn().MaxPayload()
		q.reason = q.overLimit()
	case errors.As(x.err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum:
		q.reason = fmt.Sprintf("event %s of type %s for %s is %d bytes, over the stream's maximum message size (%v)",
			q.eventID, q.typ, q.subject, q.size, x.err)
	case errors.Is(x.err, errBadHeaders):
		q.reason = fmt.Sprintf("event %s of type %s for %s has headers that do not decode (%v)", q.eventID, q.typ, q.subject, x.err)
	case x.permanent:
		q.reason = fmt.Sprintf("event %s of type %s for %s cannot be published (%v)", q.eventID, q.typ, q.subject, x.err)
	default:
		q.reason = fmt.Sprintf("event %s of type %s for %s failed to publish %d times; the last error: %v",
			q.eventID, q.typ, q.subject, q.attempts, x.err)
	}
	_, err := tx.Exec(ctx, `
		update outbox set attempts = attempts + 1, last_error = $2, size = $3, retry_at = null,
			first_failed_at = coalesce(first_failed_at, now()), last_failed_at = now(),
			quarantined_at = now(), quarantine_reason = $4
		where id = $1`, x.id, x.err.Error(), x.size, q.reason)
	if err != nil {
		return err
	}
	return q.notify(ctx, tx, s.r.Source)
}

// logNotice logs a quarantine once: when its notice is published.
func (s *session) logNotice(x *row) {
	var n events.OutboxQuarantined
	if err := json.Unmarshal(x.payload, &n); err != nil {
		s.r.Logger.Warn("outbox event quarantined", "notice", x.eventID)
		return
	}
	s.r.Logger.Warn("outbox event quarantined", "event", n.EventID, "type", n.Type, "subject", n.Subject,
		"size", n.Size, "attempts", n.Attempts, "reason", n.Reason)
}
