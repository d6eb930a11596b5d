package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/rollout/override"
)

// Overrides are kept in rollout_overrides. A snapshot holds the overrides that
// concern it (evaluateSelection), so an override change reaches a placement
// with its next snapshot: at once when the override names the placement (its
// coalescing window opens, as for a hub change), else whenever the placement's
// resources next change, as upstream Fleet does.

// overridesLock serialises override changes (PostgreSQL advisory lock): the
// check that an object is selected by one override of each kind reads every
// live override of the kind.
const overridesLock = 0x6f76657272696465 // "override"

// overrideRow is a rollout_overrides row.
type overrideRow struct {
	override *api.Override
	index    int64
	hash     string
	deleted  bool
	seq      int64
}

// upsertOverride stores an override unless it is late, changes its placement
// (immutable, as upstream's) or selects an object another override of its kind
// already selects (refused, as upstream's webhook refuses it); a changed
// override rolls out at once to the placement it names.
func (r *rollout) upsertOverride(ctx context.Context, tx pgx.Tx, eventID string, m bus.Meta, p *events.OverrideUpserted, now time.Time) error {
	obj := p.Object()
	if obj == nil {
		return bus.Permanent(errors.New("override: the event carries no override"))
	}
	api.Default(obj)
	if errs := api.Validate(obj); len(errs) > 0 {
		return bus.Permanent(fmt.Errorf("%s: %w", p.Key(), errs))
	}
	o, _ := api.OverrideOf(obj)
	if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock($1)`, int64(overridesLock)); err != nil {
		return fmt.Errorf("store %s: %w", o.Key, err)
	}
	prev, err := lockOverride(ctx, tx, o.Key)
	if err != nil || (prev != nil && prev.seq >= int64(m.Sequence)) {
		return err
	}
	live, err := liveOverrides(ctx, tx, o.Key.Kind)
	if err != nil {
		return err
	}
	if errs := api.OverrideConflicts(o, live); len(errs) > 0 {
		r.log.Warn("override refused", "override", o.Key.String(), "sequence", m.Sequence, "err", errs)
		return nil
	}
	if prev != nil && !prev.deleted {
		if errs := api.ValidateOverrideUpdate(*prev.override, o); len(errs) > 0 {
			r.log.Warn("override update refused", "override", o.Key.String(), "sequence", m.Sequence, "err", errs)
			return nil
		}
	}
	raw, err := json.Marshal(o)
	if err != nil {
		return bus.Permanent(fmt.Errorf("%s: %w", o.Key, err))
	}
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:])
	index := int64(0)
	switch {
	case prev == nil || prev.deleted:
	case prev.hash == hash:
		index = prev.index
	default:
		index = prev.index + 1
	}
	if _, err := tx.Exec(ctx, `
		insert into rollout_overrides (kind, namespace, name, override, snapshot_index, content_hash, deleted, event_seq, event_id)
		values ($1, $2, $3, $4, $5, $6, false, $7, $8)
		on conflict (kind, namespace, name) do update set override = excluded.override, snapshot_index = excluded.snapshot_index,
			content_hash = excluded.content_hash, deleted = false, event_seq = excluded.event_seq, event_id = excluded.event_id, updated_at = now()`,
		o.Key.Kind, o.Key.Namespace, o.Key.Name, raw, index, hash, int64(m.Sequence), eventID); err != nil {
		return fmt.Errorf("store %s: %w", o.Key, err)
	}
	if prev != nil && !prev.deleted && prev.hash == hash {
		return nil
	}
	r.log.Info("override stored", "override", o.Key.String(), "index", index)
	return r.overrideChanged(ctx, tx, o, now)
}

// deleteOverride marks an override deleted; the placement it names rolls out
// without it at once.
func (r *rollout) deleteOverride(ctx context.Context, tx pgx.Tx, eventID string, m bus.Meta, p *events.OverrideDeleted, now time.Time) error {
	k := p.Override
	if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock($1)`, int64(overridesLock)); err != nil {
		return fmt.Errorf("delete %s: %w", k, err)
	}
	prev, err := lockOverride(ctx, tx, k)
	if err != nil || (prev != nil && prev.seq >= int64(m.Sequence)) {
		return err
	}
	if _, err := tx.Exec(ctx, `
		insert into rollout_overrides (kind, namespace, name, override, deleted, event_seq, event_id)
		values ($1, $2, $3, null, true, $4, $5)
		on conflict (kind, namespace, name) do update set override = null, deleted = true, content_hash = '',
			event_seq = excluded.event_seq, event_id = excluded.event_id, updated_at = now()`,
		k.Kind, k.Namespace, k.Name, int64(m.Sequence), eventID); err != nil {
		return fmt.Errorf("delete %s: %w", k, err)
	}
	if prev == nil || prev.deleted {
		return nil
	}
	r.log.Info("override deleted", "override", k.String())
	return r.overrideChanged(ctx, tx, *prev.override, now)
}

