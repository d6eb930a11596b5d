package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/outbox"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"github.com/flotilla-dev/flotilla/services/scheduler/schedule"
)

// binding reads a placement's current decision.
func (s *Scheduler) binding(ctx context.Context, tx pgx.Tx, name string) (*schedule.Decision, error) {
	var raw []byte
	err := tx.QueryRow(ctx, `select decision from scheduler_bindings where placement = $1`, name).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read binding of %s: %w", name, err)
	}
	var d schedule.Decision
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("read binding of %s: %w", name, err)
	}
	return &d, nil
}

// decide schedules one placement (its row is locked by the caller) and
// records the decision when it changed or answers a new generation.
func (s *Scheduler) decide(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, r placementRow) error {
	policy, err := schedule.CompilePolicy(r.spec.Policy)
	if err != nil {
		return bus.Permanent(fmt.Errorf("placement %s: %w", r.name, err))
	}
	set, err := s.memberSet()
	if err != nil {
		return err
	}
	prev, err := s.binding(ctx, tx, r.name)
	if err != nil {
		return err
	}
	var prevGeneration int64
	if prev != nil {
		_ = tx.QueryRow(ctx, `select generation from scheduler_bindings where placement = $1`, r.name).Scan(&prevGeneration)
	}
	d := schedule.Decide(policy, set, prev, s.now())
	if !d.Changed(prev) && prevGeneration == r.generation {
		return nil
	}
	return s.record(ctx, tx, ev, r, d, true)
}

// record stores a decision as the binding and as history, and enqueues the
// PlacementScheduled event, whose id derives from the consumed event so a
// retried handler produces the same event.
func (s *Scheduler) record(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, r placementRow, d *schedule.Decision, bind bool) error {
	id := events.ID("scheduled", r.name, ev.ID())
	if bind {
		raw, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("encode decision: %w", err)
		}
		if _, err := tx.Exec(ctx, `
			insert into scheduler_bindings (placement, generation, policy_generation, policy_key, decision, event_id)
			values ($1, $2, $3, $4, $5, $6)
			on conflict (placement) do update set generation = excluded.generation,
				policy_generation = excluded.policy_generation, policy_key = excluded.policy_key,
				decision = excluded.decision, event_id = excluded.event_id, updated_at = now()`,
			r.name, r.generation, r.policyGeneration, d.PolicyKey, raw, id); err != nil {
			return fmt.Errorf("store binding of %s: %w", r.name, err)
		}
	}
	if err := s.history(ctx, tx, r, d, id); err != nil {
		return err
	}
	out := scheduledEvent(r, d)
	subject, err := events.SchedulingSubject(r.name)
	if err != nil {
		return bus.Permanent(err)
	}
	e, err := events.New(events.TypePlacementScheduled, s.env.Source, r.name, id, out)
	if err != nil {
		return fmt.Errorf("decision event for %s: %w", r.name, err)
	}
	return outbox.Enqueue(ctx, tx, subject, e)
}

// maxNotSelectedRows bounds the history rows kept for clusters a decision did
// not select: with thousands of members, every decision would otherwise write
// thousands of rows. The decision event and binding keep the full list.
const maxNotSelectedRows = 100

func (s *Scheduler) history(ctx context.Context, tx pgx.Tx, r placementRow, d *schedule.Decision, id string) error {
	var rows [][]any
	now := s.now()
	for _, c := range d.Chosen {
		rows = append(rows, []any{r.name, r.policyGeneration, c.Cluster, string(c.Action),
			c.Scores.Affinity, c.Scores.TopologySpread, c.Message(), id, now})
	}
	for _, u := range d.Removed {
		rows = append(rows, []any{r.name, r.policyGeneration, u.Cluster, "removed", nil, nil, u.Reason.Message, id, now})
	}
	for i, u := range d.NotChosen {
		if i == maxNotSelectedRows {
			break
		}
		rows = append(rows, []any{r.name, r.policyGeneration, u.Cluster, "not-selected", nil, nil, u.Reason.Message, id, now})
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"scheduling_decisions"},
		[]string{"placement", "policy_generation", "cluster", "action", "affinity_score", "topology_spread_score", "reason", "event_id", "decided_at"},
		pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("store decision history of %s: %w", r.name, err)
	}
	return nil
}

// scheduledEvent turns a decision into its event payload.
func scheduledEvent(r placementRow, d *schedule.Decision) events.PlacementScheduled {
	out := events.PlacementScheduled{
		Placement: r.name, Generation: r.generation, PlacementType: api.PlacementType(d.Type),
		Wanted: d.Needed, Fulfilled: d.Fulfilled, Chosen: []events.ClusterDecision{},
	}
	if d.Type == framework.PickAll {
		out.Wanted = 0
	}
	for _, c := range d.Chosen {
		out.Chosen = append(out.Chosen, events.ClusterDecision{Cluster: c.Cluster, Action: events.DecisionAction(c.Action),
			AffinityScore: c.Scores.Affinity, TopologySpreadScore: c.Scores.TopologySpread, Reason: c.Message()})
	}
	for _, u := range d.Removed {
		out.Removed = append(out.Removed, events.ClusterDecision{Cluster: u.Cluster, Action: events.ActionRemoved, Reason: u.Reason.Message})
	}
	for _, u := range d.NotChosen {
		out.NotChosen = append(out.NotChosen, events.ClusterDecision{Cluster: u.Cluster, Reason: u.Reason.Message})
	}
	if !d.Fulfilled {
		out.Message = d.UnfulfilledMessage()
	}
	return out
}
