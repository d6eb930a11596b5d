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
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/platform/sealing"
	"github.com/flotilla-dev/flotilla/services/rollout/override"
	"github.com/flotilla-dev/flotilla/services/rollout/plan"
)

// placementRow is a rollout_placements row, locked by the transaction that
// read it.
type placementRow struct {
	name           string
	spec           *api.PlacementSpec // nil until the placement event arrives
	generation     int64
	specSeq        int64
	deleted        bool
	decision       *revision.Decision // nil until the first decision is applied
	snapshotDueAt  *time.Time
	windowOpenedAt *time.Time // when the open coalescing window began
	wakeAt         *time.Time
	selectionError *string
	// progressHash hashes the placement-wide fields of the progress last
	// emitted, and progressRevision counts the progress revisions emitted.
	progressHash     *string
	progressRevision int64
	// selectAtOnce is set (in memory, for this pass) when a placement with no
	// snapshot yet has its selection evaluated without a coalescing window:
	// the snapshot is cut only if every selector picks something.
	selectAtOnce bool
}

// namespace is a ResourcePlacement's namespace, from its key; "" for a
// ClusterResourcePlacement.
func (p *placementRow) namespace() string {
	ns, _ := api.SplitPlacementKey(p.name)
	return ns
}

// lockMode says how lockPlacement treats a missing or busy row.
type lockMode int

const (
	// lockExisting returns nil for a missing row.
	lockExisting lockMode = iota
	// lockOrCreate creates a missing row first.
	lockOrCreate
	// lockDue returns nil unless the row has a due timer, and skips a row
	// another transaction holds (that transaction reconciles it).
	lockDue
)

// lockPlacement reads a placement's row with FOR UPDATE: whatever the
// transaction does to the placement is serialised with every other replica.
func lockPlacement(ctx context.Context, tx pgx.Tx, name string, mode lockMode, now time.Time) (*placementRow, error) {
	if mode == lockOrCreate {
		if _, err := tx.Exec(ctx, `insert into rollout_placements (name) values ($1) on conflict do nothing`, name); err != nil {
			return nil, fmt.Errorf("create placement %s: %w", name, err)
		}
	}
	q := `select name, spec, generation, spec_seq, deleted, decision, snapshot_due_at, snapshot_window_opened_at, wake_at,
			selection_error, progress_hash, progress_revision
		from rollout_placements where name = $1 for update`
	args := []any{name}
	if mode == lockDue {
		q = `select name, spec, generation, spec_seq, deleted, decision, snapshot_due_at, snapshot_window_opened_at, wake_at,
			selection_error, progress_hash, progress_revision
		from rollout_placements where name = $1 and (snapshot_due_at <= $2 or wake_at <= $2) for update skip locked`
		args = append(args, now)
	}
	var (
		p              placementRow
		spec, decision []byte
	)
	err := tx.QueryRow(ctx, q, args...).Scan(&p.name, &spec, &p.generation, &p.specSeq, &p.deleted, &decision,
		&p.snapshotDueAt, &p.windowOpenedAt, &p.wakeAt, &p.selectionError, &p.progressHash, &p.progressRevision)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("lock placement %s: %w", name, err)
	}
	if spec != nil {
		p.spec = new(api.PlacementSpec)
		if err := json.Unmarshal(spec, p.spec); err != nil {
			return nil, fmt.Errorf("read placement %s: %w", name, err)
		}
	}
	if decision != nil {
		// A decision stored from a v1 event reads as revision 0.
		p.decision = new(revision.Decision)
		if err := json.Unmarshal(decision, p.decision); err != nil {
			return nil, fmt.Errorf("read decision of %s: %w", name, err)
		}
	}
	return &p, nil
}

// lockPlacementOnly takes the placement row's lock as lockPlacement does (lockExisting)
// without reading the row: a report needs the lock, not the spec and decision, which
// the batch's reconcile reads once for all its reports on the placement. It reports
// whether the row exists.
func lockPlacementOnly(ctx context.Context, tx pgx.Tx, name string) (bool, error) {
	var one int
	err := tx.QueryRow(ctx, `select 1 from rollout_placements where name = $1 for update`, name).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock placement %s: %w", name, err)
	}
	return true, nil
}

// savePlacement writes what reconcile changes on the row.
func savePlacement(ctx context.Context, tx pgx.Tx, p *placementRow) error {
	_, err := tx.Exec(ctx, `
		update rollout_placements set snapshot_due_at = $2, wake_at = $3, selection_error = $4,
			progress_hash = $5, progress_revision = $6, snapshot_window_opened_at = $7, updated_at = now()
		where name = $1`,
		p.name, p.snapshotDueAt, p.wakeAt, p.selectionError, p.progressHash, p.progressRevision, p.windowOpenedAt)
	if err != nil {
		return fmt.Errorf("save placement %s: %w", p.name, err)
	}
	return nil
}

