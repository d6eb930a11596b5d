package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/scheduler/eviction"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"github.com/flotilla-dev/flotilla/services/scheduler/schedule"
)

// Evictions are the scheduler's because an eviction changes a decision: like
// upstream's eviction controller deleting a binding, an executed eviction
// removes the cluster from the placement's decision, and the placement is then
// decided again at once (a PickN placement picks a replacement; an untainted
// cluster may be picked again, as upstream warns: fleetctl drain taints first).
// The scheduler keeps evictions and budgets in the table disruptions, which the
// status service reads to answer fleetctl get.

// reasonEvicted is why an evicted cluster left the decision.
const reasonEvicted framework.ReasonCode = "Evicted"

// upsertDisruption stores a budget, or runs a new eviction once.
func (s *Scheduler) upsertDisruption(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, seq int64, p *events.DisruptionUpserted) error {
	key := p.Key()
	held, err := lockDisruption(ctx, tx, key)
	if err != nil {
		return err
	}
	if held != nil && seq <= held.seq {
		s.env.Log.Debug("older disruption event delivered late; ignored", "object", key, "sequence", seq, "held", held.seq)
		return nil
	}
	created := metav1.NewTime(s.now().UTC().Truncate(time.Second))
	if held != nil && !held.deleted {
		var old metav1.PartialObjectMetadata
		if err := json.Unmarshal(held.object, &old); err == nil && !old.CreationTimestamp.IsZero() {
			created = old.CreationTimestamp
		}
	}
	if b := p.ClusterResourcePlacementDisruptionBudget; b != nil {
		b.CreationTimestamp = created
		return storeDisruption(ctx, tx, key, b.Name, b, seq)
	}
	e := *p.ClusterResourcePlacementEviction
	if held != nil && !held.deleted {
		var old api.ClusterResourcePlacementEviction
		if err := json.Unmarshal(held.object, &old); err != nil {
			return fmt.Errorf("read %s: %w", key, err)
		}
		if errs := api.ValidateEvictionUpdate(&old, &e); len(errs) > 0 {
			return bus.Permanent(fmt.Errorf("%s: update refused: %w", key, errs))
		}
		return nil // it ran once already
	}
	e.Status = api.PlacementEvictionStatus{}
	e.Generation, e.CreationTimestamp = 1, created
	if err := s.runEviction(ctx, tx, ev, &e); err != nil {
		return err
	}
	return storeDisruption(ctx, tx, key, e.Spec.PlacementName, &e, seq)
}

// deleteDisruption forgets an eviction (what it did stays done) or a budget.
func (s *Scheduler) deleteDisruption(ctx context.Context, tx pgx.Tx, seq int64, key events.DisruptionKey) error {
	_, err := tx.Exec(ctx, `update disruptions set deleted = true, event_seq = $3, updated_at = now()
		where kind = $1 and name = $2 and event_seq < $3`, key.Kind, key.Name, seq)
	if err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// heldDisruption is an eviction or budget as stored.
type heldDisruption struct {
	object  []byte
	deleted bool
	seq     int64
}

func lockDisruption(ctx context.Context, tx pgx.Tx, key events.DisruptionKey) (*heldDisruption, error) {
	var h heldDisruption
	err := tx.QueryRow(ctx, `select object, deleted, event_seq from disruptions where kind = $1 and name = $2 for update`,
		key.Kind, key.Name).Scan(&h.object, &h.deleted, &h.seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", key, err)
	}
	return &h, nil
}

func storeDisruption(ctx context.Context, tx pgx.Tx, key events.DisruptionKey, placement string, obj any, seq int64) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return bus.Permanent(fmt.Errorf("encode %s: %w", key, err))
	}
	_, err = tx.Exec(ctx, `insert into disruptions (kind, name, object, placement, event_seq) values ($1, $2, $3, $4, $5)
		on conflict (kind, name) do update set object = excluded.object, placement = excluded.placement,
			deleted = false, event_seq = excluded.event_seq, updated_at = now()`,
		key.Kind, key.Name, raw, placement, seq)
	if err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	return nil
}

// runEviction judges the eviction under its placement's row lock, sets its
// conditions, and when it executes removes the cluster from the decision.
func (s *Scheduler) runEviction(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, e *api.ClusterResourcePlacementEviction) error {
	row, found, err := lockPlacementRow(ctx, tx, e.Spec.PlacementName)
	if err != nil {
		return err
	}
	f := eviction.Facts{PlacementFound: found}
	var prev *schedule.Decision
	if found {
		if err := s.gatherFacts(ctx, tx, row, e.Spec.ClusterName, &f, &prev); err != nil {
			return err
		}
	}
	v := eviction.Judge(f)
	now := metav1.NewTime(s.now().UTC().Truncate(time.Second))
	valid := metav1.Condition{Type: api.EvictionConditionValid, Status: metav1.ConditionFalse, ObservedGeneration: e.Generation,
		LastTransitionTime: now, Reason: api.EvictionInvalidReason, Message: v.ValidMessage}
	if v.Valid {
		valid.Status, valid.Reason = metav1.ConditionTrue, api.EvictionValidReason
	}
	e.Status.Conditions = []metav1.Condition{valid}
	if !v.Valid {
		s.env.Log.Info("eviction invalid", "eviction", e.Name, "placement", e.Spec.PlacementName, "cluster", e.Spec.ClusterName, "why", v.ValidMessage)
		return nil
	}
	executed := metav1.Condition{Type: api.EvictionConditionExecuted, Status: metav1.ConditionFalse, ObservedGeneration: e.Generation,
		LastTransitionTime: now, Reason: api.EvictionNotExecutedReason, Message: v.ExecutedMessage}
	if v.Executed {
		executed.Status, executed.Reason = metav1.ConditionTrue, api.EvictionExecutedReason
	}
	e.Status.Conditions = append(e.Status.Conditions, executed)
	s.env.Log.Info("eviction judged", "eviction", e.Name, "placement", e.Spec.PlacementName, "cluster", e.Spec.ClusterName,
		"executed", v.Executed, "why", v.ExecutedMessage)
	if !v.Executed {
		return nil
	}
	return s.evict(ctx, tx, ev, row, prev, e)
}

