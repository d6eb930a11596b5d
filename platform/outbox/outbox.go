// Package outbox makes the events a service emits commit together with the
// state change that caused them: Enqueue writes the event in the caller's
// transaction, and a Relay publishes committed rows to JetStream with the
// event id as Nats-Msg-Id, so a crash between commit and publish loses
// nothing and a re-publish is dropped by the bus.
//
// # Order
//
// Each subject's events are published in commit order, however many relays
// run (one per service replica, all on the one outbox table).
//
// Within a subject, id order is commit order: every service takes the row
// lock of the placement before it enqueues an event on that placement's
// subjects (the scheduler its placements row, the rollout its
// rollout_placements row, the status service its status_placements row), so
// a later transaction on a subject draws its id after the earlier one has
// committed, and the relay never sees a subject's later row without its
// earlier ones.
//
// Rows fall into Partitions by a hash of their subject (column
// relay_partition). A relay publishes a partition only while it holds the
// partition's session-level advisory lock on a connection of its own, and
// publishes the partition's rows in id order. It sends a batch with async
// publishes, but never more than one message of a subject before that
// message's ack: a failure (or a lost ack) can then never let a subject's
// later event overtake an earlier one. Relays share the partitions: each
// takes at most its share (Partitions over the live relays, rounded up) and
// hands the rest back between rounds. A relay that dies loses its connection
// and with it its locks; another takes its partitions over and publishes
// again what was not marked published, which the bus drops as duplicates
// (Nats-Msg-Id, within the stream's duplicate window) without reordering.
// A relay cut off from PostgreSQL only learns so at its next statement; the
// one-message-per-subject rule keeps order even while two relays publish one
// partition. PostgreSQL notices a vanished client by TCP keepalive
// (tcp_keepalives_idle), which bounds how long a dead relay's partitions wait.
//
// The quarantine notices below travel on events.OutboxSubject of the
// placement; they are independent facts, enqueued by any service, and their
// order on a subject means nothing.
//
// # Never blocked
//
// A message NATS would refuse for its size never enters the publish queue:
// Enqueue quarantines an event whose encoded size (headers, Nats-Msg-Id and
// payload) is over MaxBytes, in the caller's transaction, which goes on. At
// publish, a row that can never be published (over the server's max payload
// or a stream's maximum message size, headers that do not decode) is
// quarantined at once. A row failing otherwise is retried with backoff and
// quarantined after MaxAttempts failures (about a quarter of an hour with the
// defaults). While it waits for a retry the rows behind it on its subject
// wait too, so they are not published before it (on the last-value WORK
// stream an older event published late would replace newer work); rows on
// other subjects flow. Once it is quarantined its subject moves on: the
// events behind it are newer, and on the last-value streams the newest wins.
// Failures while the bus is unreachable count against no row: outages pause.
//
// Quarantined rows stay in the table, payload included (view
// outbox_quarantine), and each quarantine enqueues an
// events.OutboxQuarantined notice, which the relay logs once when it
// publishes it.
package outbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/textproto"
	"sync/atomic"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// notifyChannel is the LISTEN/NOTIFY channel that wakes the relay.
const notifyChannel = "flotilla_outbox"

// DefaultMaxBytes is NATS's default max_payload (1 MB), the limit Enqueue
// holds events to until SetMaxBytes says otherwise.
const DefaultMaxBytes int64 = 1 << 20

var maxBytes atomic.Int64

// SetMaxBytes tells Enqueue the bus's limit on one message, headers and
// payload together. Services call it at start with the server's
// max_payload (nats.Conn.MaxPayload) or a smaller configured limit;
// n <= 0 restores DefaultMaxBytes.
func SetMaxBytes(n int64) { maxBytes.Store(max(n, 0)) }

// MaxBytes is the limit Enqueue holds events to.
func MaxBytes() int64 {
	if n := maxBytes.Load(); n > 0 {
		return n
	}
	return DefaultMaxBytes
}

