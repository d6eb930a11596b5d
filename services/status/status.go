// Package status is the status service. It consumes every event on the
// EVENTS stream: it records each in the audit log, folds scheduling
// decisions, resource snapshots, rollout progress and apply reports into the
// Fleet-shaped placement status (package fold), keeps member clusters' status
// from their joins and heartbeats, stores takeover decisions, drift reports,
// apply results and every condition transition in PostgreSQL, and publishes
// PlacementStatusChangedV2 (the clusters whose status changed, in pieces)
// when a placement's status changes. It answers fleetctl's queries over NATS
// request-reply (see events/query.go).
package status

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/inbox"
	"github.com/flotilla-dev/flotilla/platform/pipeline"
	"github.com/flotilla-dev/flotilla/platform/retention"
	"github.com/flotilla-dev/flotilla/platform/service"
)

// Config configures the status service.
type Config struct {
	service.Options
	// AuditRetention is how long the audit log keeps an event, from when it
	// was received. Default DefaultAuditRetention; never shorter than the
	// inbox keeps event ids (the audit outlives the rest).
	AuditRetention time.Duration
	// Now is the clock members' health is judged by when queried, and the
	// bound of heartbeats' receive times; time.Now by default.
	Now func() time.Time
	// FoldCacheBytes bounds the memory (estimated) of the placements kept
	// decoded between batches. 0: DefaultFoldCacheBytes; negative: none.
	FoldCacheBytes int64
}

// DefaultAuditRetention is how long the audit log keeps events by default.
const DefaultAuditRetention = 90 * 24 * time.Hour

// RegisterFlags adds the status service's own flags.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Var(service.RetentionFlag(&c.AuditRetention), "audit-retention",
		"keep audit_log rows this long after they were received (e.g. 90d, 2160h; default 90d, at least --inbox-retention)")
	fs.Func("fold-cache-mib", "memory, in MiB (estimated), for placements kept decoded between batches of events (default 128; 0 keeps none)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<20 {
			return fmt.Errorf("want a whole number of MiB from 0 to %d, got %q", 1<<20, v)
		}
		c.FoldCacheBytes = n << 20
		if n == 0 {
			c.FoldCacheBytes = -1
		}
		return nil
	})
}

// Validate checks the shared options and the audit retention.
func (c *Config) Validate() error {
	errs := []error{c.Options.Validate()}
	inbox := c.Retention.Inbox
	if inbox == 0 {
		inbox = service.DefaultInboxRetention
	}
	switch keep := c.auditRetention(); {
	case c.AuditRetention < 0:
		errs = append(errs, fmt.Errorf("--audit-retention: %s is negative (0 means the default)", c.AuditRetention))
	case keep < inbox:
		errs = append(errs, fmt.Errorf("--audit-retention: %s is shorter than --inbox-retention (%s): the audit log outlives the rest", keep, inbox))
	}
	return errors.Join(errs...)
}

func (c *Config) auditRetention() time.Duration {
	if c.AuditRetention == 0 {
		return DefaultAuditRetention
	}
	return c.AuditRetention
}

// auditRetention is the audit log's retention rule: by receive time (an event's own
// time is what its producer claims).
func auditRetention(keep time.Duration) retention.Rule {
	return retention.Rule{Table: "audit_log", Column: "received_at", Keep: keep}
}

// consumer names the status service's durable consumer and its inbox rows.
const consumer = bus.ConsumerStatus

// burstBatch and burstBatchBytes bound a batch of events (bus.WithBatchLimits): in a
// burst of reports on many placements, a batch of 100 held about one report per
// placement, so each report still cost loading and folding its placement's whole status;
// batches of up to 500 hold several per placement, folded once (flush). A batch is only
// what has arrived, so a quiet bus still hands over each event at once.
const (
	burstBatch      = 500
	burstBatchBytes = 8 << 20
)

// server is a running status service.
type server struct {
	pool   *pgxpool.Pool
	source string
	log    *slog.Logger
	now    func() time.Time
	// metrics are nil in tests that build a server by hand.
	metrics *placementMetrics
	// cache keeps decoded placements between batches; nil: none.
	cache *foldCache
}

