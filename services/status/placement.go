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
	"github.com/flotilla-dev/flotilla/platform/pipeline"
	"github.com/flotilla-dev/flotilla/services/status/fold"
)

// stored is a placement's fold inputs and status as stored.
type stored struct {
	in     fold.Inputs
	status api.PlacementStatus
}

// batch is what the transaction of one batch of events holds of the placements
// they concern: each placement's inputs and status, loaded and locked once, and
// its status folded once, at the end (flush), whatever the number of its events
// in the batch. A burst of 5,000 reports on one placement folds its status a few
// times, not 5,000.
type batch struct {
	placements map[string]*pendingFold
	order      []string
	// cache holds placements between batches (nil: none); version is each
	// placement's once the batch has written it.
	cache   *foldCache
	version map[string]string
	// audits are the batch's events for the audit log (writeAudit).
	audits []auditRow
	// w queues the batch's writes until its next read (pipe).
	w *pipeline.Tx
	// expected holds what readReports read of whether the batch's reports
	// are expected, until readForReport takes it.
	expected map[reportKey]bool
}

type reportKey struct{ placement, cluster string }

// pipe returns the batch's pipeline on tx, its transaction.
func (b *batch) pipe(tx pgx.Tx) *pipeline.Tx {
	if b.w == nil {
		b.w = pipeline.New(tx)
	}
	return b.w
}

// pendingFold is one placement in a batch.
type pendingFold struct {
	st *stored
	// revision is the placement's last status change revision (emit).
	revision int64
	// before is the placement as it was when loaded: a new generation stores
	// a status change even when the status looks the same.
	before *api.ClusterResourcePlacement
	// dirty says the inputs changed since the status was last folded; ev
	// and at are the last event that changed them, which the status change
	// is stamped with.
	dirty bool
	ev    cloudevents.Event
	at    time.Time
	// ctx is that event's context in the batch's transaction: its trace.
	ctx context.Context
	// wide says the batch changed more than reports and quarantined work
	// (the spec, the decision, the snapshot, the rollout's progress): every
	// cluster's entry is folded again. Otherwise only the clusters in
	// changed are (fold.Refold), and only their reports are read.
	wide    bool
	changed map[string]bool
	// allReports says every report of the placement is in st.in.Reports;
	// else only those of the clusters in reports, read as the batch's
	// events needed them (a placement's reports are not read all at once
	// for each report, which made a report's cost linear in the placement's
	// clusters).
	allReports bool
	reports    map[string]bool
}

// report reads a cluster's report into the inputs, once per batch, unless
// every report is there already.
func (pf *pendingFold) report(ctx context.Context, w *pipeline.Tx, name, cluster string) error {
	if !pf.needsReport(cluster) {
		return nil
	}
	r := newReportRead(name, cluster)
	if err := w.Read(ctx, &r.Row); err != nil {
		return fmt.Errorf("load report of %s on %s: %w", name, cluster, err)
	}
	return pf.takeReport(r)
}

func (pf *pendingFold) needsReport(cluster string) bool {
	return !pf.allReports && !pf.reports[cluster]
}

// reportRead reads a cluster's report (pendingFold.report).
type reportRead struct {
	name, cluster string
	raw           []byte
	seq           int64
	pipeline.Row
}

func newReportRead(name, cluster string) *reportRead {
	r := &reportRead{name: name, cluster: cluster}
	r.Row = pipeline.Row{
		SQL:  `select report, event_seq from status_reports where placement = $1 and cluster = $2`,
		Args: []any{name, cluster},
		Dest: []any{&r.raw, &r.seq},
	}
	return r
}

// takeReport puts a report read into the inputs.
func (pf *pendingFold) takeReport(r *reportRead) error {
	if pf.reports == nil {
		pf.reports = map[string]bool{}
	}
	pf.reports[r.cluster] = true
	if r.Err != nil {
		return nil // none yet
	}
	var report events.WorkReported
	if err := json.Unmarshal(r.raw, &report); err != nil {
		return fmt.Errorf("load report of %s on %s: %w", r.name, r.cluster, err)
	}
	in := &pf.st.in
	if in.Reports == nil {
		in.Reports, in.ReportSeqs = map[string]*events.WorkReported{}, map[string]int64{}
	}
	in.Reports[r.cluster], in.ReportSeqs[r.cluster] = &report, r.seq
	return nil
}

