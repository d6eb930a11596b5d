package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/platform/pieces"
	"github.com/flotilla-dev/flotilla/services/rollout/plan"
	"github.com/flotilla-dev/flotilla/services/rollout/snapshot"
)

// upsertPlacement stores a placement's defaulted spec. The generation
// follows the rule of placements.generation (the scheduler's): it bumps when
// the spec changes or the placement comes back after a delete, so the
// generations in work and reports agree across services.
func (r *rollout) upsertPlacement(ctx context.Context, tx pgx.Tx, m bus.Meta, p *events.PlacementUpserted, now time.Time) error {
	crp := p.Placement
	api.SetDefaults(&crp)
	if errs := api.ValidatePlacement(&crp); len(errs) > 0 {
		return bus.Permanent(fmt.Errorf("placement %s: %w", crp.Name, errs))
	}
	spec, err := json.Marshal(crp.Spec)
	if err != nil {
		return bus.Permanent(fmt.Errorf("placement %s: %w", crp.Name, err))
	}
	// Exclusive against hub changes in flight (see selectorsLock): they
	// chose which placements to re-select by the selectors they read.
	if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock($1)`, int64(selectorsLock)); err != nil {
		return fmt.Errorf("store placement %s: %w", crp.Name, err)
	}
	row, err := lockPlacement(ctx, tx, crp.Name, lockOrCreate, now)
	if err != nil {
		return err
	}
	if int64(m.Sequence) <= row.specSeq {
		return nil // an older event delivered late
	}
	err = tx.QueryRow(ctx, `
		update rollout_placements set spec = $2,
			generation = generation + case when spec = $2::jsonb and not deleted then 0 else 1 end,
			deleted = false, spec_seq = $3, updated_at = now()
		where name = $1 returning generation`, crp.Name, spec, int64(m.Sequence)).Scan(&row.generation)
	if err != nil {
		return fmt.Errorf("store placement %s: %w", crp.Name, err)
	}
	row.spec, row.deleted, row.specSeq = &crp.Spec, false, int64(m.Sequence)
	// The selectors may have changed: evaluate them when the window ends
	// (hub objects published with the placement then make one snapshot).
	due, opened := snapshot.DueAt(row.windowOpenedAt, now, r.window, r.maxWait)
	row.snapshotDueAt, row.windowOpenedAt = &due, &opened
	return r.reconcile(ctx, tx, row, now)
}

// deletePlacement marks a placement deleted; reconcile tombstones every
// cluster that holds it.
func (r *rollout) deletePlacement(ctx context.Context, tx pgx.Tx, m bus.Meta, name string, now time.Time) error {
	row, err := lockPlacement(ctx, tx, name, lockExisting, now)
	if err != nil || row == nil {
		return err
	}
	if int64(m.Sequence) <= row.specSeq || row.deleted {
		return nil
	}
	if _, err := tx.Exec(ctx, `update rollout_placements set deleted = true, spec_seq = $2, updated_at = now() where name = $1`,
		name, int64(m.Sequence)); err != nil {
		return fmt.Errorf("delete placement %s: %w", name, err)
	}
	row.deleted, row.specSeq = true, int64(m.Sequence)
	return r.reconcile(ctx, tx, row, now)
}

// scheduled takes in one piece of the scheduler's decisions for a
// placement. Once every piece of the next revision (or of a newer base) is
// in, it applies them to the decision it holds and reconciles; until then
// it keeps the piece (rollout_pieces) and the placement rolls on with the
// decision it has.
func (r *rollout) scheduled(ctx context.Context, tx pgx.Tx, p *events.PlacementScheduledV2, now time.Time) error {
	row, err := lockPlacement(ctx, tx, p.Placement, lockOrCreate, now)
	if err != nil {
		return err
	}
	d := row.decision
	if d == nil {
		d = &revision.Decision{}
	}
	revs, err := revision.Receive(ctx, pieces.In(tx, "rollout_pieces", p.Placement, "decision"), d.Revision, *p)
	if errors.Is(err, revision.ErrGap) {
		r.log.Warn("a scheduling decision waits for a lost piece", "placement", p.Placement, "applied", d.Revision, "err", err)
		return nil
	}
	if err != nil || len(revs) == 0 {
		return err
	}
	for _, pieces := range revs {
		err := d.Apply(pieces)
		if errors.Is(err, revision.ErrMismatch) {
			r.log.Warn("the decision assembled does not match the scheduler's", "placement", p.Placement, "err", err)
		} else if err != nil {
			return bus.Permanent(fmt.Errorf("decision for %s: %w", p.Placement, err))
		}
	}
	decision, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("decision for %s: %w", p.Placement, err)
	}
	if _, err := tx.Exec(ctx, `update rollout_placements set decision = $2, updated_at = now() where name = $1`,
		p.Placement, decision); err != nil {
		return fmt.Errorf("store decision for %s: %w", p.Placement, err)
	}
	row.decision = d
	return r.reconcile(ctx, tx, row, now)
}

// reported records an apply worker's report when it answers the work the
// cluster holds, and re-plans the placement: a cluster becoming available
// may free budget for the next.
func (r *rollout) reported(ctx context.Context, tx pgx.Tx, m bus.Meta, p *events.WorkReported, now time.Time) error {
	row, err := lockPlacement(ctx, tx, p.Placement, lockExisting, now)
	if err != nil || row == nil {
		return err
	}
	c, err := loadCluster(ctx, tx, p.Placement, p.Cluster)
	if err != nil || c == nil {
		return err
	}
	if int64(m.Sequence) <= c.reportSeq {
		return nil
	}
	answersWork := c.holds() && !p.Deleted && p.ResourceIndex == c.sentIndex &&
		p.Generation >= c.keyGeneration && p.Generation <= c.sentGeneration
	if !answersWork {
		// A report on older work, or on a tombstone: nothing to roll out.
		return nil
	}
	c.reportSeq = int64(m.Sequence)
	c.report = summarise(p)
	if c.report.Applied.Status == "True" {
		if c.appliedAt == nil {
			at := p.ObservedAt
			// The worker's clock may run ahead; the period must not start
			// in the future.
			if at.IsZero() || at.After(now) {
				at = now
			}
			c.appliedAt = &at
		}
	} else {
		c.appliedAt = nil
	}
	if err := saveCluster(ctx, tx, p.Placement, c); err != nil {
		return err
	}
	return r.reconcile(ctx, tx, row, now)
}

// summarise keeps what readiness needs of a report.
func summarise(p *events.WorkReported) *plan.Report {
	rep := &plan.Report{
		Applied:   plan.Condition{Status: p.Applied.Status, Reason: p.Applied.Reason, Message: p.Applied.Message},
		Available: plan.Condition{Status: p.Available.Status, Reason: p.Available.Reason, Message: p.Available.Message},
	}
	if p.DiffReported != nil {
		rep.DiffReported = &plan.Condition{Status: p.DiffReported.Status, Reason: p.DiffReported.Reason, Message: p.DiffReported.Message}
	}
	pending, pendingNotTrackable := 0, 0
	for _, mr := range p.Manifests {
		nt := mr.Available.Reason == api.ManifestNotTrackableReason
		if nt {
			rep.NotTrackable = true
		}
		if mr.Available.Status != "True" {
			pending++
			if nt {
				pendingNotTrackable++
			}
		}
	}
	rep.OnlyNotTrackablePending = pending > 0 && pending == pendingNotTrackable
	return rep
}

// memberChanged records that a member joined or left, and with which leave
// policy: the tombstones of a member that left keep (Keep) or delete
// (Delete) the objects placed on it.
func (r *rollout) memberChanged(ctx context.Context, tx pgx.Tx, m bus.Meta, name string, left bool, policy events.LeavePolicy) error {
	_, err := tx.Exec(ctx, `
		insert into rollout_members (name, left_fleet, leave_policy, event_seq) values ($1, $2, $3, $4)
		on conflict (name) do update set left_fleet = excluded.left_fleet, leave_policy = excluded.leave_policy,
			event_seq = excluded.event_seq, updated_at = now()
		where rollout_members.event_seq < excluded.event_seq`,
		name, left, string(policy), int64(m.Sequence))
	if err != nil {
		return fmt.Errorf("store member %s: %w", name, err)
	}
	return nil
}
