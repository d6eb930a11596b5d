// Package rollout is the rollout service. It keeps the hub store (the
// Kubernetes manifests placements select from), cuts an immutable resource
// snapshot of each placement's selected objects whenever their content
// changes, and rolls each snapshot out across the clusters the scheduler
// chose, within the placement's maxUnavailable and maxSurge, by publishing the
// complete desired state of every (cluster, placement) and tombstones for the
// clusters a placement leaves. It reports per cluster why a rollout has not
// started and which clusters are stuck.
//
// Every consumed event changes PostgreSQL and enqueues the events it causes
// in one transaction with its inbox row; work for one placement is serialised
// by a row lock, so replicas may share the durable consumer. Timers (the
// snapshot coalescing window, unavailablePeriodSeconds, the stuck deadline)
// are timestamps in PostgreSQL that a ticker loop acts on, so they survive
// restarts.
package rollout

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/inbox"
	"github.com/flotilla-dev/flotilla/platform/sealing"
	"github.com/flotilla-dev/flotilla/platform/service"
)

// Defaults of Config.
const (
	DefaultSnapshotWindow  = 50 * time.Millisecond
	DefaultSnapshotMaxWait = 2 * time.Second
	DefaultStuckAfter      = 5 * time.Minute
	DefaultTick            = 100 * time.Millisecond
)

// burstBatch and burstBatchBytes bound a batch of events (bus.WithBatchLimits): in a
// burst of reports on many placements, a batch of 100 held about one report per
// placement, so each report still cost a reconcile of its placement; batches of up to 500
// hold several per placement, reconciled once (reconcileLater). A batch is only what has
// arrived, so a quiet bus still hands over each event at once.
const (
	burstBatch      = 500
	burstBatchBytes = 8 << 20
)

// Config configures the rollout service.
type Config struct {
	service.Options

	// SnapshotWindow coalesces changes: a placement's selection is evaluated
	// when no hub or spec change has come for this long, so a burst of
	// changes (a `fleetctl apply` of tens of objects, consumed one
	// transaction each) gives one snapshot. Default 50ms. A new placement's
	// first selection does not wait when every selector already picks
	// something (its objects were published before it).
	SnapshotWindow time.Duration
	// SnapshotMaxWait bounds the coalescing: a selection is evaluated at most
	// this long after the first change of a burst. Default 2s.
	SnapshotMaxWait time.Duration
	// StuckAfter is how long a scheduled cluster may take to become applied
	// and available with the current resources before it is reported stuck.
	// Default 5 minutes.
	StuckAfter time.Duration
	// Tick bounds how long the timer loop sleeps: it wakes at the next due
	// time it knows of, when this replica sets one, and at least every Tick
	// (for due times other replicas set). Default 100ms.
	Tick time.Duration
	// Now is the clock; time.Now by default.
	Now func() time.Time
	// EncryptionKeyFile holds the keys Secrets are sealed with in PostgreSQL (see package
	// sealing for its format). Without it, hub Secrets are refused.
	EncryptionKeyFile string
}

// EnvEncryptionKeyFile gives --encryption-key-file its default.
const EnvEncryptionKeyFile = "FLOTILLA_ENCRYPTION_KEY_FILE"

// RegisterFlags adds the rollout's own flags, with defaults from the environment.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.DurationVar(&c.SnapshotWindow, "snapshot-window", durationEnv("FLOTILLA_SNAPSHOT_WINDOW", DefaultSnapshotWindow),
		"evaluate a placement's selection once hub changes pause this long (one snapshot per burst)")
	fs.DurationVar(&c.SnapshotMaxWait, "snapshot-max-wait", durationEnv("FLOTILLA_SNAPSHOT_MAX_WAIT", DefaultSnapshotMaxWait),
		"evaluate it at most this long after a burst began, even if changes keep coming")
	fs.DurationVar(&c.StuckAfter, "stuck-after", durationEnv("FLOTILLA_STUCK_AFTER", DefaultStuckAfter),
		"how long a cluster may take to become applied and available before the rollout reports it stuck")
	fs.StringVar(&c.EncryptionKeyFile, "encryption-key-file", os.Getenv(EnvEncryptionKeyFile),
		"file of the keys that encrypt Secrets in PostgreSQL, one <name>:<base64 of 32 bytes> per line, the first encrypting; without it Secrets are refused (env "+EnvEncryptionKeyFile+")")
}

// Validate checks the shared options and the rollout's own.
func (c *Config) Validate() error {
	var errs []error
	errs = append(errs, c.Options.Validate())
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--snapshot-window", c.SnapshotWindow}, {"--snapshot-max-wait", c.SnapshotMaxWait}, {"--stuck-after", c.StuckAfter}, {"tick", c.Tick}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", d.flag, d.v))
		}
	}
	if c.EncryptionKeyFile != "" {
		if _, err := sealing.LoadKeys(c.EncryptionKeyFile); err != nil {
			errs = append(errs, fmt.Errorf("--encryption-key-file: %w", err))
		}
	}
	return errors.Join(errs...)
}