// everyReport reads every report of the placement into the inputs, once.
// The batch's own are stored already (saveInputs), so the table has them.
func (pf *pendingFold) everyReport(ctx context.Context, w *pipeline.Tx, name string) error {
	if pf.allReports {
		return nil
	}
	var raw []byte
	err := w.QueryRow(ctx, `
		select coalesce(jsonb_agg(jsonb_build_object('report', r.report, 'seq', r.event_seq)), '[]')
		from status_reports r where r.placement = $1`, []any{name}, &raw)
	if err != nil {
		return fmt.Errorf("load reports of %s: %w", name, err)
	}
	var list []struct {
		Report *events.WorkReported `json:"report"`
		Seq    int64                `json:"seq"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("load reports of %s: %w", name, err)
	}
	in := &pf.st.in
	in.Reports, in.ReportSeqs = map[string]*events.WorkReported{}, map[string]int64{}
	for _, r := range list {
		in.Reports[r.Report.Cluster], in.ReportSeqs[r.Report.Cluster] = r.Report, r.Seq
	}
	pf.allReports, pf.reports = true, nil
	return nil
}

// load returns the placement's pending fold, loading and locking it the first
// time the batch needs it.
func (b *batch) load(ctx context.Context, w *pipeline.Tx, name string) (*pendingFold, error) {
	return b.loadLocked(ctx, w, name, nil)
}

// loadLocked is load with the placement's lock read already, if l is not nil.
func (b *batch) loadLocked(ctx context.Context, w *pipeline.Tx, name string, l *lockRead) (*pendingFold, error) {
	if pf := b.placements[name]; pf != nil {
		return pf, nil
	}
	st, revision, err := loadPlacement(ctx, w, name, b.cache, l)
	if err != nil {
		return nil, err
	}
	pf := &pendingFold{st: st, revision: revision, before: st.in.Placement}
	if b.placements == nil {
		b.placements = map[string]*pendingFold{}
	}
	b.placements[name] = pf
	b.order = append(b.order, name)
	return pf, nil
}

// foldPlacement applies one event to a placement's inputs and stores them;
// the batch folds the status from them at its end (flush). The placement's row
// stays locked until commit, so replicas fold one placement's events one at a
// time. A piece of a decision or of rollout progress is folded once its
// revision is whole and next in line; until then it waits in status_pieces.
func (s *server) foldPlacement(ctx context.Context, w *pipeline.Tx, b *batch, ev cloudevents.Event, name string, payload any, seq int64, at time.Time) error {
	apply := func(in *fold.Inputs) (bool, error) { return in.Apply(payload, seq, at) }
	switch p := payload.(type) {
	case *events.PlacementScheduledV2:
		tx, err := w.Direct(ctx)
		if err != nil {
			return err
		}
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
	case *events.SnapshotCreated:
		tx, err := w.Direct(ctx)
		if err != nil {
			return err
		}
		whole, err := s.receiveSnapshot(ctx, tx, name, p)
		if err != nil || whole == nil {
			return err
		}
		payload = whole
		apply = func(in *fold.Inputs) (bool, error) { return in.ApplySnapshot(whole), nil }
	case *events.RolloutProgressedV2:
		tx, err := w.Direct(ctx)
		if err != nil {
			return err
		}
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
	pf, err := b.load(ctx, w, name)
	if err != nil {
		return err
	}
	st := pf.st
	switch p := payload.(type) {
	case *events.WorkReported:
		err = pf.report(ctx, w, name, p.Cluster)
	case *events.OutboxQuarantined:
		// The notice notes the report the cluster had made then.
		err = pf.report(ctx, w, name, p.Cluster)
	}
	if err != nil {
		return err
	}
	_, deleted := payload.(*events.PlacementDeleted)
	if deleted {
		// What the batch changed before the deletion shows first.
		if err := s.foldStatus(ctx, w, b, name, pf); err != nil {
			return err
		}
	}
	changed, err := apply(&st.in)
	if errors.Is(err, fold.ErrImmutable) {
		// The scheduler and the rollout refuse it too and the scheduler
		// dead-letters it with the field path; the audit log has it.
		s.log.Warn("placement update refused", "id", ev.ID(), "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("fold %s into %s: %w", ev.ID(), name, err)
	}
	if !changed {
		return nil
	}
	if err := saveInputs(w, ev, name, &st.in, payload); err != nil {
		return err
	}
	if deleted && st.in.Placement != nil {
		// The last status stays for history; watchers see the deletion.
		return s.emit(ctx, w, b, pf, ev, name, st.status, st.status, true, nil)
	}
	pf.dirty, pf.ev, pf.at, pf.ctx = true, ev, at, ctx
	switch p := payload.(type) {
	case *events.WorkReported:
		pf.changedCluster(p.Cluster)
	case *events.OutboxQuarantined:
		pf.changedCluster(p.Cluster)
	default:
		pf.wide = true
	}
	return nil
}

func (pf *pendingFold) changedCluster(cluster string) {
	if pf.changed == nil {
		pf.changed = map[string]bool{}
	}
	pf.changed[cluster] = true
}

// flush folds, stores and announces the status of every placement whose
// inputs the batch changed.
func (s *server) flush(ctx context.Context, w *pipeline.Tx, b *batch) error {
	for _, name := range b.order {
		if err := s.foldStatus(ctx, w, b, name, b.placements[name]); err != nil {
			return err
		}
	}
	return nil
}

// foldStatus folds a placement's status from its inputs if they changed, and
// stores it with its transitions and enqueues PlacementStatusChangedV2 when it
// changed (or the placement has a new generation).
func (s *server) foldStatus(ctx context.Context, w *pipeline.Tx, b *batch, name string, pf *pendingFold) error {
	st := pf.st
	if !pf.dirty || st.in.Placement == nil || st.in.Deleted {
		// Not changed, the placement not known yet (nothing to show), or
		// deleted (the last status stays).
		return nil
	}
	pf.dirty = false
	ev, at := pf.ev, pf.at
	// only is the clusters whose entry may differ from the status stored;
	// nil: any.
	next, ok := api.PlacementStatus{}, false
	only := pf.changed
	if !pf.wide && !pf.allReports {
		next, ok = fold.Refold(&st.in, st.status, pf.changed, at)
	}
	if !ok {
		if err := pf.everyReport(ctx, w, name); err != nil {
			return err
		}
		next, only = fold.Status(&st.in, st.status, at), nil
	}
	pf.wide, pf.changed = false, nil
	newGeneration := pf.before == nil || pf.before.Generation != st.in.Placement.Generation
	pf.before = st.in.Placement
	if newGeneration {
		markGeneration(w, name, at)
	}
	if !newGeneration && sameStatus(st.status, next, only) {
		return nil
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("encode status of %s: %w", name, err)
	}
	conditions, err := json.Marshal(append([]metav1.Condition{}, next.Conditions...))
	if err != nil {
		return fmt.Errorf("encode status of %s: %w", name, err)
	}
	gen := st.in.Generation()
	what := "store status of " + name
	w.Queue(what, `
		insert into placement_status (placement, status, observed_generation, updated_at, conditions)
		values ($1, $2, $3, $4, $5)
		on conflict (placement) do update set status = excluded.status,
			observed_generation = excluded.observed_generation, updated_at = excluded.updated_at,
			conditions = excluded.conditions`,
		name, raw, gen, at, conditions)
	for _, t := range fold.Transitions(st.status, next) {
		var cluster *string
		if t.Cluster != "" {
			cluster = &t.Cluster
		}
		c := t.Condition
		w.Queue(what, `
			insert into placement_status_transitions
				(placement, cluster, condition_type, status, reason, message, observed_generation, event_id, at)
			values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			name, cluster, c.Type, string(c.Status), c.Reason, c.Message, c.ObservedGeneration, ev.ID(), at)
	}
	if err := s.metrics.noteAvailable(ctx, w, name, gen, st.status.Conditions, next.Conditions, at); err != nil {
		return err
	}
	prev := st.status
	st.status = next
	// Within the trace of the last event that changed the placement.
	return s.emit(pf.ctx, w, b, pf, ev, name, prev, next, false, only)
}