// clusterRow is a rollout_clusters row.
type clusterRow struct {
	cluster        string
	sent           string // "", "work" or "tombstone"
	sentIndex      int64
	sentGeneration int64
	workKey        string
	keyGeneration  int64
	sentAt         *time.Time
	workSeq        int64
	report         *plan.Report
	reportSeq      int64
	appliedAt      *time.Time
	targetKey      string
	targetSince    *time.Time
	ready          bool
	// reported is the cluster's entry in the progress as last emitted, nil
	// when it is not in it.
	reported *events.ClusterProgress
	// overrides is what the overrides did to the work last sent (or, when
	// they failed, not sent): nil when none applied.
	overrides *events.ClusterOverrides
}

func (c *clusterRow) holds() bool { return c.sent == sentWork }

const (
	sentWork      = "work"
	sentTombstone = "tombstone"
)

const clusterColumns = `cluster, coalesce(sent, ''), coalesce(sent_index, 0), coalesce(sent_generation, 0),
	coalesce(work_key, ''), coalesce(key_generation, 0), sent_at, work_seq, report, report_seq, applied_at,
	coalesce(target_key, ''), target_since, ready, reported, overrides`

func scanCluster(row pgx.Row) (*clusterRow, error) {
	var (
		c                           clusterRow
		report, reported, overrides []byte
	)
	if err := row.Scan(&c.cluster, &c.sent, &c.sentIndex, &c.sentGeneration, &c.workKey, &c.keyGeneration, &c.sentAt,
		&c.workSeq, &report, &c.reportSeq, &c.appliedAt, &c.targetKey, &c.targetSince, &c.ready, &reported, &overrides); err != nil {
		return nil, err
	}
	if overrides != nil {
		c.overrides = new(events.ClusterOverrides)
		if err := json.Unmarshal(overrides, c.overrides); err != nil {
			return nil, fmt.Errorf("read the overrides of %s: %w", c.cluster, err)
		}
	}
	if reported != nil {
		c.reported = new(events.ClusterProgress)
		if err := json.Unmarshal(reported, c.reported); err != nil {
			return nil, fmt.Errorf("read the progress reported of %s: %w", c.cluster, err)
		}
	}
	if report != nil {
		c.report = new(plan.Report)
		if err := json.Unmarshal(report, c.report); err != nil {
			return nil, fmt.Errorf("read report of %s: %w", c.cluster, err)
		}
	}
	return &c, nil
}

// loadClusters reads every cluster row of a placement (whose row the caller
// holds locked).
func loadClusters(ctx context.Context, tx pgx.Tx, placement string) (map[string]*clusterRow, error) {
	rows, err := tx.Query(ctx, `select `+clusterColumns+` from rollout_clusters where placement = $1`, placement)
	if err != nil {
		return nil, fmt.Errorf("load clusters of %s: %w", placement, err)
	}
	defer rows.Close()
	out := map[string]*clusterRow{}
	for rows.Next() {
		c, err := scanCluster(rows)
		if err != nil {
			return nil, fmt.Errorf("load clusters of %s: %w", placement, err)
		}
		out[c.cluster] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load clusters of %s: %w", placement, err)
	}
	return out, nil
}

// loadCluster reads one cluster row; nil when there is none.
func loadCluster(ctx context.Context, tx pgx.Tx, placement, cluster string) (*clusterRow, error) {
	c, err := scanCluster(tx.QueryRow(ctx, `select `+clusterColumns+` from rollout_clusters where placement = $1 and cluster = $2`,
		placement, cluster))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load cluster %s of %s: %w", cluster, placement, err)
	}
	return c, nil
}

