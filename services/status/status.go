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
	"fmt"
	"log/slog"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/inbox"
	"github.com/flotilla-dev/flotilla/platform/service"
)

// Config configures the status service.
type Config struct {
	service.Options
	// Now is the clock members' health is judged by when queried; time.Now
	// by default.
	Now func() time.Time
}

// consumer names the status service's durable consumer and its inbox rows.
const consumer = bus.ConsumerStatus

// server is a running status service.
type server struct {
	pool   *pgxpool.Pool
	source string
	log    *slog.Logger
	now    func() time.Time
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
	s := &server{pool: env.Pool, source: env.Source, log: env.Log, now: cfg.Now}
	if s.now == nil {
		s.now = time.Now
	}
	return env.Run(ctx,
		func(ctx context.Context) error {
			// No validator: the audit log records every event, including types
			// this build does not know; only known, valid payloads are folded.
			return bus.ConsumeBatches(ctx, env.JS, bus.StreamEvents, consumer, s.handle, bus.WithLogger(env.Log))
		},
		func(ctx context.Context) error { return s.serveQueries(ctx, env.NC) },
	)
}

// handle records one event in the audit log and folds it, all in one
// transaction with its inbox row: a redelivered event changes nothing.
func (s *server) handle(ctx context.Context, batch []bus.Delivery) error {
	evs := make([]cloudevents.Event, len(batch))
	for i, d := range batch {
		evs[i] = d.Event
	}
	ran, err := inbox.HandleBatch(ctx, s.pool, consumer, evs, func(ctx context.Context, tx pgx.Tx, i int) error {
		return s.fold(ctx, tx, batch[i])
	})
	if err != nil {
		return err
	}
	for i, ok := range ran {
		if !ok {
			s.log.Debug("event already handled", "id", evs[i].ID(), "type", evs[i].Type())
		}
	}
	return nil
}

// fold records one event in the audit log and folds it into the status it concerns.
func (s *server) fold(ctx context.Context, tx pgx.Tx, d bus.Delivery) error {
	ev := d.Event
	at := ev.Time()
	if at.IsZero() {
		at = d.Meta.Time
	}
	if err := audit(ctx, tx, ev, at); err != nil {
		return err
	}
	switch p := s.decode(ev).(type) {
	case *events.MemberJoined:
		return s.foldMember(ctx, tx, ev, p.Member.Name, p, at)
	case *events.MemberUpdated:
		return s.foldMember(ctx, tx, ev, p.Member.Name, p, at)
	case *events.MemberLeft:
		return s.foldMember(ctx, tx, ev, p.Name, p, at)
	case *events.MemberHeartbeat:
		return s.foldMember(ctx, tx, ev, p.Name, p, at)
	case *events.PlacementUpserted:
		return s.foldPlacement(ctx, tx, ev, p.Placement.Name, p, at)
	case *events.PlacementDeleted:
		return s.foldPlacement(ctx, tx, ev, p.Name, p, at)
	case *events.PlacementScheduledV2:
		return s.foldPlacement(ctx, tx, ev, p.Placement, p, at)
	case *events.SnapshotCreated:
		return s.foldPlacement(ctx, tx, ev, p.Placement, p, at)
	case *events.RolloutProgressedV2:
		return s.foldPlacement(ctx, tx, ev, p.Placement, p, at)
	case *events.WorkReported:
		if err := s.recordReport(ctx, tx, ev, p); err != nil {
			return err
		}
		return s.foldPlacement(ctx, tx, ev, p.Placement, p, at)
	case *events.OutboxQuarantined:
		if p.Placement == "" {
			return nil
		}
		return s.foldPlacement(ctx, tx, ev, p.Placement, p, at)
	}
	return nil
}

// folded lists the event types the status is folded from. The v1 decision
// and progress events (from before they travelled in pieces) are only
// recorded.
var folded = map[string]bool{
	events.TypeMemberJoined: true, events.TypeMemberUpdated: true, events.TypeMemberLeft: true, events.TypeMemberHeartbeat: true,
	events.TypePlacementUpserted: true, events.TypePlacementDeleted: true, events.TypePlacementScheduledV2: true,
	events.TypeSnapshotCreated: true, events.TypeRolloutProgressedV2: true, events.TypeWorkReported: true,
	events.TypeOutboxQuarantined: true,
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

// audit records ev in the audit log. Data that is not JSON is recorded
// without its payload.
func audit(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, at time.Time) error {
	var payload []byte
	if data := ev.Data(); json.Valid(data) {
		payload = data
	}
	_, err := tx.Exec(ctx, `
		insert into audit_log (event_id, type, source, subject, time, payload)
		values ($1, $2, $3, $4, $5, $6)
		on conflict (event_id) do nothing`,
		ev.ID(), ev.Type(), ev.Source(), ev.Subject(), at, payload)
	if err != nil {
		return fmt.Errorf("audit %s: %w", ev.ID(), err)
	}
	return nil
}