// sameStatus reports whether next is prev, comparing only the entries of the
// clusters in only (when not nil): the others are the same by construction
// (fold.Refold keeps them), and comparing every entry of a placement on 1,000
// clusters for each batch that changes one costs more than the fold.
func sameStatus(prev, next api.PlacementStatus, only map[string]bool) bool {
	if only == nil {
		return sameJSON(prev, next)
	}
	if len(prev.PlacementStatuses) != len(next.PlacementStatuses) {
		return false
	}
	p, n := prev, next
	p.PlacementStatuses, n.PlacementStatuses = nil, nil
	if !sameJSON(p, n) {
		return false
	}
	for i := range next.PlacementStatuses {
		a, b := &prev.PlacementStatuses[i], &next.PlacementStatuses[i]
		if a.ClusterName != b.ClusterName || (only[b.ClusterName] && !sameJSON(a, b)) {
			return false
		}
	}
	return true
}

// Kinds of revisions in pieces the status is folded from (status_pieces.kind).
const (
	kindDecision = "decision"
	kindProgress = "progress"
	kindSnapshot = "snapshot"
)

// receiveSnapshot takes in one piece of a resource snapshot and returns the
// whole snapshot once every piece of its index is held, else nil. Pieces of
// older snapshots still held are dropped then. It locks the placement's row,
// creating it for the first event about the placement.
func (s *server) receiveSnapshot(ctx context.Context, tx pgx.Tx, name string, p *events.SnapshotCreated) (*events.SnapshotCreated, error) {
	if p.Part().Pieces == 1 {
		return p, nil
	}
	if err := lockRow(ctx, tx, name); err != nil {
		return nil, err
	}
	store := pieces.In(tx, "status_pieces", name, kindSnapshot)
	payload, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("hold snapshot piece of %s: %w", name, err)
	}
	if err := store.Hold(ctx, p.Part(), payload); err != nil {
		return nil, err
	}
	held, err := store.Held(ctx)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(revision.Next(p.Index-1, held), p.Index) {
		return nil, nil
	}
	taken, err := store.Take(ctx, []int64{p.Index})
	if err != nil {
		return nil, err
	}
	whole := *p
	whole.Piece, whole.Pieces, whole.SelectedResources = 0, 1, make([]api.ResourceIdentifier, 0, p.ResourceCount)
	for _, raw := range taken[p.Index] {
		var piece events.SnapshotCreated
		if err := json.Unmarshal(raw, &piece); err != nil {
			return nil, fmt.Errorf("snapshot %d of %s: a piece held does not decode: %w", p.Index, name, err)
		}
		whole.SelectedResources = append(whole.SelectedResources, piece.SelectedResources...)
	}
	if len(whole.SelectedResources) != p.ResourceCount {
		s.log.Warn("the snapshot assembled does not match its producer's", "placement", name, "index", p.Index,
			"resources", len(whole.SelectedResources), "resourceCount", p.ResourceCount)
	}
	return &whole, nil
}

