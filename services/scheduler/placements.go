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
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"github.com/flotilla-dev/flotilla/services/scheduler/schedule"
)

// placementRow is a placement as stored.
type placementRow struct {
	name             string
	spec             api.PlacementSpec
	generation       int64
	policyGeneration int64
	failover         api.FailoverSettings
}

// upsertPlacement stores a placement and decides it. An event older (by stream sequence)
// than the placement event the scheduler took last changes nothing, and so does an update
// the Fleet rules refuse (api.ValidateSpecUpdate): it is dead-lettered with the field path,
// and the rollout and status services ignore it too, so all three keep the same spec.
func (s *Scheduler) upsertPlacement(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, seq int64, p *events.PlacementUpserted) error {
	crp := p.Placement
	api.SetDefaults(&crp)
	if errs := api.ValidatePlacement(&crp); len(errs) > 0 {
		return bus.Permanent(fmt.Errorf("placement %s: %w", crp.Name, errs))
	}
	held, err := lockHeldPlacement(ctx, tx, crp.Name)
	if err != nil {
		return err
	}
	if held != nil && seq <= held.seq {
		s.env.Log.Debug("older placement event delivered late; ignored", "placement", crp.Name, "sequence", seq, "held", held.seq)
		return nil
	}
	if held != nil && !held.deleted {
		if errs := api.ValidateSpecUpdate(&held.spec, &crp.Spec); len(errs) > 0 {
			return bus.Permanent(fmt.Errorf("placement %s: update refused: %w", crp.Name, errs))
		}
	}
	spec, err := json.Marshal(crp.Spec)
	if err != nil {
		return bus.Permanent(fmt.Errorf("placement %s: %w", crp.Name, err))
	}
	fs, _ := api.Failover(&crp) // validated above
	row := placementRow{name: crp.Name, spec: crp.Spec, failover: fs}
	// The upsert holds the placement's row lock until commit: decisions for
	// one placement are serialised across replicas. The sequence guard is
	// repeated for a row another replica created meanwhile.
	err = tx.QueryRow(ctx, `
		insert into placements (name, spec, spec_seq) values ($1, $2, $3)
		on conflict (name) do update set
			spec = excluded.spec,
			generation = placements.generation + case when placements.spec = excluded.spec and not placements.deleted then 0 else 1 end,
			policy_generation = placements.policy_generation + case when placements.spec->'policy' is distinct from excluded.spec->'policy' or placements.deleted then 1 else 0 end,
			deleted = false, deleted_at = null, spec_seq = excluded.spec_seq, updated_at = now()
		where placements.spec_seq < excluded.spec_seq
		returning generation, policy_generation`, crp.Name, spec, seq).Scan(&row.generation, &row.policyGeneration)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // a newer event about the placement was taken first
	}
	if err != nil {
		return fmt.Errorf("store placement %s: %w", crp.Name, err)
	}
	if err := storeFailoverSettings(ctx, tx, crp.Name, fs); err != nil {
		return err
	}
	return s.decide(ctx, tx, ev, row)
}

// heldPlacement is the placement the scheduler holds: its spec in force, whether it was
// deleted, and the stream sequence of the event that made it so.
type heldPlacement struct {
	spec    api.PlacementSpec
	deleted bool
	seq     int64
}

// lockHeldPlacement reads and locks the placement's row; nil when there is none.
func lockHeldPlacement(ctx context.Context, tx pgx.Tx, name string) (*heldPlacement, error) {
	var (
		h    heldPlacement
		spec []byte
	)
	err := tx.QueryRow(ctx, `select spec, deleted, spec_seq from placements where name = $1 for update`, name).Scan(&spec, &h.deleted, &h.seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load placement %s: %w", name, err)
	}
	if err := json.Unmarshal(spec, &h.spec); err != nil {
		return nil, fmt.Errorf("load placement %s: %w", name, err)
	}
	return &h, nil
}

func (s *Scheduler) deletePlacement(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, seq int64, name string) error {
	var generation, policyGeneration int64
	err := tx.QueryRow(ctx, `update placements set deleted = true, deleted_at = now(), spec_seq = $2, updated_at = now()
		where name = $1 and not deleted and spec_seq < $2 returning generation, policy_generation`, name, seq).Scan(&generation, &policyGeneration)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // unknown, deleted already, or a newer event was taken first
	}
	if err != nil {
		return fmt.Errorf("delete placement %s: %w", name, err)
	}
	prev, err := s.binding(ctx, tx, name)
	if err != nil || prev == nil {
		return err
	}
	d := &schedule.Decision{PolicyKey: prev.PolicyKey, Type: prev.Type}
	for _, c := range prev.Chosen {
		d.Removed = append(d.Removed, schedule.Unchosen{Cluster: c.Cluster,
			Reason: framework.Reason{Code: "PlacementDeleted", Message: "the placement was deleted"}})
	}
	s.bindings.forget(name)
	if _, err := tx.Exec(ctx, `delete from scheduler_bindings where placement = $1`, name); err != nil {
		return fmt.Errorf("delete binding of %s: %w", name, err)
	}
	return s.record(ctx, tx, ev, placementRow{name: name, generation: generation, policyGeneration: policyGeneration},
		published{decision: prev}, d, false)
}

// rescheduleLater has the batch re-decide every placement at its end (handle), after
// ev changed the members: a batch of 100 joins re-decides the placements once, not 100
// times (with 1,000 placements, 4,000 members joining took the scheduler minutes).
func (s *Scheduler) rescheduleLater(ctx context.Context, ev cloudevents.Event) {
	s.reschedule = &rescheduling{ctx: ctx, ev: ev}
}

// rescheduleAll re-decides every placement after a change to the members.
// Rows are locked in name order, so concurrent replicas cannot deadlock.
func (s *Scheduler) rescheduleAll(ctx context.Context, tx pgx.Tx, ev cloudevents.Event) error {
	rows, err := tx.Query(ctx, `select name, spec, generation, policy_generation, failover_after_ms, failback_after_ms from placements
		where not deleted order by name for update`)
	if err != nil {
		return fmt.Errorf("list placements: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (placementRow, error) {
		var r placementRow
		err := scanPlacement(row, &r)
		return r, err
	})
	if err != nil {
		return fmt.Errorf("list placements: %w", err)
	}
	for _, r := range list {
		if err := s.decide(ctx, tx, ev, r); err != nil {
			return err
		}
	}
	return nil
}
