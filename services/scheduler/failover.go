package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"github.com/flotilla-dev/flotilla/services/scheduler/schedule"
)

// DefaultFailoverAfter is the grace period of a placement without the annotation
// flotilla.dev/failover-after.
const DefaultFailoverAfter = 5 * time.Minute

// failoverTick is how often the timer loop looks for placements whose failover
// timer is due (scheduler_bindings.wake_at): silence is no event, so a member
// that stops beating is found lost by the clock.
const failoverTick = time.Second

// maxDuePerPass bounds the placements one timer transaction re-decides.
const maxDuePerPass = 100

// failoverPolicy is how failover treats the placement now: its grace and failback
// periods, and the liveness of the clusters its previous decision names, read from
// PostgreSQL in tx (never from memory, which may lag behind the heartbeats another
// replica took).
func (s *Scheduler) failoverPolicy(ctx context.Context, tx pgx.Tx, r placementRow, prev *schedule.Decision) (schedule.FailoverPolicy, error) {
	fo := schedule.FailoverPolicy{After: r.failover.After, FailbackAfter: r.failover.FailbackAfter}
	if fo.After <= 0 {
		fo.After = s.failoverAfter
	}
	if prev == nil {
		return fo, nil
	}
	var names []string
	for _, c := range prev.Chosen {
		names = append(names, c.Cluster)
	}
	for _, c := range prev.Released {
		names = append(names, c.Cluster)
	}
	for _, m := range prev.Moves {
		names = append(names, m.From, m.To)
	}
	// A member that never sent a heartbeat has no liveness: nothing says it was
	// ever up, so nothing says it went down (it is not chosen anew either).
	rows, err := tx.Query(ctx, `select name, heartbeat_at, spec->'spec'->'heartbeatPeriodSeconds',
			healthy, health_message, coalesce(health_since, heartbeat_at)
		from member_clusters where name = any($1) and state = 'joined' and heartbeat_at is not null`, names)
	if err != nil {
		return fo, fmt.Errorf("read the liveness of %s's clusters: %w", r.name, err)
	}
	fo.Live = map[string]schedule.Liveness{}
	for rows.Next() {
		var (
			name   string
			l      schedule.Liveness
			period *int64
		)
		if err := rows.Scan(&name, &l.Heartbeat, &period, &l.Healthy, &l.Message, &l.Since); err != nil {
			return fo, fmt.Errorf("read the liveness of %s's clusters: %w", r.name, err)
		}
		l.Period = framework.DefaultHeartbeatPeriod
		if period != nil && *period > 0 {
			l.Period = time.Duration(*period) * time.Second
		}
		fo.Live[name] = l
	}
	return fo, rows.Err()
}

// afterDecision stores when the placement's decision may next change with no event,
// and the failover steps d took in the history.
func (s *Scheduler) afterDecision(ctx context.Context, tx pgx.Tx, name string, d *schedule.Decision, wake time.Time, id string) error {
	var at *time.Time
	if !wake.IsZero() {
		at = &wake
	}
	if _, err := tx.Exec(ctx, `update scheduler_bindings set wake_at = $2 where placement = $1 and wake_at is distinct from $2`, name, at); err != nil {
		return fmt.Errorf("store the failover timer of %s: %w", name, err)
	}
	if len(d.Steps) == 0 {
		return nil
	}
	rows := make([][]any, len(d.Steps))
	now := s.now()
	for i, st := range d.Steps {
		rows[i] = []any{name, st.Kind, st.From, st.To, st.Message, id, now}
		s.env.Log.Info("failover", "placement", name, "step", st.Kind, "from", st.From, "to", st.To, "why", st.Message)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"failover_history"},
		[]string{"placement", "kind", "from_cluster", "to_cluster", "message", "event_id", "at"}, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("store the failover history of %s: %w", name, err)
	}
	return nil
}

// storeFailoverSettings keeps the placement's failover annotations beside its spec.
func storeFailoverSettings(ctx context.Context, tx pgx.Tx, name string, fs api.FailoverSettings) error {
	ms := func(d time.Duration) *int64 {
		if d <= 0 {
			return nil
		}
		v := d.Milliseconds()
		return &v
	}
	if _, err := tx.Exec(ctx, `update placements set failover_after_ms = $2, failback_after_ms = $3 where name = $1`,
		name, ms(fs.After), ms(fs.FailbackAfter)); err != nil {
		return fmt.Errorf("store the failover settings of %s: %w", name, err)
	}
	return nil
}

