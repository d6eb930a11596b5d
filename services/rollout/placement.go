package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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
// generations in work and reports agree across services. An update the
// Fleet rules refuse (api.ValidateSpecUpdate) changes nothing, as in the
// scheduler (which dead-letters it with the field path) and the status
// service: all three keep the same spec.
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
	if row.spec != nil && !row.deleted {
		if errs := api.ValidateSpecUpdate(row.spec, &crp.Spec); len(errs) > 0 {
			r.log.Warn("placement update refused", "placement", crp.Name, "sequence", m.Sequence, "err", errs)
			return nil
		}
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
	if row.windowOpenedAt == nil {
		// A placement's first selection need not wait: the objects of a
		// `fleetctl apply` that lists them before the placement are in the
		// hub store already (this batch or an earlier one stored them), so
		// the window would buy nothing. It is evaluated now, and cut only if
		// every selector picks something (evaluateSelection); otherwise the
		// window opens as usual. Objects that come later cut a new snapshot.
		first, err := hasNoSnapshot(ctx, tx, crp.Name)
		if err != nil {
			return err
		}
		if first {
			due, row.selectAtOnce = now, true
		}
	}
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
	// Nothing to delete before the placement's upsert arrived: the scheduler
	// and the status service hold no placement then either.
	if int64(m.Sequence) <= row.specSeq || row.deleted || row.spec == nil {
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
// cluster holds, and has the batch re-plan the placement at its end: a cluster
// becoming available may free budget for the next.
func (r *rollout) reported(ctx context.Context, tx pgx.Tx, m bus.Meta, p *events.WorkReported, now time.Time, later *reconciles) error {
	exists, err := lockPlacementOnly(ctx, tx, p.Placement)
	if err != nil || !exists {
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
	was, wasAppliedAt := c.report, c.appliedAt
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
	if reflect.DeepEqual(was, c.report) && sameTime(wasAppliedAt, c.appliedAt) {
		// The same readiness as before (a worker reporting again what it
		// reported): nothing for the rollout to do.
		return nil
	}
	// Reconciled once at the end of the batch, with the batch's other reports on it.
	later.add(ctx, p.Placement)
	return nil
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
	c := p.ManifestCounts()
	rep.NotTrackable = c.NotTrackable > 0
	pending := c.Total - c.Available
	rep.OnlyNotTrackablePending = pending > 0 && pending == c.NotTrackablePending
	return rep
}

// memberJoined records that a member joined, with its labels (override rules
// select clusters by them).
func (r *rollout) memberJoined(ctx context.Context, tx pgx.Tx, m bus.Meta, member *api.MemberCluster, now time.Time) error {
	if err := r.memberChanged(ctx, tx, m, member.Name, false, ""); err != nil {
		return err
	}
	return r.memberLabelled(ctx, tx, m, member, now)
}

// memberUpdated records a member's new labels.
func (r *rollout) memberUpdated(ctx context.Context, tx pgx.Tx, m bus.Meta, member *api.MemberCluster, now time.Time) error {
	if _, err := tx.Exec(ctx, `insert into rollout_members (name, event_seq) values ($1, 0) on conflict do nothing`, member.Name); err != nil {
		return fmt.Errorf("store member %s: %w", member.Name, err)
	}
	return r.memberLabelled(ctx, tx, m, member, now)
}

// memberLabelled stores a member's labels unless a newer member event was
// taken, and when they changed wakes the placements whose latest snapshot has
// overrides and which the member holds: their overrides may render its work
// differently now, which rolls out under their strategies.
func (r *rollout) memberLabelled(ctx context.Context, tx pgx.Tx, m bus.Meta, member *api.MemberCluster, now time.Time) error {
	labels := member.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	tag, err := tx.Exec(ctx, `
		update rollout_members set labels = $2, event_seq = greatest(event_seq, $3), updated_at = now()
		where name = $1 and event_seq <= $3 and labels is distinct from $2::jsonb`, member.Name, labels, int64(m.Sequence))
	if err != nil {
		return fmt.Errorf("store the labels of member %s: %w", member.Name, err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	rows, err := tx.Query(ctx, `
		select p.name from rollout_placements p
		where exists (select 1 from rollout_clusters c where c.placement = p.name and c.cluster = $1 and c.sent = 'work')
		  and (select s.overrides is not null from resource_snapshots s where s.placement = p.name
		       order by s.snapshot_index desc limit 1)
		order by p.name for update of p`, member.Name)
	if err != nil {
		return fmt.Errorf("find the placements on member %s: %w", member.Name, err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("find the placements on member %s: %w", member.Name, err)
	}
	if _, err := tx.Exec(ctx, `update rollout_placements set wake_at = $2 where name = any($1) and (wake_at is null or wake_at > $2)`,
		names, now); err != nil {
		return fmt.Errorf("wake the placements on member %s: %w", member.Name, err)
	}
	return nil
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
