package status

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/platform/outbox"
	"github.com/flotilla-dev/flotilla/platform/pieces"
	"github.com/flotilla-dev/flotilla/services/status/fold"
)

// stored is a placement's fold inputs and status as stored.
type stored struct {
	in     fold.Inputs
	status api.PlacementStatus
}

// foldPlacement applies one event to a placement's inputs and, when the
// placement's status changes, stores it with its transitions and enqueues
// PlacementStatusChangedV2. The placement's row stays locked until commit, so
// replicas fold one placement's events one at a time. A piece of a decision
// or of rollout progress is folded once its revision is whole and next in
// line; until then it waits in status_pieces.
func (s *server) foldPlacement(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, name string, payload any, at time.Time) error {
	apply := func(in *fold.Inputs) (bool, error) { return in.Apply(payload, at) }
	switch p := payload.(type) {
	case *events.PlacementScheduledV2:
		revs, err := receive(ctx, s, tx, name, kindDecision, *p)
		if err != nil || len(revs) == 0 {
			return err
		}
		apply = func(in *fold.Inputs) (bool, error) {
			for _, pieces := range revs {
				s.warnMismatch(name, in.ApplyDecision(pieces))
			}
			return true, nil
		}
	case *events.RolloutProgressedV2:
		revs, err := receive(ctx, s, tx, name, kindProgress, *p)
		if err != nil || len(revs) == 0 {
			return err
		}
		apply = func(in *fold.Inputs) (bool, error) {
			for _, pieces := range revs {
				s.warnMismatch(name, in.ApplyRollout(pieces))
			}
			return true, nil
		}
	}
	st, err := loadPlacement(ctx, tx, name)
	if err != nil {
		return err
	}
	before := st.in.Placement
	changed, err := apply(&st.in)
	if errors.Is(err, fold.ErrImmutable) {
		// The scheduler dead-letters it; the audit log has it.
		s.log.Warn("placement update refused", "id", ev.ID(), "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("fold %s into %s: %w", ev.ID(), name, err)
	}
	if !changed {
		return nil
	}
	if err := saveInputs(ctx, tx, ev, name, &st.in, payload); err != nil {
		return err
	}
	if st.in.Placement == nil {
		return nil // the placement is not known yet: nothing to show
	}
	if _, deleted := payload.(*events.PlacementDeleted); deleted {
		// The last status stays for history; watchers see the deletion.
		return s.emit(ctx, tx, ev, name, st.in.Placement, st.status, st.status, true)
	}
	if st.in.Deleted {
		return nil
	}

	next := fold.Status(&st.in, st.status, at)
	newGeneration := before == nil || before.Generation != st.in.Placement.Generation
	if !newGeneration && sameJSON(st.status, next) {
		return nil
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("encode status of %s: %w", name, err)
	}
	gen := st.in.Generation()
	batch := &pgx.Batch{}
	batch.Queue(`
		insert into placement_status (placement, status, observed_generation, updated_at)
		values ($1, $2, $3, $4)
		on conflict (placement) do update set status = excluded.status,
			observed_generation = excluded.observed_generation, updated_at = excluded.updated_at`,
		name, raw, gen, at)
	for _, t := range fold.Transitions(st.status, next) {
		var cluster *string
		if t.Cluster != "" {
			cluster = &t.Cluster
		}
		c := t.Condition
		batch.Queue(`
			insert into placement_status_transitions
				(placement, cluster, condition_type, status, reason, message, observed_generation, event_id, at)
			values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			name, cluster, c.Type, string(c.Status), c.Reason, c.Message, c.ObservedGeneration, ev.ID(), at)
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("store status of %s: %w", name, err)
	}
	return s.emit(ctx, tx, ev, name, st.in.Placement, st.status, next, false)
}

// Kinds of revisions in pieces the status is folded from (status_pieces.kind).
const (
	kindDecision = "decision"
	kindProgress = "progress"
)

// receive takes in one piece of a placement's decisions or progress and
// returns the whole revisions to fold now (see revision.Receive). It locks
// the placement's row, creating it for the first event about the placement.
func receive[P revision.Piece](ctx context.Context, s *server, tx pgx.Tx, name, kind string, p P) ([][]P, error) {
	if _, err := tx.Exec(ctx, `insert into status_placements (name) values ($1) on conflict do nothing`, name); err != nil {
		return nil, fmt.Errorf("create status row of %s: %w", name, err)
	}
	column := "decision"
	if kind == kindProgress {
		column = "rollout"
	}
	var applied int64
	if err := tx.QueryRow(ctx, `select coalesce((`+column+`->>'revision')::bigint, 0) from status_placements where name = $1 for update`,
		name).Scan(&applied); err != nil {
		return nil, fmt.Errorf("lock status row of %s: %w", name, err)
	}
	revs, err := revision.Receive(ctx, pieces.In(tx, "status_pieces", name, kind), applied, p)
	if errors.Is(err, revision.ErrGap) {
		s.log.Warn("a revision waits for a lost piece", "placement", name, "kind", kind, "applied", applied, "err", err)
		return nil, nil
	}
	return revs, err
}

// warnMismatch logs an assembled state that does not match its producer's.
func (s *server) warnMismatch(name string, err error) {
	if err != nil {
		s.log.Warn("the state assembled does not match its producer's", "placement", name, "err", err)
	}
}

// emit enqueues the placement's next status change (PlacementStatusChangedV2,
// in pieces): the placement-wide conditions of next and the clusters whose
// entry changed since prev. Piece ids derive from the consumed event's, so a
// retried handler emits the same events.
func (s *server) emit(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, name string, crp *api.ClusterResourcePlacement, prev, next api.PlacementStatus, deleted bool) error {
	var rev int64
	if err := tx.QueryRow(ctx, `update status_placements set status_revision = status_revision + 1 where name = $1 returning status_revision`,
		name).Scan(&rev); err != nil {
		return fmt.Errorf("count the status changes of %s: %w", name, err)
	}
	pieces, err := statusPieces(name, rev, crp.Generation, prev, next, deleted)
	if err != nil {
		return bus.Permanent(fmt.Errorf("status event for %s: %w", name, err))
	}
	subject, err := events.StatusSubject(name)
	if err != nil {
		return bus.Permanent(err)
	}
	for _, p := range pieces {
		id := events.ID("status", name, ev.ID())
		if p.Piece > 0 {
			id = events.ID("status", name, ev.ID(), fmt.Sprint(p.Piece))
		}
		e, err := events.New(events.TypePlacementStatusChangedV2, s.source, name, id, p)
		if err != nil {
			return fmt.Errorf("status event for %s: %w", name, err)
		}
		if err := outbox.Enqueue(ctx, tx, subject, e); err != nil {
			return err
		}
	}
	return nil
}

// statusPieces cuts a status change into pieces: the placement-wide
// conditions and counts of next in each, and the clusters whose entry in
// placementStatuses is new or differs from prev, or is gone (none for a
// deletion: the status stays as it was).
func statusPieces(name string, rev, generation int64, prev, next api.PlacementStatus, deleted bool) ([]events.PlacementStatusChangedV2, error) {
	h := events.PlacementStatusChangedV2{
		Placement: name, Revision: rev, Generation: generation, Deleted: deleted,
		ObservedResourceIndex: next.ObservedResourceIndex, SelectedResourceCount: len(next.SelectedResources),
		Conditions: boundedConditions(next.Conditions), ClusterCount: len(next.PlacementStatuses),
	}
	var changes []events.ClusterStatus
	if !deleted {
		before := make(map[string]*api.ResourcePlacementStatus, len(prev.PlacementStatuses))
		for i := range prev.PlacementStatuses {
			before[prev.PlacementStatuses[i].ClusterName] = &prev.PlacementStatuses[i]
		}
		for i := range next.PlacementStatuses {
			n := &next.PlacementStatuses[i]
			if p, ok := before[n.ClusterName]; !ok || !sameJSON(p, n) {
				changes = append(changes, events.ClusterStatus{Cluster: n.ClusterName, ObservedResourceIndex: n.ObservedResourceIndex,
					Conditions: boundedConditions(n.Conditions), FailedPlacements: len(n.FailedPlacements),
					DriftedPlacements: len(n.DriftedPlacements), DiffedPlacements: len(n.DiffedPlacements)})
			}
			delete(before, n.ClusterName)
		}
		for cluster := range before {
			changes = append(changes, events.ClusterStatus{Cluster: cluster, Removed: true})
		}
		slices.SortFunc(changes, func(a, b events.ClusterStatus) int { return strings.Compare(a.Cluster, b.Cluster) })
	}
	return revision.Cut(h, changes, func(p *events.PlacementStatusChangedV2, piece, pieces int, cs []events.ClusterStatus) {
		p.Piece, p.Pieces, p.Clusters = piece, pieces, cs
	})
}

// boundedConditions is conds within the bounds of a status change: at most
// events.MaxConditions, messages cut at events.MaxMessageBytes.
func boundedConditions(conds []metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(conds))
	for _, c := range conds[:min(len(conds), events.MaxConditions)] {
		c.Message = events.Truncate(c.Message, events.MaxMessageBytes)
		out = append(out, c)
	}
	return out
}

// loadPlacement reads and locks a placement's inputs and current status,
// creating its row if this is the first event about it.
func loadPlacement(ctx context.Context, tx pgx.Tx, name string) (*stored, error) {
	const query = `
		select p.placement, p.work_generation, p.deleted, p.decision, p.snapshot, p.rollout, s.status,
			(select coalesce(jsonb_agg(r.report), '[]') from status_reports r where r.placement = p.name),
			(select coalesce(jsonb_agg(jsonb_build_object('Notice', q.notice, 'ReportIndex', q.report_index,
				'ReportGeneration', q.report_generation)), '[]') from status_quarantine q where q.placement = p.name)
		from status_placements p left join placement_status s on s.placement = p.name
		where p.name = $1
		for update of p`
	var (
		st                                                      stored
		placement, decision, snapshot, rollout, status, reports []byte
		quarantined                                             []byte
	)
	scan := func() error {
		return tx.QueryRow(ctx, query, name).Scan(&placement, &st.in.WorkGeneration, &st.in.Deleted,
			&decision, &snapshot, &rollout, &status, &reports, &quarantined)
	}
	err := scan()
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := tx.Exec(ctx, `insert into status_placements (name) values ($1) on conflict do nothing`, name); err != nil {
			return nil, fmt.Errorf("create status row of %s: %w", name, err)
		}
		err = scan()
	}
	if err != nil {
		return nil, fmt.Errorf("load status inputs of %s: %w", name, err)
	}
	var (
		list []*events.WorkReported
		held []*fold.Quarantine
	)
	for _, f := range []struct {
		raw  []byte
		into any
	}{
		{placement, &st.in.Placement}, {decision, &st.in.Decision}, {snapshot, &st.in.Snapshot},
		{rollout, &st.in.Rollout}, {status, &st.status}, {reports, &list}, {quarantined, &held},
	} {
		if len(f.raw) == 0 {
			continue
		}
		if err := json.Unmarshal(f.raw, f.into); err != nil {
			return nil, fmt.Errorf("load status inputs of %s: %w", name, err)
		}
	}
	for _, r := range list {
		if st.in.Reports == nil {
			st.in.Reports = map[string]*events.WorkReported{}
		}
		st.in.Reports[r.Cluster] = r
	}
	for _, q := range held {
		if st.in.Quarantined == nil {
			st.in.Quarantined = map[string]*fold.Quarantine{}
		}
		st.in.Quarantined[q.Notice.Cluster] = q
	}
	return &st, nil
}

// saveInputs stores the inputs the payload changed.
func saveInputs(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, name string, in *fold.Inputs, payload any) error {
	if n, ok := payload.(*events.OutboxQuarantined); ok {
		return saveQuarantine(ctx, tx, ev, name, in.Quarantined[n.Cluster])
	}
	if r, ok := payload.(*events.WorkReported); ok {
		if in.Quarantined[r.Cluster] == nil {
			if _, err := tx.Exec(ctx, `delete from status_quarantine where placement = $1 and cluster = $2`, name, r.Cluster); err != nil {
				return fmt.Errorf("clear quarantined work of %s on %s: %w", name, r.Cluster, err)
			}
		}
		stored := in.Reports[r.Cluster]
		if stored == nil {
			if _, err := tx.Exec(ctx, `delete from status_reports where placement = $1 and cluster = $2`, name, r.Cluster); err != nil {
				return fmt.Errorf("delete report of %s on %s: %w", name, r.Cluster, err)
			}
			return nil
		}
		args, err := jsonArgs(stored)
		if err == nil {
			_, err = tx.Exec(ctx, `
				insert into status_reports (placement, cluster, report, observed_at, event_id)
				values ($1, $2, $3, $4, $5)
				on conflict (placement, cluster) do update set report = excluded.report,
					observed_at = excluded.observed_at, event_id = excluded.event_id`,
				name, r.Cluster, args[0], stored.ObservedAt, ev.ID())
		}
		if err != nil {
			return fmt.Errorf("store report of %s on %s: %w", name, r.Cluster, err)
		}
		return nil
	}
	args, err := jsonArgs(in.Placement, in.Decision, in.Snapshot, in.Rollout)
	if err == nil {
		_, err = tx.Exec(ctx, `
			update status_placements set placement = $2, generation = $3, work_generation = $4, deleted = $5,
				decision = $6, snapshot = $7, rollout = $8, event_id = $9, updated_at = now()
			where name = $1`,
			name, args[0], in.Generation(), in.WorkGeneration, in.Deleted, args[1], args[2], args[3], ev.ID())
	}
	if err != nil {
		return fmt.Errorf("store status inputs of %s: %w", name, err)
	}
	return nil
}

// jsonArgs encodes values for jsonb columns: SQL NULL for a nil pointer.
func jsonArgs(vs ...any) ([]any, error) {
	out := make([]any, len(vs))
	for i, v := range vs {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode %T: %w", v, err)
		}
		if !bytes.Equal(b, []byte("null")) {
			out[i] = b
		}
	}
	return out, nil
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// saveQuarantine stores a cluster's quarantined work.
func saveQuarantine(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, name string, q *fold.Quarantine) error {
	if q == nil {
		return nil
	}
	args, err := jsonArgs(q.Notice)
	if err == nil {
		_, err = tx.Exec(ctx, `
			insert into status_quarantine (placement, cluster, notice, report_index, report_generation, event_id)
			values ($1, $2, $3, $4, $5, $6)
			on conflict (placement, cluster) do update set notice = excluded.notice, report_index = excluded.report_index,
				report_generation = excluded.report_generation, event_id = excluded.event_id`,
			name, q.Notice.Cluster, args[0], q.ReportIndex, q.ReportGeneration, ev.ID())
	}
	if err != nil {
		return fmt.Errorf("store quarantined work of %s on %s: %w", name, q.Notice.Cluster, err)
	}
	return nil
}
