// Package scheduler is the scheduler service: it consumes placement and
// member events, decides where each placement goes, stores every decision as
// history and publishes it, all through one transaction per consumed event.
package scheduler

import (
	"context"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/inbox"
	"github.com/flotilla-dev/flotilla/platform/service"
)

// Config configures the scheduler service.
type Config struct {
	service.Options
	// Now is the clock; time.Now by default.
	Now func() time.Time
}

// consumer names the scheduler's durable consumer and its inbox rows.
const consumer = bus.ConsumerScheduler

// Run runs the scheduler until ctx ends.
func Run(ctx context.Context, cfg Config) (err error) {
	defer func() { err = service.Stopped(ctx, err) }()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	env, err := service.Open(ctx, "scheduler", cfg.Options)
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	defer env.Close()
	s := newScheduler(env, cfg.Now)
	start := time.Now()
	if err := bus.Await(ctx, env.Log, "PostgreSQL to load the scheduler's state", s.load); err != nil {
		return fmt.Errorf("scheduler: load state: %w", err)
	}
	env.Log.Info("scheduler state loaded", "members", len(s.members), "took", time.Since(start).Round(time.Millisecond))
	return env.Run(ctx, func(ctx context.Context) error {
		return bus.ConsumeBatches(ctx, env.JS, bus.StreamEvents, consumer, s.handle,
			env.ConsumeOptions(consumer, bus.WithValidator(events.Admit), env.Observed(bus.StreamEvents, consumer))...)
	})
}

// handle applies a batch of events in one transaction: their state changes, decisions,
// history and the decision events they cause commit together with their inbox rows.
func (s *Scheduler) handle(ctx context.Context, batch []bus.Delivery) error {
	evs := make([]cloudevents.Event, len(batch))
	payloads := make([]any, len(batch))
	// One lock mode for the whole transaction: taking the fleet version for share and
	// later for update would deadlock two replicas that do the same.
	exclusive := false
	for i, d := range batch {
		payload, err := events.Decode(d.Event)
		if err != nil {
			return bus.Permanent(err)
		}
		evs[i], payloads[i] = d.Event, payload
		exclusive = exclusive || changesMembers(payload)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var dirtyMembers bool
	s.reschedule = nil
	ran, err := inbox.HandleBatchThen(ctx, s.env.Pool, consumer, evs, func(ctx context.Context, tx pgx.Tx, i int) error {
		// Within the event's trace, which the decisions it causes carry on.
		changed, err := s.apply(batch[i].Context(ctx), tx, evs[i], batch[i].Meta, payloads[i], exclusive)
		dirtyMembers = dirtyMembers || changed
		return err
	}, func(ctx context.Context, tx pgx.Tx) error {
		// The members changed: every placement re-decided once, in the trace of the
		// last event that changed them.
		r := s.reschedule
		s.reschedule = nil
		if r == nil {
			return nil
		}
		return s.rescheduleAll(r.ctx, tx, r.ev)
	})
	if err != nil {
		if dirtyMembers {
			// The transaction rolled back: forget what it did to memory.
			s.fleetVersion = -1
		}
		return err
	}
	for i, ok := range ran {
		if !ok {
			s.env.Log.Debug("event already handled", "id", evs[i].ID(), "type", evs[i].Type())
		}
	}
	return nil
}

// apply applies one event in tx, and reports whether it may have changed the members
// held in memory. exclusive locks the fleet version for update rather than for share.
// m is how the event was delivered: its stream sequence orders the events about one
// placement or member (an older one delivered late changes nothing), and its time is
// when the bus received a heartbeat.
func (s *Scheduler) apply(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, m bus.Meta, payload any, exclusive bool) (dirtyMembers bool, err error) {
	if err := s.syncMembers(ctx, tx, exclusive); err != nil {
		return false, err
	}
	seq := int64(m.Sequence)
	switch p := payload.(type) {
	case *events.PlacementUpserted:
		return false, s.upsertPlacement(ctx, tx, ev, seq, p)
	case *events.PlacementDeleted:
		return false, s.deletePlacement(ctx, tx, ev, seq, p.Name)
	case *events.MemberJoined:
		return true, s.upsertMember(ctx, tx, ev, seq, &p.Member, true)
	case *events.MemberUpdated:
		return true, s.upsertMember(ctx, tx, ev, seq, &p.Member, false)
	case *events.MemberLeft:
		return true, s.leaveMember(ctx, tx, ev, seq, p.Name)
	case *events.MemberHeartbeat:
		return s.heartbeat(ctx, tx, ev, seq, s.receivedAt(m), p)
	default:
		return false, nil // not the scheduler's business
	}
}

// changesMembers reports whether an event may change the member set.
func changesMembers(payload any) bool {
	switch payload.(type) {
	case *events.MemberJoined, *events.MemberUpdated, *events.MemberLeft, *events.MemberHeartbeat:
		return true
	}
	return false
}
