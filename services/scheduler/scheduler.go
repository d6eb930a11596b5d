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
	if err := s.load(ctx); err != nil {
		return fmt.Errorf("scheduler: load state: %w", err)
	}
	env.Log.Info("scheduler state loaded", "members", len(s.members), "took", time.Since(start).Round(time.Millisecond))
	return env.Run(ctx, func(ctx context.Context) error {
		return bus.Consume(ctx, env.JS, bus.StreamEvents, consumer, s.handle,
			bus.WithValidator(events.Validate), bus.WithLogger(env.Log))
	})
}

// handle applies one event: its state changes, decisions, history and the
// decision events it causes commit together with its inbox row.
func (s *Scheduler) handle(ctx context.Context, ev cloudevents.Event, _ bus.Meta) error {
	payload, err := events.Decode(ev)
	if err != nil {
		return bus.Permanent(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var dirtyMembers bool
	ran, err := inbox.Handle(ctx, s.env.Pool, consumer, ev, func(ctx context.Context, tx pgx.Tx) error {
		if err := s.syncMembers(ctx, tx, changesMembers(payload)); err != nil {
			return err
		}
		switch p := payload.(type) {
		case *events.PlacementUpserted:
			return s.upsertPlacement(ctx, tx, ev, p)
		case *events.PlacementDeleted:
			return s.deletePlacement(ctx, tx, ev, p.Name)
		case *events.MemberJoined:
			dirtyMembers = true
			return s.upsertMember(ctx, tx, ev, &p.Member, true)
		case *events.MemberUpdated:
			dirtyMembers = true
			return s.upsertMember(ctx, tx, ev, &p.Member, false)
		case *events.MemberLeft:
			dirtyMembers = true
			return s.leaveMember(ctx, tx, ev, p.Name)
		case *events.MemberHeartbeat:
			changed, err := s.heartbeat(ctx, tx, ev, p)
			dirtyMembers = changed
			return err
		default:
			return nil // not the scheduler's business
		}
	})
	if err != nil {
		if dirtyMembers {
			// The transaction rolled back: forget what it did to memory.
			s.fleetVersion = -1
		}
		return err
	}
	if !ran {
		s.env.Log.Debug("event already handled", "id", ev.ID(), "type", ev.Type())
	}
	return nil
}

// changesMembers reports whether an event may change the member set.
func changesMembers(payload any) bool {
	switch payload.(type) {
	case *events.MemberJoined, *events.MemberUpdated, *events.MemberLeft, *events.MemberHeartbeat:
		return true
	}
	return false
}