// Run runs the status service until ctx ends.
func Run(ctx context.Context, cfg Config) (err error) {
	defer func() { err = service.Stopped(ctx, err) }()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	env, err := service.Open(ctx, "status", cfg.Options)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	defer env.Close()
	env.Retain(auditRetention(cfg.auditRetention()))
	s := &server{pool: env.Pool, source: env.Source, log: env.Log, now: cfg.Now,
		metrics: newPlacementMetrics(env.Metrics, env.Pool)}
	if s.now == nil {
		s.now = time.Now
	}
	cacheBytes := cfg.FoldCacheBytes
	if cacheBytes == 0 {
		cacheBytes = DefaultFoldCacheBytes
	}
	s.cache = newFoldCache(cacheBytes, time.Now)
	return env.Run(ctx,
		func(ctx context.Context) error {
			// The audit log records every event, including types this build does
			// not know; only known, valid payloads are folded. An event of a known
			// type on a subject it may not use (forged with another member's
			// credentials) is dead-lettered, neither recorded nor folded.
			return bus.ConsumeBatches(ctx, env.JS, bus.StreamEvents, consumer, s.handle,
				env.ConsumeOptions(consumer, bus.WithBatchLimits(burstBatch, burstBatchBytes), bus.WithValidator(events.CheckSubject), bus.WithSkip(s.auditedAlready), env.Observed(bus.StreamEvents, consumer))...)
		},
		func(ctx context.Context) error { return s.serveQueries(ctx, env.NC) },
	)
}

// handle records one event in the audit log and folds it, all in one
// transaction with its inbox row: a redelivered event changes nothing.
func (s *server) handle(ctx context.Context, deliveries []bus.Delivery) error {
	evs := make([]cloudevents.Event, len(deliveries))
	for i, d := range deliveries {
		evs[i] = d.Event
	}
	b := &batch{cache: s.cache}
	prefetched := false
	ran, err := inbox.HandleBatchThen(ctx, s.pool, consumer, evs, func(ctx context.Context, tx pgx.Tx, i int) error {
		w := b.pipe(tx)
		if !prefetched {
			prefetched = true
			if err := b.prefetch(ctx, w, deliveries[i:]); err != nil {
				return err
			}
		}
		// Within the event's trace, which the status changes it causes carry on.
		return s.fold(deliveries[i].Context(ctx), w, b, deliveries[i])
	}, func(ctx context.Context, tx pgx.Tx) error {
		w := b.pipe(tx)
		if err := s.flush(ctx, w, b); err != nil {
			return err
		}
		writeAudit(w, b.audits)
		if err := b.versions(ctx, w); err != nil {
			return err
		}
		return w.Flush(ctx)
	})
	s.metrics.commit(err == nil)
	if err != nil {
		return err
	}
	b.keep()
	for i, ok := range ran {
		if !ok {
			s.log.Debug("event already handled", "id", evs[i].ID(), "type", evs[i].Type())
		}
	}
	return nil
}

// extensionAudited marks the status service's own events, which it records
// in the audit log in the transaction that emits them (emit).
const extensionAudited = "flotillaaudited"

// auditedAlready says whether d is one of the service's own status events,
// recorded in the audit log when it was emitted: the consumer acks it
// without decoding its data (bus.WithSkip), so that the service's own events
// cost nothing as they come back. Only the status service may publish on a
// status subject (the server's permissions), and one emitted by an older
// build, without the mark, is recorded as any other.
func (s *server) auditedAlready(d bus.Delivery) bool {
	v, _ := d.Event.Extensions()[extensionAudited].(string)
	if v != "true" || d.Event.Type() != events.TypePlacementStatusChangedV2 || d.Event.Source() != s.source {
		return false
	}
	name, _ := events.SubjectNames(d.Meta.Subject)
	subject, err := events.StatusSubject(name)
	return err == nil && name != "" && subject == d.Meta.Subject
}

