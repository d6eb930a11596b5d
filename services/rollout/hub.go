package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/sealing"
	"github.com/flotilla-dev/flotilla/services/rollout/selection"
	"github.com/flotilla-dev/flotilla/services/rollout/snapshot"
)

// upsertHubResource queues on w the storing of a manifest in the hub store,
// stripped of the fields an API server fills in; the flush opens the
// coalescing window of the placements when its content changed.
func (r *rollout) upsertHubResource(ctx context.Context, w *hubWrites, ev cloudevents.Event, m bus.Meta, p *events.HubResourceUpserted) error {
	given, err := r.hubManifest(ctx, p)
	if err != nil {
		return err
	}
	if p.ManifestRef != nil {
		// The consumer checked an inline object against its subject; one from a blob
		// is checked here, once its identity can be read.
		if err := events.CheckHubManifest(m.Subject, given); err != nil {
			return bus.Permanent(err)
		}
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(given, &u.Object); err != nil || u.Object == nil {
		return bus.Permanent(fmt.Errorf("hub resource: the manifest is not a JSON object: %v", err))
	}
	api.StripServerFields(u)
	if errs := api.ValidateHubResource(u); len(errs) > 0 {
		return bus.Permanent(fmt.Errorf("hub resource %s %s: %w", u.GetKind(), u.GetName(), errs))
	}
	if u.GetName() == "" {
		return bus.Permanent(fmt.Errorf("hub resource %s: metadata.name is required in the hub store (generateName cannot identify an object)", u.GetKind()))
	}
	gvk := u.GroupVersionKind()
	if gvk.Group == api.PlacementGroupVersion.Group && (gvk.Kind == api.ClusterResourceEnvelopeKind || gvk.Kind == api.ResourceEnvelopeKind) {
		raw, _ := json.Marshal(u.Object)
		obj, err := api.Decode(raw)
		if err != nil {
			return bus.Permanent(fmt.Errorf("hub resource %s %s: %w", gvk.Kind, u.GetName(), err))
		}
		if errs := api.Validate(obj); len(errs) > 0 {
			return bus.Permanent(fmt.Errorf("hub resource %s %s: %w", gvk.Kind, u.GetName(), errs))
		}
	}
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return bus.Permanent(fmt.Errorf("hub resource %s %s: %w", gvk.Kind, u.GetName(), err))
	}
	manifest, err := snapshot.Canonical(raw)
	if err != nil {
		return bus.Permanent(fmt.Errorf("hub resource %s %s: %w", gvk.Kind, u.GetName(), err))
	}
	// A stored manifest selection cannot read would fail every selection of
	// its kind or namespace (a namespace or labels of the wrong type).
	if _, err := selection.NewObject(manifest); err != nil {
		return bus.Permanent(fmt.Errorf("hub resource %s %s: %w", gvk.Kind, u.GetName(), err))
	}
	if hasSealedField(manifest) {
		return bus.Permanent(fmt.Errorf("hub resource %s %s: the field %q is Flotilla's own (it marks encrypted manifests in the hub store)", gvk.Kind, u.GetName(), sealedField))
	}
	// The hash is of the manifest itself, what the stored row stands for.
	hash := snapshot.Hash([]json.RawMessage{manifest})
	stored, err := sealManifest(r.keys, manifest)
	if err != nil {
		return bus.Permanent(fmt.Errorf("hub resource %s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err))
	}
	id := api.ResourceIdentifier{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
	// The row changes only for a newer event (by stream sequence): replicas
	// may handle two events about one object in either order. The guard is
	// repeated in the statement for a row another replica creates meanwhile.
	w.add(ctx, hubWrite{id: id, seq: int64(m.Sequence), hash: hash, last: events.IsLast(ev), sql: `
		insert into hub_resources (api_group, version, kind, namespace, name, manifest, content_hash, event_seq, event_id)
		values ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		on conflict (api_group, version, kind, namespace, name) do update set
			manifest = excluded.manifest, content_hash = excluded.content_hash, deleted = false,
			event_seq = excluded.event_seq, event_id = excluded.event_id, updated_at = now()
		where hub_resources.event_seq < excluded.event_seq`,
		args: []any{id.Group, id.Version, id.Kind, id.Namespace, id.Name, stored, hash, int64(m.Sequence), ev.ID()}})
	return nil
}

// deleteHubResource queues on w the marking of a manifest deleted in the
// hub store. The row stays with the deleting event's sequence, so an older
// upsert delivered late cannot bring it back.
func (r *rollout) deleteHubResource(ctx context.Context, w *hubWrites, ev cloudevents.Event, m bus.Meta, p *events.HubResourceDeleted) {
	id := p.Resource
	w.add(ctx, hubWrite{id: id, seq: int64(m.Sequence), deletion: true, last: events.IsLast(ev), sql: `
		insert into hub_resources (api_group, version, kind, namespace, name, manifest, content_hash, deleted, event_seq, event_id)
		values ($1, $2, $3, $4, $5, 'null', '', true, $6, $7)
		on conflict (api_group, version, kind, namespace, name) do update set
			deleted = true, event_seq = excluded.event_seq, event_id = excluded.event_id, updated_at = now()
		where hub_resources.event_seq < excluded.event_seq`,
		args: []any{id.Group, id.Version, id.Kind, id.Namespace, id.Name, int64(m.Sequence), ev.ID()}})
}

// hubRow is what the handlers need of a stored hub object.
type hubRow struct {
	hash    string
	deleted bool
	seq     int64
}

// selectorsLock is a PostgreSQL advisory lock between hub changes (shared)
// and placement spec changes (exclusive). A hub change re-selects only the
// placements whose selectors may concern it, read without row locks; the
// lock makes sure a placement whose selectors change meanwhile either is
// read with its new selectors or commits them, and evaluates, only after the
// hub change committed.
const selectorsLock = 0x666c6f74696c6c61 // "flotilla"

// hubWrite is one hub event's write to the hub store, prepared (decoded,
// checked, sealed) and waiting to be sent with the others of its batch.
type hubWrite struct {
	ctx      context.Context // the event's, whose trace a snapshot it causes carries on
	id       api.ResourceIdentifier
	seq      int64  // the event's stream sequence
	hash     string // of the new content; "" for a deletion
	deletion bool
	last     bool   // the event ends its publisher's burst (events.IsLast)
	sql      string // the write, guarded by seq
	args     []any
}

// changes says whether the write changes what placements can select, given
// the row it found (nil: none).
func (w hubWrite) changes(prev *hubRow) bool {
	switch {
	case prev != nil && prev.seq >= w.seq:
		return false // a newer event about the object was handled first
	case w.deletion:
		return prev != nil && !prev.deleted
	default:
		return prev == nil || prev.deleted || prev.hash != w.hash
	}
}

// hubWrites are the hub events of a batch that follow one another, sent to
// PostgreSQL in one round trip (flushHubWrites) before the next other event
// of the batch runs, or at its end.
type hubWrites struct {
	writes []hubWrite
}

func (w *hubWrites) add(ctx context.Context, hw hubWrite) {
	hw.ctx = ctx
	w.writes = append(w.writes, hw)
}

// flushHubWrites sends the queued writes in one round trip: for each, in
// order, it reads and locks the object's row and runs the write (guarded by
// the event's sequence: replicas may handle two events about one object in
// either order, and the guard also covers a row another replica creates
// meanwhile); then it takes the selectors lock shared and finds the live
// placements whose selectors may concern the objects. The statements run in
// order in the transaction, each with its own snapshot, so the placements
// are read after the lock is held. The placements a changed object may
// concern are re-selected.
//
// PostgreSQL leaves out the placements none of whose selectors has one of
// the objects' kinds, or Namespace for a namespaced object: with a thousand
// placements, decoding every one's selectors for each hub change was most of
// a burst's cost. MayConcern decides on the rest; selectors that are not an
// array of objects are decoded, and concern the change when they do not
// decode.
func (r *rollout) flushHubWrites(ctx context.Context, tx pgx.Tx, w *hubWrites, now time.Time) error {
	writes := w.writes
	w.writes = nil
	if len(writes) == 0 {
		return nil
	}
	var (
		b          pgx.Batch
		prevs      = make([]*hubRow, len(writes))
		kinds      []string
		namespaced bool
		candidates []candidate
	)
	for i, hw := range writes {
		b.Queue(`
			select content_hash, deleted, event_seq from hub_resources
			where api_group = $1 and version = $2 and kind = $3 and namespace = $4 and name = $5
			for update`, hw.id.Group, hw.id.Version, hw.id.Kind, hw.id.Namespace, hw.id.Name).QueryRow(func(row pgx.Row) error {
			var h hubRow
			err := row.Scan(&h.hash, &h.deleted, &h.seq)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read hub resource %s %s: %w", hw.id.Kind, hw.id.Name, err)
			}
			prevs[i] = &h
			return nil
		})
		b.Queue(hw.sql, hw.args...).Exec(func(pgconn.CommandTag) error { return nil })
		if !slices.Contains(kinds, hw.id.Kind) {
			kinds = append(kinds, hw.id.Kind)
		}
		namespaced = namespaced || hw.id.Namespace != ""
	}
	b.Queue(`select pg_advisory_xact_lock_shared($1)`, int64(selectorsLock))
	b.Queue(`
		select name, spec->'resourceSelectors' from rollout_placements
		where not deleted and spec is not null and (
			coalesce(jsonb_typeof(spec->'resourceSelectors'), 'null') <> 'array'
			or exists (select 1 from jsonb_array_elements(spec->'resourceSelectors') s
				where jsonb_typeof(s) <> 'object' or s->>'kind' = any($1) or ($2 and s->>'kind' = 'Namespace')))`,
		kinds, namespaced).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var c candidate
			if err := rows.Scan(&c.name, &c.selectors); err != nil {
				return err
			}
			candidates = append(candidates, c)
		}
		return rows.Err()
	})
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("store %d hub resource(s): %w", len(writes), err)
	}

	var changed []hubWrite
	for i, hw := range writes {
		if hw.changes(prevs[i]) {
			changed = append(changed, hw)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	var concerned []string
	for _, c := range candidates {
		var selectors []api.ClusterResourceSelector
		if err := json.Unmarshal(c.selectors, &selectors); err != nil {
			concerned = append(concerned, c.name)
			continue
		}
		for _, hw := range changed {
			if selection.MayConcern(selectors, hw.id) {
				concerned = append(concerned, c.name)
				break
			}
		}
	}
	// The last change's trace goes on to the snapshots it causes. When the
	// publisher's burst ended here, nothing more is coming for the window to
	// gather: the placements are evaluated at once.
	window := r.window
	if slices.ContainsFunc(writes, func(hw hubWrite) bool { return hw.last }) {
		window = 0
	}
	return r.reselect(changed[len(changed)-1].ctx, tx, concerned, now, window)
}

// candidate is a placement whose selectors may concern a hub change.
type candidate struct {
	name      string
	selectors []byte
}

// reselect opens or extends the coalescing window (snapshot.DueAt) of the
// named placements (those that exist, are live and have a spec): their
// selections are evaluated when changes pause, so a burst costs one
// evaluation per placement, and placements a change cannot concern cost
// nothing. window is the quiet period to wait for; 0 evaluates them at once.
//
// The rows are locked, in name order so that concurrent handlers cannot
// deadlock: a reconcile evaluating a selection right now (it holds the row)
// may not have seen this change and will close the window when it commits,
// so the window must be reopened after it.
func (r *rollout) reselect(ctx context.Context, tx pgx.Tx, names []string, now time.Time, window time.Duration) error {
	if len(names) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `select 1 from rollout_placements where name = any($1) order by name for update`, names); err != nil {
		return fmt.Errorf("lock placements to re-select: %w", err)
	}
	for _, name := range names {
		r.traces.remember(ctx, name)
	}
	// As snapshot.DueAt: push each evaluation a quiet period later, capped
	// at the window's maximum.
	if _, err := tx.Exec(ctx, `update rollout_placements set
			snapshot_window_opened_at = coalesce(snapshot_window_opened_at, $3),
			snapshot_due_at = least($2::timestamptz, coalesce(snapshot_window_opened_at, $3) + $4 * interval '1 microsecond')
		where name = any($1) and not deleted and spec is not null`, names, now.Add(window), now, r.maxWait.Microseconds()); err != nil {
		return fmt.Errorf("schedule re-selection: %w", err)
	}
	return nil
}

