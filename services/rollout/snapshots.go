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
	"github.com/flotilla-dev/flotilla/platform/outbox"
	"github.com/flotilla-dev/flotilla/services/rollout/override"
	"github.com/flotilla-dev/flotilla/services/rollout/selection"
	"github.com/flotilla-dev/flotilla/services/rollout/snapshot"
)

// evaluateSelection selects the placement's resources and cuts a snapshot
// when their content differs from the latest one. A new placement's first
// evaluation (selectAtOnce) cuts only if every selector picks something, and
// otherwise opens the coalescing window.
func (ps *pass) evaluateSelection(ctx context.Context) error {
	p, tx, now := ps.p, ps.tx, ps.now
	objs, unmatched, err := selection.SelectEach(ctx, p.namespace(), p.spec.ResourceSelectors, hubStore{tx, ps.r.keys})
	var invalid *selection.InvalidError
	if errors.As(err, &invalid) {
		msg := invalid.Error()
		p.selectionError = &msg
		return nil
	}
	if err != nil {
		return fmt.Errorf("select resources of %s: %w", p.name, err)
	}
	if p.selectAtOnce && len(unmatched) > 0 {
		// A new placement some of whose objects have not arrived: they
		// likely follow it, so wait for them as after any change.
		due, opened := snapshot.DueAt(nil, now, ps.r.window, ps.r.maxWait)
		p.snapshotDueAt, p.windowOpenedAt = &due, &opened
		return nil
	}
	p.selectionError = nil
	content, err := snapshot.Of(objs)
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", p.name, err)
	}
	if msg := oversized(content, MaxSnapshotBytes); msg != "" {
		p.selectionError = &msg
		return nil
	}
	overrides, err := applicableOverrides(ctx, tx, p.name, content.Manifests)
	if err != nil {
		return err
	}
	content.Hash = snapshot.HashWithOverrides(content.Manifests, overrides)
	latest, err := loadLatestSnapshot(ctx, tx, p.name)
	if err != nil {
		return err
	}
	if latest != nil && latest.hash == content.Hash {
		return nil
	}
	index := int64(0)
	if latest != nil {
		index = latest.index + 1
	}
	id := events.ID("resource-snapshot", p.name, fmt.Sprint(index))
	resources, err := json.Marshal(content.Resources)
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", p.name, err)
	}
	stored, err := sealAll(ps.r.keys, content.Manifests)
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", p.name, err)
	}
	if _, err := tx.Exec(ctx, `
		insert into resource_snapshots (placement, snapshot_index, content_hash, manifests, selected_resources, generation, event_id, created_at, overrides)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		p.name, index, content.Hash, stored, resources, p.generation, id, now, overrides); err != nil {
		return fmt.Errorf("store snapshot %d of %s: %w", index, p.name, err)
	}
	if err := pruneSnapshots(ctx, tx, p, now); err != nil {
		return err
	}
	subject, err := events.RolloutSubject(p.name)
	if err != nil {
		return bus.Permanent(err)
	}
	ps.r.log.Info("resource snapshot cut", "placement", p.name, "index", index, "hash", content.Hash, "resources", len(content.Resources))
	return ps.announceSnapshot(ctx, subject, id, events.SnapshotCreated{
		Placement: p.name, Index: index, Hash: content.Hash, ResourceCount: len(content.Resources),
	}, content.Resources)
}

// applicableOverrides returns, as JSON, the overrides that concern a
// placement whose selected manifests are given (override.Applicable); nil
// when none does.
func applicableOverrides(ctx context.Context, tx pgx.Tx, placement string, manifests []json.RawMessage) (json.RawMessage, error) {
	all, err := overridesFor(ctx, tx, placement)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	applicable := override.Applicable(placement, manifests, all)
	if len(applicable) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(applicable)
	if err != nil {
		return nil, fmt.Errorf("the overrides of %s: %w", placement, err)
	}
	return raw, nil
}

// announceSnapshot enqueues the events of a new snapshot: its list of
// resources cut into bounded pieces (see events.SnapshotCreated). The first
// piece's id is the snapshot's, as before pieces.
func (ps *pass) announceSnapshot(ctx context.Context, subject, id string, h events.SnapshotCreated, resources []api.ResourceIdentifier) error {
	pieces, err := revision.Cut(h, resources, func(p *events.SnapshotCreated, piece, pieces int, rs []api.ResourceIdentifier) {
		p.Piece, p.Pieces, p.SelectedResources = piece, pieces, rs
	})
	if err != nil {
		return bus.Permanent(fmt.Errorf("snapshot %d of %s: %w", h.Index, h.Placement, err))
	}
	for _, p := range pieces {
		pid := id
		if p.Piece > 0 {
			pid = events.ID(id, fmt.Sprint(p.Piece))
		}
		ev, err := events.New(events.TypeSnapshotCreated, ps.r.env.Source, h.Placement, pid, p)
		if err != nil {
			return fmt.Errorf("snapshot event for %s: %w", h.Placement, err)
		}
		if err := outbox.Enqueue(ctx, ps.tx, subject, ev); err != nil {
			return err
		}
	}
	return nil
}

// MaxSnapshotBytes bounds a resource snapshot: its manifests, encoded as one JSON array,
// must fit in one work blob.
const MaxSnapshotBytes = bus.MaxBlobBytes

// oversized says why content is too large for a snapshot of at most limit bytes, naming the
// limit, its size and its largest object; "" when it fits.
func oversized(content snapshot.Content, limit int) string {
	size, largest := 2, 0 // [ and ]
	for i, m := range content.Manifests {
		size += len(m) + 1
		if len(m) > len(content.Manifests[largest]) {
			largest = i
		}
	}
	if size <= limit {
		return ""
	}
	r := content.Resources[largest]
	return fmt.Sprintf("the selected resources are %s, over the limit of %s for one resource snapshot; the largest is %s %s (%s): select fewer resources or split the placement",
		mebibytes(size), mebibytes(limit), r.Kind, objectName(r), mebibytes(len(content.Manifests[largest])))
}

func objectName(r api.ResourceIdentifier) string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

func mebibytes(n int) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// pruneSnapshots drops the manifests of all but the newest
// revisionHistoryLimit snapshots; their index and hash stay for audit.
func pruneSnapshots(ctx context.Context, tx pgx.Tx, p *placementRow, now time.Time) error {
	limit := int(api.DefaultRevisionHistoryLimit)
	if p.spec.RevisionHistoryLimit != nil {
		limit = int(*p.spec.RevisionHistoryLimit)
	}
	rows, err := tx.Query(ctx, `select snapshot_index::bigint from resource_snapshots where placement = $1 and manifests is not null`, p.name)
	if err != nil {
		return fmt.Errorf("list snapshots of %s: %w", p.name, err)
	}
	indexes, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("list snapshots of %s: %w", p.name, err)
	}
	drop := snapshot.Pruned(indexes, limit)
	if len(drop) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `update resource_snapshots set manifests = null, pruned_at = $3
		where placement = $1 and snapshot_index = any($2)`, p.name, drop, now); err != nil {
		return fmt.Errorf("prune snapshots of %s: %w", p.name, err)
	}
	return nil
}