// fold records one event in the audit log and folds it into the status it concerns.
// Secret values never reach either: a hub resource's Secret, or a difference a member
// reports on one (which its worker should have redacted already), is redacted first.
func (s *server) fold(ctx context.Context, w *pipeline.Tx, b *batch, d bus.Delivery) error {
	ev := redacted(d.Event)
	at := ev.Time()
	if at.IsZero() {
		at = d.Meta.Time
	}
	b.audit(ev, at)
	seq := int64(d.Meta.Sequence)
	switch p := s.decode(ev).(type) {
	case *events.PlacementUpserted:
		return s.foldPlacement(ctx, w, b, ev, p.Placement.Name, p, seq, at)
	case *events.PlacementDeleted:
		return s.foldPlacement(ctx, w, b, ev, p.Name, p, seq, at)
	case *events.PlacementScheduledV2:
		return s.foldPlacement(ctx, w, b, ev, p.Placement, p, seq, at)
	case *events.SnapshotCreated:
		return s.foldPlacement(ctx, w, b, ev, p.Placement, p, seq, at)
	case *events.RolloutProgressedV2:
		return s.foldPlacement(ctx, w, b, ev, p.Placement, p, seq, at)
	case *events.WorkReported:
		expected, err := b.readForReport(ctx, w, p.Placement, p.Cluster)
		if err != nil {
			return err
		}
		if !expected {
			s.log.Warn("report from a cluster the placement was never scheduled on: recorded in the audit log only",
				"id", ev.ID(), "placement", p.Placement, "cluster", p.Cluster)
			return nil
		}
		if err := s.recordReport(w, ev, p); err != nil {
			return err
		}
		return s.foldPlacement(ctx, w, b, ev, p.Placement, p, seq, at)
	case *events.TakeoversDecided:
		expected, err := reportExpected(ctx, w, p.Placement, p.Cluster)
		if err != nil || !expected {
			return err
		}
		return s.recordTakeovers(w, ev, p)
	case *events.OutboxQuarantined:
		if p.Placement == "" {
			return nil
		}
		return s.foldPlacement(ctx, w, b, ev, p.Placement, p, seq, at)
	default:
		// Members and overrides are folded on the transaction itself, after
		// what the batch queued.
		tx, err := w.Direct(ctx)
		if err != nil {
			return err
		}
		return s.foldOther(ctx, tx, ev, d.Meta, p, seq, at)
	}
}

// reportExpected reports whether r comes from a cluster the placement was scheduled on: one
// its decision chose or removed, or one that reported on it before. A member may publish
// reports in its own name only (the catalogue sees to that), but about any placement; one
// about a placement it never had is recorded in the audit log and nowhere else, so that it
// cannot write itself into that placement's history or plant a report for the day it is
// chosen. Decisions always come before the work a report answers: the rollout sends work
// only for decisions it has read from the same stream, further on.
// Takeover decisions that did not fit in a report are judged the same way.
func reportExpected(ctx context.Context, w *pipeline.Tx, placement, cluster string) (bool, error) {
	r := newExpectedRead(placement, cluster)
	if err := w.Read(ctx, &r.Row); err != nil {
		return false, fmt.Errorf("check report of %s on %s: %w", placement, cluster, err)
	}
	return r.ok, nil
}

// expectedRead reads whether a report is expected (reportExpected).
type expectedRead struct {
	ok bool
	pipeline.Row
}

func newExpectedRead(placement, cluster string) *expectedRead {
	r := &expectedRead{}
	r.Row = pipeline.Row{
		SQL: `
		select exists (select 1 from status_reports where placement = $1 and cluster = $2)
			or exists (select 1 from status_placements p where p.name = $1 and (
				p.decision->'chosen' @> jsonb_build_array(jsonb_build_object('cluster', $2::text))
				or p.decision->'removed' @> jsonb_build_array(jsonb_build_object('cluster', $2::text))))`,
		Args: []any{placement, cluster},
		Dest: []any{&r.ok},
	}
	return r
}