// hubStore is the hub store as selection.Store, read in a transaction; keys open the
// manifests sealed in it.
type hubStore struct {
	tx   pgx.Tx
	keys *sealing.Keys
}

func (s hubStore) ByKind(ctx context.Context, group, version, kind, name string) ([]selection.Object, error) {
	q := `select manifest from hub_resources where api_group = $1 and version = $2 and kind = $3 and not deleted`
	args := []any{group, version, kind}
	if name != "" {
		q += ` and name = $4`
		args = append(args, name)
	}
	return s.query(ctx, q, args...)
}

func (s hubStore) InNamespace(ctx context.Context, namespace string) ([]selection.Object, error) {
	return s.query(ctx, `select manifest from hub_resources where namespace = $1 and not deleted`, namespace)
}

func (s hubStore) query(ctx context.Context, q string, args ...any) ([]selection.Object, error) {
	rows, err := s.tx.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read hub store: %w", err)
	}
	manifests, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("read hub store: %w", err)
	}
	out := make([]selection.Object, 0, len(manifests))
	for _, stored := range manifests {
		m, err := openManifest(s.keys, stored)
		if err != nil {
			return nil, fmt.Errorf("read hub store: %w", err)
		}
		o, err := selection.NewObject(m)
		if err != nil {
			return nil, fmt.Errorf("read hub store: %w", err)
		}
		out = append(out, o)
	}
	return out, nil
}

// hubManifest is the event's manifest: inline, or fetched from the hub blob it names.
func (r *rollout) hubManifest(ctx context.Context, p *events.HubResourceUpserted) ([]byte, error) {
	if p.ManifestRef == nil {
		return p.Manifest, nil
	}
	data, err := bus.GetBlob(ctx, r.env.NC, bus.StreamHubBlobs, *p.ManifestRef, 10*time.Second)
	if errors.Is(err, bus.ErrBlobMissing) {
		return nil, bus.Permanent(fmt.Errorf("hub resource: the object's blob is gone from the bus (stored more than the events' age ago?): %w", err))
	}
	if err != nil {
		return nil, fmt.Errorf("hub resource: %w", err)
	}
	return data, nil
}
