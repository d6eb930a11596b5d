package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// Staged updates (issue 15) are kept in staged_updates: strategies as
// applied, runs with the status the placement's reconcile computes (see
// stagedrun.go), and the approval requests runs create. An event about a
// run or an approval wakes the run's placement, whose next reconcile (within
// a tick) moves the run on under the placement's row lock.

// stagedRow is a staged_updates row.
type stagedRow struct {
	kind, name string
	object     json.RawMessage
	placement  *string
	progress   json.RawMessage
	deleted    bool
	createdSeq int64
	eventSeq   int64
}

func lockStaged(ctx context.Context, tx pgx.Tx, kind, name string) (*stagedRow, error) {
	r := stagedRow{kind: kind, name: name}
	err := tx.QueryRow(ctx, `select object, placement, progress, deleted, created_seq, event_seq from staged_updates
		where kind = $1 and name = $2 for update`, kind, name).Scan(&r.object, &r.placement, &r.progress, &r.deleted, &r.createdSeq, &r.eventSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", kind, name, err)
	}
	return &r, nil
}

// upsertStaged stores a strategy, or a run's spec (a new run, or a change of
// its state; a change of an immutable field is refused as upstream refuses
// it), and wakes the run's placement.
func (r *rollout) upsertStaged(ctx context.Context, tx pgx.Tx, m bus.Meta, p *events.StagedUpdateUpserted, now time.Time) error {
	obj := p.Object()
	if obj == nil {
		return bus.Permanent(errors.New("staged update: the event carries no strategy or run"))
	}
	api.Default(obj)
	if errs := api.Validate(obj); len(errs) > 0 {
		return bus.Permanent(fmt.Errorf("%s: %w", p.Key(), errs))
	}
	key := p.Key()
	prev, err := lockStaged(ctx, tx, key.Kind, key.Name)
	if err != nil || (prev != nil && prev.eventSeq >= int64(m.Sequence)) {
		return err
	}
	created := metav1.NewTime(now.UTC().Truncate(time.Second))
	switch o := obj.(type) {
	case *api.ClusterStagedUpdateStrategy:
		if prev != nil && !prev.deleted {
			var old api.ClusterStagedUpdateStrategy
			if err := json.Unmarshal(prev.object, &old); err == nil {
				created = old.CreationTimestamp
			}
		}
		o.CreationTimestamp = created
		return storeStaged(ctx, tx, key, o, nil, nil, int64(m.Sequence), int64(m.Sequence))
	case *api.ClusterStagedUpdateRun:
		run := *o
		run.Status = api.UpdateRunStatus{}
		createdSeq := int64(m.Sequence)
		var progress json.RawMessage
		if prev != nil && !prev.deleted {
			var old api.ClusterStagedUpdateRun
			if err := json.Unmarshal(prev.object, &old); err != nil {
				return fmt.Errorf("read %s: %w", key, err)
			}
			if errs := api.ValidateStagedUpdateRunUpdate(&old, &run); len(errs) > 0 {
				r.log.Warn("staged update run change refused", "run", run.Name, "sequence", m.Sequence, "err", errs)
				return nil
			}
			// Only the state may change: the run keeps its status and place.
			old.Spec.State, old.Labels, old.Annotations = run.Spec.State, run.Labels, run.Annotations
			run, createdSeq, progress = old, prev.createdSeq, prev.progress
		} else {
			run.CreationTimestamp = created
			if err := supersede(ctx, tx, run.Spec.PlacementName, run.Name, now); err != nil {
				return err
			}
		}
		placement := run.Spec.PlacementName
		if err := storeStaged(ctx, tx, key, &run, &placement, progress, createdSeq, int64(m.Sequence)); err != nil {
			return err
		}
		return wakePlacement(ctx, tx, placement, now)
	}
	return nil
}

// supersede ends the unfinished runs of a placement when a newer run is
// created: the newest run drives the placement, and an older one would
// otherwise show forever what it was waiting for.
func supersede(ctx context.Context, tx pgx.Tx, placement, newer string, now time.Time) error {
	rows, err := tx.Query(ctx, `select name, object from staged_updates
		where kind = $1 and placement = $2 and not deleted for update`, api.ClusterStagedUpdateRunKind, placement)
	if err != nil {
		return fmt.Errorf("runs of %s: %w", placement, err)
	}
	type stored struct {
		name   string
		object []byte
	}
	runs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stored, error) {
		var s stored
		err := row.Scan(&s.name, &s.object)
		return s, err
	})
	if err != nil {
		return fmt.Errorf("runs of %s: %w", placement, err)
	}
	for _, s := range runs {
		var run api.ClusterStagedUpdateRun
		if err := json.Unmarshal(s.object, &run); err != nil {
			return fmt.Errorf("run %s: %w", s.name, err)
		}
		if meta.FindStatusCondition(run.Status.Conditions, api.UpdateRunConditionSucceeded) != nil {
			continue
		}
		msg := fmt.Sprintf("superseded by the newer run %s of placement %s", newer, placement)
		for _, t := range []string{api.UpdateRunConditionProgressing, api.UpdateRunConditionSucceeded} {
			meta.SetStatusCondition(&run.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionFalse,
				Reason: "UpdateRunSuperseded", Message: msg, LastTransitionTime: metav1.NewTime(now)})
		}
		raw, err := json.Marshal(run)
		if err != nil {
			return fmt.Errorf("run %s: %w", s.name, err)
		}
		if _, err := tx.Exec(ctx, `update staged_updates set object = $3, updated_at = now() where kind = $1 and name = $2`,
			api.ClusterStagedUpdateRunKind, s.name, raw); err != nil {
			return fmt.Errorf("supersede run %s: %w", s.name, err)
		}
	}
	return nil
}