// foldOther folds an event about a member or an override; others have
// nothing to fold.
func (s *server) foldOther(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, m bus.Meta, payload any, seq int64, at time.Time) error {
	switch p := payload.(type) {
	case *events.MemberJoined:
		return s.foldMember(ctx, tx, ev, p.Member.Name, p, seq, at)
	case *events.MemberUpdated:
		return s.foldMember(ctx, tx, ev, p.Member.Name, p, seq, at)
	case *events.MemberLeft:
		return s.foldMember(ctx, tx, ev, p.Name, p, seq, at)
	case *events.MemberHeartbeat:
		// Timed by when the bus received it, never by the time it claims.
		return s.foldMember(ctx, tx, ev, p.Name, p, seq, s.receivedAt(m))
	case *events.OverrideUpserted:
		return s.foldOverride(ctx, tx, ev, p.Key(), p.Object(), seq, at)
	case *events.OverrideDeleted:
		return s.foldOverride(ctx, tx, ev, p.Override, nil, seq, at)
	}
	return nil
}

// receivedAt is when// receivedAt is when the bus received a message: the JetStream message's
// time, but never later than the service's clock.
func (s *server) receivedAt(m bus.Meta) time.Time {
	now := s.now()
	if m.Time.IsZero() || m.Time.After(now) {
		return now
	}
	return m.Time
}

// folded lists the event types the status is folded from. The v1 decision
// and progress events (from before they travelled in pieces) are only
// recorded.
var folded = map[string]bool{
	events.TypeMemberJoined: true, events.TypeMemberUpdated: true, events.TypeMemberLeft: true, events.TypeMemberHeartbeat: true,
	events.TypePlacementUpserted: true, events.TypePlacementDeleted: true, events.TypePlacementScheduledV2: true,
	events.TypeSnapshotCreated: true, events.TypeRolloutProgressedV2: true, events.TypeWorkReported: true,
	events.TypeOutboxQuarantined: true, events.TypeTakeoversDecided: true,
	events.TypeOverrideUpserted: true, events.TypeOverrideDeleted: true,
}

// decode returns the payload of an event the status is folded from, or nil
// for any other event (which is only recorded in the audit log). An invalid
// payload is recorded and not folded: the consumer it is meant for
// dead-letters it.
func (s *server) decode(ev cloudevents.Event) any {
	if !folded[ev.Type()] {
		return nil
	}
	p, err := events.Decode(ev)
	if err != nil {
		s.log.Warn("event not folded: invalid payload", "id", ev.ID(), "type", ev.Type(), "err", err)
		return nil
	}
	return p
}

// redacted is ev with every Secret value in its payload replaced by api.Redacted.
func redacted(ev cloudevents.Event) cloudevents.Event {
	out, changed := api.RedactSecrets(ev.Data())
	if !changed {
		return ev
	}
	ev = ev.Clone()
	ev.DataEncoded = out
	return ev
}

// auditRow is an event as the audit log records it.
type auditRow struct {
	id, typ, source, subject string
	at                       time.Time
	payload                  []byte // nil when the data is not JSON
}

// audit queues ev for the audit log; writeAudit records the batch's events
// at its end, in one round trip. Data that is not JSON is recorded without
// its payload.
func (b *batch) audit(ev cloudevents.Event, at time.Time) {
	var payload []byte
	if data := ev.Data(); json.Valid(data) {
		payload = data
	}
	b.audits = append(b.audits, auditRow{id: ev.ID(), typ: ev.Type(), source: ev.Source(), subject: ev.Subject(), at: at, payload: payload})
}

// writeAudit queues the recording of rows in the audit log, each once.
func writeAudit(w *pipeline.Tx, rows []auditRow) {
	for _, r := range rows {
		w.Queue(fmt.Sprintf("audit event %s", r.id), `
			insert into audit_log (event_id, type, source, subject, time, payload)
			values ($1, $2, $3, $4, $5, $6)
			on conflict (event_id) do nothing`,
			r.id, r.typ, r.source, r.subject, r.at, r.payload)
	}
}