// Execer is what Enqueue needs of a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Enqueue stores ev for publication on subject, in the caller's transaction.
// Enqueuing the same event id twice is a no-op. An event over MaxBytes is
// quarantined instead, with an events.OutboxQuarantined notice, and Enqueue
// returns nil: the caller's transaction goes on without it.
func Enqueue(ctx context.Context, tx Execer, subject string, ev cloudevents.Event) error {
	msg, err := bus.Encode(ev, subject)
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", ev.ID(), err)
	}
	// The trace the event is emitted in is stored with it: the relay sends
	// the stored headers as they are, later.
	bus.InjectTrace(ctx, msg.Header)
	headers, err := json.Marshal(msg.Header)
	if err != nil {
		return fmt.Errorf("enqueue %s: headers: %w", ev.ID(), err)
	}
	size := wireSize(msg, ev.ID())
	if limit := MaxBytes(); size > limit {
		return quarantineAtEnqueue(ctx, tx, subject, ev, headers, msg.Data, size, limit)
	}
	_, err = tx.Exec(ctx, `
		insert into outbox (event_id, subject, type, headers, payload, size)
		values ($1, $2, $3, $4, $5, $6)
		on conflict (event_id) do nothing`,
		ev.ID(), subject, ev.Type(), headers, msg.Data, size)
	if err != nil {
		return fmt.Errorf("enqueue %s: %w", ev.ID(), err)
	}
	if _, err := tx.Exec(ctx, `select pg_notify($1, '')`, notifyChannel); err != nil {
		return fmt.Errorf("enqueue %s: notify: %w", ev.ID(), err)
	}
	return nil
}

// quarantineAtEnqueue stores an event that is over the bus limit as
// quarantined, and enqueues the notice.
func quarantineAtEnqueue(ctx context.Context, tx Execer, subject string, ev cloudevents.Event, headers, payload []byte, size, limit int64) error {
	q := quarantine{eventID: ev.ID(), typ: ev.Type(), subject: subject, size: size, limit: limit}
	q.reason = q.overLimit()
	_, err := tx.Exec(ctx, `
		insert into outbox (event_id, subject, type, headers, payload, size, quarantined_at, quarantine_reason)
		values ($1, $2, $3, $4, $5, $6, now(), $7)
		on conflict (event_id) do nothing`,
		ev.ID(), subject, ev.Type(), headers, payload, size, q.reason)
	if err != nil {
		return fmt.Errorf("enqueue %s: quarantine: %w", ev.ID(), err)
	}
	// The notice's id is the event's: enqueuing it again, for an event
	// enqueued before, is a no-op too. (tx may only queue the statement,
	// so what it affected is not known here.)
	return q.notify(ctx, tx, ev.Source())
}

// wireSize is what NATS counts against max_payload for msg published with
// Nats-Msg-Id eventID: the header block (as nats.Msg encodes it) and the data.
func wireSize(msg *nats.Msg, eventID string) int64 {
	const line, crlf = "NATS/1.0\r\n", "\r\n"
	n := len(line) + len(crlf)
	for k, vs := range msg.Header {
		if k == jetstream.MsgIDHeader {
			continue
		}
		for _, v := range vs {
			n += len(k) + len(textproto.TrimString(v)) + 4 // ": " and CRLF
		}
	}
	n += len(jetstream.MsgIDHeader) + len(textproto.TrimString(eventID)) + 4
	return int64(n + len(msg.Data))
}

// noticeSource is the CloudEvents source of a notice whose own source is unknown.
const noticeSource = "/flotilla/outbox"

// quarantine is an event set aside, and why.
type quarantine struct {
	eventID, typ, subject string
	size, limit           int64
	attempts              int
	reason                string
}

func (q quarantine) overLimit() string {
	return fmt.Sprintf("event %s of type %s for %s is %d bytes, over the bus limit of %d bytes",
		q.eventID, q.typ, q.subject, q.size, q.limit)
}

// notify enqueues the OutboxQuarantined notice of q, unless q is itself a
// notice (a notice about a notice could go on forever).
func (q quarantine) notify(ctx context.Context, tx Execer, source string) error {
	if q.typ == events.TypeOutboxQuarantined {
		return nil
	}
	if source == "" {
		source = noticeSource
	}
	placement, cluster := events.SubjectNames(q.subject)
	subject, err := events.OutboxSubject(placement)
	if err != nil {
		return fmt.Errorf("quarantine %s: notice: %w", q.eventID, err)
	}
	notice, err := events.New(events.TypeOutboxQuarantined, source, q.subject, events.ID("outbox-quarantined", q.eventID),
		events.OutboxQuarantined{
			EventID: q.eventID, Type: q.typ, Subject: q.subject, Placement: placement, Cluster: cluster,
			Size: q.size, Limit: q.limit, Attempts: q.attempts, Reason: truncate(q.reason, events.MaxQuarantineReason),
			QuarantinedAt: now(),
		})
	if err != nil {
		return fmt.Errorf("quarantine %s: notice: %w", q.eventID, err)
	}
	return Enqueue(ctx, tx, subject, notice)
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	cut := n - len(more)
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + more
}