// lockRow locks the placement's status row, creating it for the first event
// about the placement.
func lockRow(ctx context.Context, tx pgx.Tx, name string) error {
	if _, err := tx.Exec(ctx, `insert into status_placements (name) values ($1) on conflict do nothing`, name); err != nil {
		return fmt.Errorf("create status row of %s: %w", name, err)
	}
	if _, err := tx.Exec(ctx, `select 1 from status_placements where name = $1 for update`, name); err != nil {
		return fmt.Errorf("lock status row of %s: %w", name, err)
	}
	return nil
}

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
//
// only, when not nil, is the clusters whose entry may have changed (see sameStatus).
//
// Each event goes into the batch's audit rows as it is enqueued, and carries
// extensionAudited: the service skips it when it comes back off the bus
// (handle), so that its own events do not queue before the members' reports.
func (s *server) emit(ctx context.Context, w *pipeline.Tx, b *batch, pf *pendingFold, ev cloudevents.Event, name string, prev, next api.PlacementStatus, deleted bool, only map[string]bool) error {
	// The row is locked: the revision read with the lock is the last.
	pf.revision++
	rev := pf.revision
	w.Queue("count the status changes of "+name, `update status_placements set status_revision = $2 where name = $1`, name, rev)
	pieces, err := changePieces(name, rev, pf.st.in.Placement.Generation, prev, next, deleted, only)
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
		e.SetExtension(extensionAudited, "true")
		if err := outbox.Enqueue(ctx, w, subject, e); err != nil {
			return err
		}
		b.audit(redacted(e), e.Time())
	}
	return nil
}