// lockPlacementRow reads and locks a live placement's row.
func lockPlacementRow(ctx context.Context, tx pgx.Tx, name string) (placementRow, bool, error) {
	r := placementRow{name: name}
	var spec []byte
	err := tx.QueryRow(ctx, `select spec, generation, policy_generation from placements where name = $1 and not deleted for update`,
		name).Scan(&spec, &r.generation, &r.policyGeneration)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("load placement %s: %w", name, err)
	}
	if err := json.Unmarshal(spec, &r.spec); err != nil {
		return r, false, fmt.Errorf("load placement %s: %w", name, err)
	}
	return r, true, nil
}

// gatherFacts reads what the judgement needs: the decision, the budget, and
// from the rollout's rollout_clusters (read only) whether the work reached the
// cluster, whether it failed there, and where the placement is available.
func (s *Scheduler) gatherFacts(ctx context.Context, tx pgx.Tx, row placementRow, cluster string, f *eviction.Facts, prev **schedule.Decision) error {
	spec := row.spec
	f.PlacementType = api.PickAllPlacementType
	if spec.Policy != nil && spec.Policy.PlacementType != "" {
		f.PlacementType = spec.Policy.PlacementType
		if spec.Policy.NumberOfClusters != nil {
			f.NumberOfClusters = int(*spec.Policy.NumberOfClusters)
		}
	}
	d, err := s.binding(ctx, tx, row.name)
	if err != nil || d == nil {
		return err
	}
	*prev = d
	chosen := d.ChosenNames()
	f.Scheduled = slices.Contains(chosen, cluster)
	f.Total = len(chosen)
	var raw []byte
	err = tx.QueryRow(ctx, `select object from disruptions where kind = $1 and name = $2 and not deleted`,
		api.ClusterResourcePlacementDisruptionBudgetKind, row.name).Scan(&raw)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return fmt.Errorf("load the disruption budget of %s: %w", row.name, err)
	default:
		var b api.ClusterResourcePlacementDisruptionBudget
		if err := json.Unmarshal(raw, &b); err != nil {
			return fmt.Errorf("load the disruption budget of %s: %w", row.name, err)
		}
		f.Budget = &b.Spec
	}
	err = tx.QueryRow(ctx, `
		select coalesce(bool_or(cluster = $2 and sent = 'work'), false),
			coalesce(bool_or(cluster = $2 and (report->'applied'->>'status' = 'False' or report->'available'->>'status' = 'False'
				or report->'diffReported'->>'status' = 'True')), false),
			count(*) filter (where ready and sent = 'work')
		from rollout_clusters where placement = $1 and cluster = any($3)`,
		row.name, cluster, chosen).Scan(&f.Placed, &f.Failed, &f.Available)
	if err != nil {
		return fmt.Errorf("read the rollout of %s: %w", row.name, err)
	}
	return nil
}

// evict removes the cluster from the placement's decision and records that,
// then decides the placement again from there.
func (s *Scheduler) evict(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, row placementRow, prev *schedule.Decision, e *api.ClusterResourcePlacementEviction) error {
	var prevGeneration int64
	if err := tx.QueryRow(ctx, `select generation from scheduler_bindings where placement = $1`, row.name).Scan(&prevGeneration); err != nil {
		return fmt.Errorf("read binding of %s: %w", row.name, err)
	}
	d := *prev
	d.Chosen = slices.DeleteFunc(slices.Clone(prev.Chosen), func(c schedule.Chosen) bool { return c.Cluster == e.Spec.ClusterName })
	d.Removed = []schedule.Unchosen{{Cluster: e.Spec.ClusterName, Reason: framework.Reason{Code: reasonEvicted,
		Message: fmt.Sprintf("evicted by ClusterResourcePlacementEviction %s", e.Name)}}}
	d.NotChosen = nil
	if d.Type == framework.PickAll {
		d.Needed = len(d.Chosen)
	}
	d.Fulfilled = len(d.Chosen) >= d.Needed
	if err := s.record(ctx, tx, ev, row, published{prev, prevGeneration}, &d, true); err != nil {
		return err
	}
	// A second decision from the same event needs ids of its own.
	again := ev.Clone()
	again.SetID(events.ID("evicted", ev.ID()))
	return s.decide(ctx, tx, again, row)
}