// overrideChanged re-selects the placement an override names, so that a new
// snapshot with the change rolls out; an override for every placement waits
// for each placement's next snapshot.
func (r *rollout) overrideChanged(ctx context.Context, tx pgx.Tx, o api.Override, now time.Time) error {
	if o.Placement == nil {
		return nil
	}
	return r.reselect(ctx, tx, []string{o.PlacementKey()}, now, r.window)
}

func lockOverride(ctx context.Context, tx pgx.Tx, k api.OverrideKey) (*overrideRow, error) {
	var (
		row overrideRow
		raw []byte
	)
	err := tx.QueryRow(ctx, `
		select override, snapshot_index, content_hash, deleted, event_seq from rollout_overrides
		where kind = $1 and namespace = $2 and name = $3 for update`, k.Kind, k.Namespace, k.Name).
		Scan(&raw, &row.index, &row.hash, &row.deleted, &row.seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", k, err)
	}
	if raw != nil {
		row.override = new(api.Override)
		if err := json.Unmarshal(raw, row.override); err != nil {
			return nil, fmt.Errorf("read %s: %w", k, err)
		}
	}
	return &row, nil
}

// liveOverrides reads every live override of a kind.
func liveOverrides(ctx context.Context, tx pgx.Tx, kind string) ([]api.Override, error) {
	rows, err := tx.Query(ctx, `select override from rollout_overrides where kind = $1 and not deleted`, kind)
	if err != nil {
		return nil, fmt.Errorf("read the %ss: %w", kind, err)
	}
	raws, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("read the %ss: %w", kind, err)
	}
	out := make([]api.Override, 0, len(raws))
	for _, raw := range raws {
		var o api.Override
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, fmt.Errorf("read the %ss: %w", kind, err)
		}
		out = append(out, o)
	}
	return out, nil
}

// overridesFor reads the live overrides that may concern a placement: those
// naming it and those naming none. A ResourceOverride names a ResourcePlacement
// by its name alone (scope Namespaced, in the override's namespace), so the
// name without the namespace is asked for too; override.Applicable keeps the
// exact ones.
func overridesFor(ctx context.Context, tx pgx.Tx, placement string) ([]override.Snapshot, error) {
	_, name := api.SplitPlacementKey(placement)
	rows, err := tx.Query(ctx, `
		select override, snapshot_index from rollout_overrides
		where not deleted and (override->'placement' is null or override->'placement'->>'name' in ($1, $2))`, placement, name)
	if err != nil {
		return nil, fmt.Errorf("read the overrides of %s: %w", placement, err)
	}
	defer rows.Close()
	var out []override.Snapshot
	for rows.Next() {
		var (
			raw []byte
			s   override.Snapshot
		)
		if err := rows.Scan(&raw, &s.Index); err != nil {
			return nil, fmt.Errorf("read the overrides of %s: %w", placement, err)
		}
		if err := json.Unmarshal(raw, &s.Override); err != nil {
			return nil, fmt.Errorf("read the overrides of %s: %w", placement, err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// memberLabels reads the labels of the named members, each with
// kubernetes-fleet.io/member-name as every member carries it.
func memberLabels(ctx context.Context, tx pgx.Tx, names []string) (map[string]map[string]string, error) {
	out := make(map[string]map[string]string, len(names))
	for _, n := range names {
		out[n] = map[string]string{api.MemberNameLabel: n}
	}
	rows, err := tx.Query(ctx, `select name, labels from rollout_members where name = any($1) and labels is not null`, names)
	if err != nil {
		return nil, fmt.Errorf("read member labels: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			name   string
			labels map[string]string
		)
		if err := rows.Scan(&name, &labels); err != nil {
			return nil, fmt.Errorf("read member labels: %w", err)
		}
		maps.Copy(out[name], labels)
		out[name][api.MemberNameLabel] = name
	}
	return out, rows.Err()
}
