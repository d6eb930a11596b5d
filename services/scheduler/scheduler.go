// Package scheduler is the scheduler service: it consumes placement and
// member events, decides where each placement goes, stores every decision as
// history and publishes it, all through one transaction per consumed event.
// It also runs evictions (within disruption budgets), which change decisions
// (disruption.go).
package scheduler

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
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
	// FailoverAfter is how long a member may be down before the placements on it
	// fail over (a placement's flotilla.dev/failover-after overrides it).
	// Default DefaultFailoverAfter.
	FailoverAfter time.Duration
	// History is how long the scheduler keeps evictions and failover history.
	History Retention
}

// RegisterFlags adds the scheduler's own flags, with defaults from the environment.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	def := DefaultFailoverAfter
	if v, err := time.ParseDuration(os.Getenv("FLOTILLA_FAILOVER_AFTER")); err == nil {
		def = v
	}
	fs.DurationVar(&c.FailoverAfter, "failover-after", def,
		"how long a member may be down (heartbeats say its API server is unreachable, or none for 1.5 periods) before the PickN placements on it fail over; a placement's flotilla.dev/failover-after annotation overrides it")
	c.History.register(fs)
}

// Validate checks the shared options and the scheduler's own.
func (c *Config) Validate() error {
	errs := []error{c.Options.Validate(), c.History.validate(c.Retention.Inbox)}
	if c.FailoverAfter < 0 {
		errs = append(errs, fmt.Errorf("--failover-after must not be negative, got %s", c.FailoverAfter))
	}
	return errors.Join(errs...)
}

// consumer names the scheduler's durable consumer and its inbox rows.
const consumer = bus.ConsumerScheduler

// burstBatch and burstBatchBytes bound a batch of events (bus.WithBatchLimits). A batch
// that changes the members re-decides every placement once, whatever its size: at 5,000
// members and 1,000 placements that is seconds, so a burst of joins and heartbeats goes
// through in batches of hundreds rather than the default 100. An event waits behind at
// most one batch either way.
const (
	burstBatch      = 500
	burstBatchBytes = 8 << 20
)

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
	env.Retain(cfg.History.rules()...)
	s := newScheduler(env, cfg.Now, cfg.FailoverAfter)
	start := time.Now()
	if err := bus.Await(ctx, env.Log, "PostgreSQL to load the scheduler's state", s.load); err != nil {
		return fmt.Errorf("scheduler: load state: %w", err)
	}
	env.Log.Info("scheduler state loaded", "members", len(s.members), "took", time.Since(start).Round(time.Millisecond))
	return env.Run(ctx, func(ctx context.Context) error {
		return bus.ConsumeBatches(ctx, env.JS, bus.StreamEvents, consumer, s.handle,
			env.ConsumeOptions(consumer, bus.WithBatchLimits(burstBatch, burstBatchBytes), bus.WithValidator(events.Admit), env.Observed(bus.StreamEvents, consumer))...)
	}, s.runTimers, s.servePreviews)
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
	s.failoverClock(batch)
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
	case *events.DisruptionUpserted:
		return false, s.upsertDisruption(ctx, tx, ev, seq, p)
	case *events.DisruptionDeleted:
		return false, s.deleteDisruption(ctx, tx, seq, p.Object)
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