// saveCluster writes a cluster row.
func saveCluster(ctx context.Context, tx pgx.Tx, placement string, c *clusterRow) error {
	var report, reported, overrides []byte
	if c.overrides != nil {
		var err error
		if overrides, err = json.Marshal(c.overrides); err != nil {
			return fmt.Errorf("save cluster %s of %s: %w", c.cluster, placement, err)
		}
	}
	if c.report != nil {
		var err error
		if report, err = json.Marshal(c.report); err != nil {
			return fmt.Errorf("save cluster %s of %s: %w", c.cluster, placement, err)
		}
	}
	if c.reported != nil {
		var err error
		if reported, err = json.Marshal(c.reported); err != nil {
			return fmt.Errorf("save cluster %s of %s: %w", c.cluster, placement, err)
		}
	}
	_, err := tx.Exec(ctx, `
		insert into rollout_clusters (placement, cluster, sent, sent_index, sent_generation, work_key, key_generation,
			sent_at, work_seq, report, report_seq, applied_at, target_key, target_since, ready, reported, overrides)
		values ($1, $2, nullif($3, ''), $4, $5, nullif($6, ''), $7, $8, $9, $10, $11, $12, nullif($13, ''), $14, $15, $16, $17)
		on conflict (placement, cluster) do update set sent = excluded.sent, sent_index = excluded.sent_index,
			sent_generation = excluded.sent_generation, work_key = excluded.work_key,
			key_generation = excluded.key_generation, sent_at = excluded.sent_at, work_seq = excluded.work_seq,
			report = excluded.report, report_seq = excluded.report_seq, applied_at = excluded.applied_at,
			target_key = excluded.target_key, target_since = excluded.target_since, ready = excluded.ready,
			reported = excluded.reported, overrides = excluded.overrides, updated_at = now()`,
		placement, c.cluster, c.sent, c.sentIndex, c.sentGeneration, c.workKey, c.keyGeneration,
		c.sentAt, c.workSeq, report, c.reportSeq, c.appliedAt, c.targetKey, c.targetSince, c.ready, reported, overrides)
	if err != nil {
		return fmt.Errorf("save cluster %s of %s: %w", c.cluster, placement, err)
	}
	return nil
}

// leftMembers returns the leave policy of each member that left the fleet.
func leftMembers(ctx context.Context, tx pgx.Tx) (map[string]events.LeavePolicy, error) {
	rows, err := tx.Query(ctx, `select name, leave_policy from rollout_members where left_fleet`)
	if err != nil {
		return nil, fmt.Errorf("load members that left: %w", err)
	}
	defer rows.Close()
	out := map[string]events.LeavePolicy{}
	for rows.Next() {
		var name, policy string
		if err := rows.Scan(&name, &policy); err != nil {
			return nil, fmt.Errorf("load members that left: %w", err)
		}
		out[name] = events.LeavePolicy(policy)
	}
	return out, rows.Err()
}

// latestSnapshot is the newest resource snapshot of a placement.
type latestSnapshot struct {
	index int64
	hash  string
}

// hasNoSnapshot says whether no snapshot of a placement was ever cut.
func hasNoSnapshot(ctx context.Context, tx pgx.Tx, placement string) (bool, error) {
	var exists bool
	if err := tx.QueryRow(ctx, `select exists (select 1 from resource_snapshots where placement = $1)`, placement).Scan(&exists); err != nil {
		return false, fmt.Errorf("snapshots of %s: %w", placement, err)
	}
	return !exists, nil
}

func loadLatestSnapshot(ctx context.Context, tx pgx.Tx, placement string) (*latestSnapshot, error) {
	var s latestSnapshot
	err := tx.QueryRow(ctx, `select snapshot_index, content_hash from resource_snapshots
		where placement = $1 order by snapshot_index desc limit 1`, placement).Scan(&s.index, &s.hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("latest snapshot of %s: %w", placement, err)
	}
	return &s, nil
}

// loadSnapshotManifests reads a snapshot's manifests, opening those sealed.
func loadSnapshotManifests(ctx context.Context, tx pgx.Tx, keys *sealing.Keys, placement string, index int64) ([]json.RawMessage, error) {
	var manifests []json.RawMessage
	err := tx.QueryRow(ctx, `select manifests from resource_snapshots where placement = $1 and snapshot_index = $2`,
		placement, index).Scan(&manifests)
	if err != nil {
		return nil, fmt.Errorf("manifests of snapshot %d of %s: %w", index, placement, err)
	}
	if manifests == nil {
		return nil, fmt.Errorf("manifests of snapshot %d of %s were pruned", index, placement)
	}
	opened, err := openAll(keys, manifests)
	if err != nil {
		return nil, fmt.Errorf("manifests of snapshot %d of %s: %w", index, placement, err)
	}
	return opened, nil
}

// loadSnapshotOverrides reads the overrides a snapshot applies; nil when none.
func loadSnapshotOverrides(ctx context.Context, tx pgx.Tx, placement string, index int64) ([]override.Snapshot, error) {
	var raw []byte
	err := tx.QueryRow(ctx, `select overrides from resource_snapshots where placement = $1 and snapshot_index = $2`,
		placement, index).Scan(&raw)
	if err != nil {
		return nil, fmt.Errorf("overrides of snapshot %d of %s: %w", index, placement, err)
	}
	if raw == nil {
		return nil, nil
	}
	var out []override.Snapshot
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("overrides of snapshot %d of %s: %w", index, placement, err)
	}
	return out, nil
}