// durationEnv reads a duration default from the environment; a value that does not parse
// is reported and the built-in default kept.
func durationEnv(key string, def time.Duration) time.Duration {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ignoring %s=%q: %v\n", key, v, err)
		return def
	}
	return d
}

// consumer names the rollout's durable consumer and its inbox rows.
const consumer = bus.ConsumerRollout

// Run runs the rollout service until ctx ends.
func Run(ctx context.Context, cfg Config) (err error) {
	defer func() { err = service.Stopped(ctx, err) }()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	var keys *sealing.Keys
	if cfg.EncryptionKeyFile != "" {
		if keys, err = sealing.LoadKeys(cfg.EncryptionKeyFile); err != nil {
			return fmt.Errorf("rollout: %w", err)
		}
	}
	env, err := service.Open(ctx, "rollout", cfg.Options)
	if err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	defer env.Close()
	r := newRollout(env, cfg)
	r.keys = keys
	if err := r.sealStored(ctx); err != nil {
		return fmt.Errorf("rollout: %w", err)
	}
	return env.Run(ctx,
		func(ctx context.Context) error {
			return bus.ConsumeBatches(ctx, env.JS, bus.StreamEvents, consumer, r.handle,
				env.ConsumeOptions(consumer, bus.WithBatchLimits(burstBatch, burstBatchBytes), bus.WithValidator(events.Admit), env.Observed(bus.StreamEvents, consumer))...)
		},
		r.runTimers,
		r.collectBlobs,
		r.servePreviews,
	)
}

// rollout is the service's state: none in memory beyond configuration.
type rollout struct {
	env        *service.Env
	log        *slog.Logger
	now        func() time.Time
	window     time.Duration
	maxWait    time.Duration
	stuckAfter time.Duration
	tick       time.Duration
	// poke wakes the timer loop after an event that may have set a due time.
	poke chan struct{}
	// keys seal Secrets at rest; nil without --encryption-key-file.
	keys *sealing.Keys
	// traces carry a change's trace on to what the timers send for it.
	traces traces
}

func newRollout(env *service.Env, cfg Config) *rollout {
	r := &rollout{env: env, log: env.Log, now: cfg.Now, window: cfg.SnapshotWindow, maxWait: cfg.SnapshotMaxWait,
		stuckAfter: cfg.StuckAfter, tick: cfg.Tick,
		poke: make(chan struct{}, 1)}
	if r.now == nil {
		r.now = time.Now
	}
	if r.window == 0 {
		r.window = DefaultSnapshotWindow
	}
	if r.maxWait == 0 {
		r.maxWait = max(DefaultSnapshotMaxWait, r.window)
	}
	if r.stuckAfter == 0 {
		r.stuckAfter = DefaultStuckAfter
	}
	if r.tick == 0 {
		r.tick = DefaultTick
	}
	return r
}

// handle applies one event: its state changes and the events they cause
// commit together with its inbox row.
func (r *rollout) handle(ctx context.Context, batch []bus.Delivery) error {
	var (
		evs      []cloudevents.Event
		kept     []bus.Delivery
		metas    []bus.Meta
		payloads []any
	)
	for _, d := range batch {
		payload, err := events.Decode(d.Event)
		if err != nil {
			return bus.Permanent(err)
		}
		switch payload.(type) {
		case *events.HubResourceUpserted, *events.HubResourceDeleted, *events.OverrideUpserted, *events.OverrideDeleted,
			*events.StagedUpdateUpserted, *events.StagedUpdateDeleted, *events.ApprovalRequestApproved,
			*events.PlacementUpserted, *events.PlacementDeleted, *events.PlacementScheduledV2,
			*events.WorkReported, *events.MemberJoined, *events.MemberUpdated, *events.MemberLeft:
			evs, metas, payloads = append(evs, d.Event), append(metas, d.Meta), append(payloads, payload)
			kept = append(kept, d)
		default:
			// Heartbeats: not the rollout's business, and frequent enough
			// that an inbox row for each would be waste. They are still
			// validated (a forged one is dead-lettered): a member's
			// credentials may not speak for another even where nothing
			// comes of it.
		}
	}
	if len(evs) == 0 {
		return nil
	}
	var (
		later reconciles
		hub   hubWrites
	)
	ran, err := inbox.HandleBatchThen(ctx, r.env.Pool, consumer, evs, func(ctx context.Context, tx pgx.Tx, i int) error {
		// Within the event's trace, which the work and progress it causes carry on.
		ctx = kept[i].Context(ctx)
		// Hub events that follow one another go to PostgreSQL together,
		// before any other event of the batch runs.
		switch p := payloads[i].(type) {
		case *events.HubResourceUpserted:
			return r.upsertHubResource(ctx, &hub, evs[i], metas[i], p)
		case *events.HubResourceDeleted:
			r.deleteHubResource(ctx, &hub, evs[i], metas[i], p)
			return nil
		}
		if err := r.flushHubWrites(ctx, tx, &hub, r.now()); err != nil {
			return err
		}
		return r.apply(ctx, tx, evs[i], metas[i], payloads[i], &later)
	}, func(ctx context.Context, tx pgx.Tx) error {
		if err := r.flushHubWrites(ctx, tx, &hub, r.now()); err != nil {
			return err
		}
		return r.reconcileLater(ctx, tx, &later)
	})
	if err != nil {
		return err
	}
	if !slices.Contains(ran, true) {
		r.log.Debug("events already handled", "events", len(evs), "first", evs[0].ID())
		return nil
	}
	select {
	case r.poke <- struct{}{}:
	default:
	}
	return nil
}