// deleteStaged deletes a strategy or a run; a run's approval requests go
// with it, and its placement is woken (a newer run may drive it now).
func (r *rollout) deleteStaged(ctx context.Context, tx pgx.Tx, m bus.Meta, p *events.StagedUpdateDeleted, now time.Time) error {
	k := p.Object
	prev, err := lockStaged(ctx, tx, k.Kind, k.Name)
	if err != nil || prev == nil || prev.eventSeq >= int64(m.Sequence) {
		return err
	}
	if _, err := tx.Exec(ctx, `update staged_updates set deleted = true, event_seq = $3, updated_at = now()
		where kind = $1 and name = $2`, k.Kind, k.Name, int64(m.Sequence)); err != nil {
		return fmt.Errorf("delete %s: %w", k, err)
	}
	if k.Kind != api.ClusterStagedUpdateRunKind {
		return nil
	}
	if _, err := tx.Exec(ctx, `update staged_updates set deleted = true, updated_at = now()
		where kind = $1 and object->'spec'->>'parentStageRollout' = $2`, api.ClusterApprovalRequestKind, k.Name); err != nil {
		return fmt.Errorf("delete the approval requests of %s: %w", k, err)
	}
	if prev.placement != nil {
		return wakePlacement(ctx, tx, *prev.placement, now)
	}
	return nil
}

// approve sets the condition Approved of an approval request and wakes its
// run's placement. An approval of a request that does not exist (yet, or any
// more) changes nothing: fleetctl checks that it exists before approving.
func (r *rollout) approve(ctx context.Context, tx pgx.Tx, p *events.ApprovalRequestApproved, now time.Time) error {
	row, err := lockStaged(ctx, tx, api.ClusterApprovalRequestKind, p.Name)
	if err != nil {
		return err
	}
	if row == nil || row.deleted {
		r.log.Warn("approval of an approval request that does not exist", "name", p.Name)
		return nil
	}
	var req api.ClusterApprovalRequest
	if err := json.Unmarshal(row.object, &req); err != nil {
		return fmt.Errorf("read approval request %s: %w", p.Name, err)
	}
	msg := p.Message
	if msg == "" {
		msg = "approved"
	}
	if !meta.SetStatusCondition(&req.Status.Conditions, metav1.Condition{Type: api.ApprovalRequestConditionApproved,
		Status: metav1.ConditionTrue, Reason: "ApprovalRequestApproved", Message: msg, LastTransitionTime: metav1.NewTime(now)}) {
		return nil
	}
	key := events.StagedUpdateKey{Kind: api.ClusterApprovalRequestKind, Name: p.Name}
	if err := storeStaged(ctx, tx, key, &req, row.placement, nil, row.createdSeq, row.eventSeq); err != nil {
		return err
	}
	if row.placement != nil {
		return wakePlacement(ctx, tx, *row.placement, now)
	}
	return nil
}

// storeStaged writes an object (and, when progress is set, a run's
// progress), live.
func storeStaged(ctx context.Context, tx pgx.Tx, key events.StagedUpdateKey, obj any, placement *string, progress json.RawMessage, createdSeq, eventSeq int64) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	_, err = tx.Exec(ctx, `
		insert into staged_updates (kind, name, object, placement, progress, deleted, created_seq, event_seq)
		values ($1, $2, $3, $4, $5, false, $6, $7)
		on conflict (kind, name) do update set object = excluded.object, placement = excluded.placement,
			progress = excluded.progress, deleted = false, created_seq = excluded.created_seq,
			event_seq = excluded.event_seq, updated_at = now()`,
		key.Kind, key.Name, raw, placement, progress, createdSeq, eventSeq)
	if err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	return nil
}

// wakePlacement asks the timer loop to reconcile a placement now.
func wakePlacement(ctx context.Context, tx pgx.Tx, placement string, now time.Time) error {
	if _, err := tx.Exec(ctx, `update rollout_placements set wake_at = $2 where name = $1 and (wake_at is null or wake_at > $2)`,
		placement, now); err != nil {
		return fmt.Errorf("wake placement %s: %w", placement, err)
	}
	return nil
}