// statusPieces cuts a status change into pieces: the placement-wide
// conditions and counts of next in each, and the clusters whose entry in
// placementStatuses is new or differs from prev, or is gone (none for a
// deletion: the status stays as it was).
func statusPieces(name string, rev, generation int64, prev, next api.PlacementStatus, deleted bool) ([]events.PlacementStatusChangedV2, error) {
	return changePieces(name, rev, generation, prev, next, deleted, nil)
}

// changePieces is statusPieces comparing only the entries of the clusters in
// only, when not nil: the others are the same (see sameStatus).
func changePieces(name string, rev, generation int64, prev, next api.PlacementStatus, deleted bool, only map[string]bool) ([]events.PlacementStatusChangedV2, error) {
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
			if p, ok := before[n.ClusterName]; !ok || ((only == nil || only[n.ClusterName]) && !sameJSON(p, n)) {
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
// creating its row if this is the first event about it. The apply reports are
// left out: the batch reads those it needs (pendingFold.report, everyReport).
// l is the lock read already, or nil. It returns the placement's last status
// change revision too, which emit counts from.
func loadPlacement(ctx context.Context, w *pipeline.Tx, name string, cache *foldCache, l *lockRead) (*stored, int64, error) {
	if l == nil {
		l = newLockRead(name)
		if err := w.Read(ctx, &l.Row); err != nil {
			return nil, 0, fmt.Errorf("load status inputs of %s: %w", name, err)
		}
	}
	if errors.Is(l.Err, pgx.ErrNoRows) {
		w.Queue("create status row of "+name, `insert into status_placements (name) values ($1) on conflict do nothing`, name)
		l = newLockRead(name)
		if err := w.Read(ctx, &l.Row); err != nil {
			return nil, 0, fmt.Errorf("load status inputs of %s: %w", name, err)
		}
	}
	if l.Err != nil {
		return nil, 0, fmt.Errorf("load status inputs of %s: %w", name, l.Err)
	}
	version, quarantined := l.version, l.quarantined
	st := cache.take(name, version)
	if st == nil {
		var err error
		if st, err = readPlacement(ctx, w, name); err != nil {
			return nil, 0, err
		}
	}
	var held []*fold.Quarantine
	if err := json.Unmarshal(quarantined, &held); err != nil {
		return nil, 0, fmt.Errorf("load status inputs of %s: %w", name, err)
	}
	for _, q := range held {
		if st.in.Quarantined == nil {
			st.in.Quarantined = map[string]*fold.Quarantine{}
		}
		st.in.Quarantined[q.Notice.Cluster] = q
	}
	return st, l.revision, nil
}

// lockRead locks a placement's row, and reads its version and the work held
// in quarantine (rarely any); loadPlacement reads the rest only when the
// cache does not hold this version.
type lockRead struct {
	version     string
	quarantined []byte
	revision    int64
	pipeline.Row
}

func newLockRead(name string) *lockRead {
	l := &lockRead{}
	l.Row = pipeline.Row{
		SQL: `
		select p.xmin::text || '/' || coalesce(s.xmin::text, '-'), p.status_revision,
			(select coalesce(jsonb_agg(jsonb_build_object('Notice', q.notice, 'ReportIndex', q.report_index,
				'ReportGeneration', q.report_generation)), '[]') from status_quarantine q where q.placement = p.name)
		from status_placements p left join placement_status s on s.placement = p.name
		where p.name = $1
		for update of p`,
		Args: []any{name},
		Dest: []any{&l.version, &l.revision, &l.quarantined},
	}
	return l
}

// readForReport says whether a report is expected (reportExpected), its
// placement and the cluster's last report read with it unless the batch holds
// them already: one round trip, or none when prefetch read it.
func (b *batch) readForReport(ctx context.Context, w *pipeline.Tx, name, cluster string) (bool, error) {
	key := reportKey{name, cluster}
	if _, read := b.expected[key]; !read {
		if err := b.readReports(ctx, w, []reportKey{key}); err != nil {
			return false, err
		}
	}
	ok := b.expected[key]
	delete(b.expected, key) // a later report of the cluster is checked again
	return ok, nil
}

// prefetch reads in one round trip what the reports among deliveries need
// (readForReport): a batch of reports about many placements then waits for one
// round trip, not one per report. A report whose placement an earlier event
// of the batch concerns is left to readForReport, as that event may change
// what the report is checked against (a new decision).
func (b *batch) prefetch(ctx context.Context, w *pipeline.Tx, deliveries []bus.Delivery) error {
	var (
		keys  []reportKey
		seen  = map[reportKey]bool{}
		other = map[string]bool{}
	)
	for _, d := range deliveries {
		name, cluster := events.SubjectNames(d.Meta.Subject)
		if name == "" {
			continue
		}
		if d.Event.Type() != events.TypeWorkReported || cluster == "" {
			other[name] = true
			continue
		}
		key := reportKey{name, cluster}
		if !other[name] && !seen[key] {
			seen[key] = true
			keys = append(keys, key)
		}
	}
	if len(keys) < 2 {
		return nil // readForReport reads as much in one round trip
	}
	return b.readReports(ctx, w, keys)
}

// readReports reads, in one round trip, whether each report of keys is
// expected, into b.expected, and each one's placement, locked, and the
// cluster's last report, unless the batch holds them already.
func (b *batch) readReports(ctx context.Context, w *pipeline.Tx, keys []reportKey) error {
	var (
		reads   []*pipeline.Row
		checks  = make([]*expectedRead, len(keys))
		reports = make([]*reportRead, len(keys))
		locks   = map[string]*lockRead{}
	)
	for i, key := range keys {
		checks[i] = newExpectedRead(key.placement, key.cluster)
		reads = append(reads, &checks[i].Row)
		pf := b.placements[key.placement]
		if pf == nil && locks[key.placement] == nil {
			locks[key.placement] = newLockRead(key.placement)
			reads = append(reads, &locks[key.placement].Row)
		}
		if pf == nil || pf.needsReport(key.cluster) {
			reports[i] = newReportRead(key.placement, key.cluster)
			reads = append(reads, &reports[i].Row)
		}
	}
	if err := w.Read(ctx, reads...); err != nil {
		return fmt.Errorf("check %d report(s), of %s on %s first: %w", len(keys), keys[0].placement, keys[0].cluster, err)
	}
	for name, l := range locks {
		if l.Err != nil {
			continue // no row yet: loaded as the first event about it
		}
		if _, err := b.loadLocked(ctx, w, name, l); err != nil {
			return err
		}
	}
	if b.expected == nil {
		b.expected = map[reportKey]bool{}
	}
	for i, key := range keys {
		b.expected[key] = checks[i].ok
		// Without the placement's row (its first event), the report is
		// read again once the row is made.
		if pf := b.placements[key.placement]; pf != nil && reports[i] != nil {
			if err := pf.takeReport(reports[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// readPlacement reads and decodes a placement's fold inputs and status; its row is
// locked already.
func readPlacement(ctx context.Context, w *pipeline.Tx, name string) (*stored, error) {
	const query = `
		select p.placement, p.work_generation, p.deleted, p.spec_seq, p.decision, p.snapshot, p.rollout, s.status
		from status_placements p left join placement_status s on s.placement = p.name
		where p.name = $1`
	var (
		st                                             stored
		placement, decision, snapshot, rollout, status []byte
	)
	if err := w.QueryRow(ctx, query, []any{name}, &placement, &st.in.WorkGeneration, &st.in.Deleted, &st.in.SpecSeq,
		&decision, &snapshot, &rollout, &status); err != nil {
		return nil, fmt.Errorf("load status inputs of %s: %w", name, err)
	}
	for _, f := range []struct {
		raw  []byte
		into any
	}{
		{placement, &st.in.Placement}, {decision, &st.in.Decision}, {snapshot, &st.in.Snapshot},
		{rollout, &st.in.Rollout}, {status, &st.status},
	} {
		if len(f.raw) == 0 {
			continue
		}
		if err := json.Unmarshal(f.raw, f.into); err != nil {
			return nil, fmt.Errorf("load status inputs of %s: %w", name, err)
		}
	}
	return &st, nil
}

// versions reads the version of each placement the batch loaded, once it has
// written them all, for the cache.
func (b *batch) versions(ctx context.Context, w *pipeline.Tx) error {
	if b.cache == nil || len(b.order) == 0 {
		return nil
	}
	b.version = map[string]string{}
	err := w.Query(ctx, `
		select p.name, p.xmin::text || '/' || coalesce(s.xmin::text, '-')
		from status_placements p left join placement_status s on s.placement = p.name
		where p.name = any($1)`, []any{b.order}, func(rows pgx.Rows) error {
		var name, version string
		if err := rows.Scan(&name, &version); err != nil {
			return err
		}
		b.version[name] = version
		return nil
	})
	if err != nil {
		return fmt.Errorf("read versions of %d placements: %w", len(b.order), err)
	}
	return nil
}

// keep puts the batch's placements in the cache; call it once the batch committed.
func (b *batch) keep() {
	for name, version := range b.version {
		b.cache.put(name, version, b.placements[name].st)
	}
}

// saveInputs stores the inputs the payload changed.
func saveInputs(w *pipeline.Tx, ev cloudevents.Event, name string, in *fold.Inputs, payload any) error {
	if n, ok := payload.(*events.OutboxQuarantined); ok {
		return saveQuarantine(w, ev, name, in.Quarantined[n.Cluster])
	}
	if r, ok := payload.(*events.WorkReported); ok {
		if in.Quarantined[r.Cluster] == nil {
			w.Queue(fmt.Sprintf("clear quarantined work of %s on %s", name, r.Cluster),
				`delete from status_quarantine where placement = $1 and cluster = $2`, name, r.Cluster)
		}
		stored := in.Reports[r.Cluster]
		if stored == nil {
			w.Queue(fmt.Sprintf("delete report of %s on %s", name, r.Cluster),
				`delete from status_reports where placement = $1 and cluster = $2`, name, r.Cluster)
			return nil
		}
		args, err := jsonArgs(stored)
		if err != nil {
			return fmt.Errorf("store report of %s on %s: %w", name, r.Cluster, err)
		}
		w.Queue(fmt.Sprintf("store report of %s on %s", name, r.Cluster), `
			insert into status_reports (placement, cluster, report, observed_at, event_id, event_seq)
			values ($1, $2, $3, $4, $5, $6)
			on conflict (placement, cluster) do update set report = excluded.report,
				observed_at = excluded.observed_at, event_id = excluded.event_id, event_seq = excluded.event_seq`,
			name, r.Cluster, args[0], stored.ObservedAt, ev.ID(), in.ReportSeqs[r.Cluster])
		return nil
	}
	args, err := jsonArgs(in.Placement, in.Decision, in.Snapshot, in.Rollout)
	if err != nil {
		return fmt.Errorf("store status inputs of %s: %w", name, err)
	}
	w.Queue("store status inputs of "+name, `
		update status_placements set placement = $2, generation = $3, work_generation = $4, deleted = $5,
			decision = $6, snapshot = $7, rollout = $8, event_id = $9, spec_seq = $10, updated_at = now()
		where name = $1`,
		name, args[0], in.Generation(), in.WorkGeneration, in.Deleted, args[1], args[2], args[3], ev.ID(), in.SpecSeq)
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
func saveQuarantine(w *pipeline.Tx, ev cloudevents.Event, name string, q *fold.Quarantine) error {
	if q == nil {
		return nil
	}
	args, err := jsonArgs(q.Notice)
	if err != nil {
		return fmt.Errorf("store quarantined work of %s on %s: %w", name, q.Notice.Cluster, err)
	}
	w.Queue(fmt.Sprintf("store quarantined work of %s on %s", name, q.Notice.Cluster), `
		insert into status_quarantine (placement, cluster, notice, report_index, report_generation, event_id)
		values ($1, $2, $3, $4, $5, $6)
		on conflict (placement, cluster) do update set notice = excluded.notice, report_index = excluded.report_index,
			report_generation = excluded.report_generation, event_id = excluded.event_id`,
		name, q.Notice.Cluster, args[0], q.ReportIndex, q.ReportGeneration, ev.ID())
	return nil
}