// apply changes the rollout's state for one event.
func (r *rollout) apply(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, m bus.Meta, payload any, later *reconciles) error {
	now := r.now()
	switch p := payload.(type) {
	case *events.PlacementUpserted:
		return r.upsertPlacement(ctx, tx, m, p, now)
	case *events.PlacementDeleted:
		return r.deletePlacement(ctx, tx, m, p.Name, now)
	case *events.PlacementScheduledV2:
		return r.scheduled(ctx, tx, p, now)
	case *events.WorkReported:
		return r.reported(ctx, tx, m, p, now, later)
	case *events.OverrideUpserted:
		return r.upsertOverride(ctx, tx, ev.ID(), m, p, now)
	case *events.OverrideDeleted:
		return r.deleteOverride(ctx, tx, ev.ID(), m, p, now)
	case *events.StagedUpdateUpserted:
		return r.upsertStaged(ctx, tx, m, p, now)
	case *events.StagedUpdateDeleted:
		return r.deleteStaged(ctx, tx, m, p, now)
	case *events.ApprovalRequestApproved:
		return r.approve(ctx, tx, p, now)
	case *events.MemberJoined:
		return r.memberJoined(ctx, tx, m, &p.Member, now)
	case *events.MemberUpdated:
		return r.memberUpdated(ctx, tx, m, &p.Member, now)
	case *events.MemberLeft:
		return r.memberChanged(ctx, tx, m, p.Name, true, p.LeavePolicy)
	}
	return nil
}

// reconciles are the placements a batch's reports changed, reconciled once each at the
// end of the batch (reconcileLater) rather than once per report: a burst of 100 reports
// on one placement loads its clusters and plans its rollout once, not 100 times. Each
// placement keeps the context of its last report, whose trace the reconcile carries on.
type reconciles struct {
	order []string
	ctxs  map[string]context.Context
}

func (l *reconciles) add(ctx context.Context, placement string) {
	if l.ctxs == nil {
		l.ctxs = map[string]context.Context{}
	}
	if _, ok := l.ctxs[placement]; !ok {
		l.order = append(l.order, placement)
	}
	l.ctxs[placement] = ctx
}

// reconcileLater reconciles the placements of later, in the batch's transaction, from
// their rows as the batch left them.
func (r *rollout) reconcileLater(ctx context.Context, tx pgx.Tx, later *reconciles) error {
	for _, name := range later.order {
		now := r.now()
		row, err := lockPlacement(ctx, tx, name, lockExisting, now)
		if err != nil {
			return err
		}
		if row == nil {
			continue
		}
		if err := r.reconcile(later.ctxs[name], tx, row, now); err != nil {
			return err
		}
	}
	return nil
}

// runTimers reconciles the placements whose coalescing window ended or whose
// timer (unavailable period, stuck deadline) is due, every tick, until ctx
// ends. The due times live in PostgreSQL, so a restarted replica picks them
// up; rows another replica is working on are skipped.
func (r *rollout) runTimers(ctx context.Context) error {
	t := time.NewTimer(r.tick)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-r.poke:
		}
		err := r.fireTimers(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			failures++
			// Say it once in a while, not every tick.
			if failures == 1 || failures%100 == 0 {
				r.log.Warn("rollout timers failed; retrying", "error", err, "failures", failures)
			}
			t.Reset(r.tick)
			continue
		}
		failures = 0
		t.Reset(r.untilNextDue(ctx))
	}
}

// untilNextDue is how long the timer loop may sleep: until the earliest due
// time, at most a tick.
func (r *rollout) untilNextDue(ctx context.Context) time.Duration {
	var next *time.Time
	err := r.env.Pool.QueryRow(ctx, `
		select least(min(snapshot_due_at), min(wake_at)) from rollout_placements`).Scan(&next)
	if err != nil || next == nil {
		return r.tick
	}
	return min(max(next.Sub(r.now()), time.Millisecond), r.tick)
}

// fireTimers reconciles every due placement once.
func (r *rollout) fireTimers(ctx context.Context) error {
	now := r.now()
	rows, err := r.env.Pool.Query(ctx, `
		select name from rollout_placements
		where snapshot_due_at <= $1 or wake_at <= $1
		order by name limit 500`, now)
	if err != nil {
		return fmt.Errorf("list due placements: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list due placements: %w", err)
	}
	var errs []error
	for _, name := range names {
		ctx := r.traces.context(ctx, name)
		err := pgx.BeginFunc(ctx, r.env.Pool, func(tx pgx.Tx) error {
			p, err := lockPlacement(ctx, tx, name, lockDue, now)
			if err != nil || p == nil {
				return err
			}
			return r.reconcile(ctx, tx, p, now)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("placement %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