// failoverSettings reads back what storeFailoverSettings stored.
func failoverSettings(afterMS, failbackMS *int64) api.FailoverSettings {
	var fs api.FailoverSettings
	if afterMS != nil {
		fs.After = time.Duration(*afterMS) * time.Millisecond
	}
	if failbackMS != nil {
		fs.FailbackAfter = time.Duration(*failbackMS) * time.Millisecond
	}
	return fs
}

// catchUp moves heard up to now when the scheduler's consumer has nothing waiting,
// delivered or not: every event on the bus until now has been handled (by this replica
// or another), so the members' liveness in PostgreSQL is current. Without it, a
// scheduler on an idle bus, or just started, would wait for an event to judge silence.
func (s *Scheduler) catchUp(ctx context.Context) {
	s.mu.Lock()
	asked := s.now()
	fresh := asked.Sub(s.heard) < failoverTick
	s.mu.Unlock()
	if fresh {
		return
	}
	c, err := s.env.JS.Consumer(ctx, bus.StreamEvents, consumer)
	if err != nil {
		return
	}
	info, err := c.Info(ctx)
	if err != nil || info.NumPending > 0 || info.NumAckPending > 0 {
		return
	}
	s.mu.Lock()
	if asked.After(s.heard) {
		s.heard = asked
	}
	s.mu.Unlock()
}

// runTimers re-decides the placements whose failover timer is due, until ctx ends.
func (s *Scheduler) runTimers(ctx context.Context) error {
	t := time.NewTicker(failoverTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		s.catchUp(ctx)
		for {
			n, err := s.wakeDue(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				s.env.Log.Warn("failover timers: will retry", "err", err)
				break
			}
			if n < maxDuePerPass {
				break
			}
		}
	}
}

// wakeDue re-decides up to maxDuePerPass placements whose timer is due, in one
// transaction, and reports how many. It locks the fleet version for share first,
// as a placement event's handler does (same lock order, no deadlock), so it
// decides on the members as of the latest member change; rows another replica
// holds are skipped (it is deciding them).
func (s *Scheduler) wakeDue(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A timer is due once the scheduler has heard the fleet up to it (Scheduler.heard):
	// before that, the members' liveness in PostgreSQL is older than the timer.
	now := s.now()
	if s.heard.IsZero() {
		return 0, nil
	}
	due := s.heard
	if now.Before(due) {
		due = now
	}
	var n int
	err := pgx.BeginFunc(ctx, s.env.Pool, func(tx pgx.Tx) error {
		if err := s.syncMembers(ctx, tx, false); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `select p.name, p.spec, p.generation, p.policy_generation, p.failover_after_ms, p.failback_after_ms, b.wake_at
			from placements p join scheduler_bindings b on b.placement = p.name
			where b.wake_at <= $1 and not p.deleted
			order by p.name limit $2 for update of p, b skip locked`, due, maxDuePerPass)
		if err != nil {
			return fmt.Errorf("list due placements: %w", err)
		}
		list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (duePlacement, error) {
			var d duePlacement
			err := scanPlacement(row, &d.placementRow, &d.wakeAt)
			return d, err
		})
		if err != nil {
			return fmt.Errorf("list due placements: %w", err)
		}
		n = len(list)
		for _, r := range list {
			// The timer's event: its id names the placement and the due time, so
			// a retried pass produces the same decision events.
			ev := cloudevents.New()
			ev.SetID(events.ID("failover-timer", r.name, r.wakeAt.UTC().Format(time.RFC3339Nano)))
			if err := s.decide(ctx, tx, ev, r.placementRow); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.fleetVersion = -1 // the transaction rolled back: reload the members next time
		if errors.Is(err, context.Canceled) {
			return 0, err
		}
		return 0, fmt.Errorf("failover timers: %w", err)
	}
	return n, nil
}

// duePlacement is a placement whose failover timer is due.
type duePlacement struct {
	placementRow
	wakeAt time.Time
}

// scanPlacement reads a placement row: name, spec, generation, policy generation,
// failover settings, then extra.
func scanPlacement(row pgx.Row, r *placementRow, extra ...any) error {
	var (
		spec                []byte
		afterMS, failbackMS *int64
	)
	if err := row.Scan(append([]any{&r.name, &spec, &r.generation, &r.policyGeneration, &afterMS, &failbackMS}, extra...)...); err != nil {
		return err
	}
	if err := json.Unmarshal(spec, &r.spec); err != nil {
		return fmt.Errorf("placement %s: %w", r.name, err)
	}
	r.failover = failoverSettings(afterMS, failbackMS)
	return nil
}
