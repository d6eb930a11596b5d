package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// Overrides are stored in status_overrides as the user applied them (in the
// version they wrote, defaulted), for fleetctl get. The status service takes
// and refuses the same override events as the rollout: a late event, a
// changed placement, or an override selecting what another of its kind
// selects changes nothing, so `get` shows the overrides in force.

// overridesLock serialises override changes, as in the rollout: the check
// that an object is selected by one override of each kind reads every live
// override of the kind.
const overridesLock = 0x6f76657272696465 // "override"

// storedOverride is a status_overrides row.
type storedOverride struct {
	object  api.Object
	deleted bool
	seq     int64
}

// foldOverride stores an override event.
func (s *server) foldOverride(ctx context.Context, tx pgx.Tx, ev cloudevents.Event, key api.OverrideKey, obj api.Object, seq int64, at time.Time) error {
	if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock($1)`, int64(overridesLock)); err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	prev, err := s.lockOverride(ctx, tx, key)
	if err != nil || (prev != nil && prev.seq >= seq) {
		return err
	}
	if obj == nil {
		_, err := tx.Exec(ctx, `update status_overrides set deleted = true, event_seq = $4, event_id = $5, updated_at = now()
			where kind = $1 and namespace = $2 and name = $3`, key.Kind, key.Namespace, key.Name, seq, ev.ID())
		if err != nil {
			return fmt.Errorf("delete %s: %w", key, err)
		}
		return nil
	}
	api.Default(obj)
	o, _ := api.OverrideOf(obj)
	if refused, err := s.overrideRefused(ctx, tx, o, prev); err != nil || refused {
		return err
	}
	// Created when first stored, or stored again after a deletion.
	created := metav1.NewTime(at.UTC().Truncate(time.Second))
	if prev != nil && !prev.deleted {
		created = prev.object.GetCreationTimestamp()
	}
	obj.SetCreationTimestamp(created)
	raw, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	_, err = tx.Exec(ctx, `
		insert into status_overrides (kind, namespace, name, object, deleted, event_seq, event_id)
		values ($1, $2, $3, $4, false, $5, $6)
		on conflict (kind, namespace, name) do update set object = excluded.object, deleted = false,
			event_seq = excluded.event_seq, event_id = excluded.event_id, updated_at = now()`,
		key.Kind, key.Namespace, key.Name, raw, seq, ev.ID())
	if err != nil {
		return fmt.Errorf("store %s: %w", key, err)
	}
	return nil
}

// overrideRefused applies the rollout's rules: an override may not select
// what another of its kind selects, nor change its placement.
func (s *server) overrideRefused(ctx context.Context, tx pgx.Tx, o api.Override, prev *storedOverride) (bool, error) {
	live, err := liveOverrides(ctx, tx, o.Key.Kind)
	if err != nil {
		return false, err
	}
	if errs := api.OverrideConflicts(o, live); len(errs) > 0 {
		s.log.Warn("override refused", "override", o.Key.String(), "err", errs)
		return true, nil
	}
	if prev != nil && !prev.deleted {
		old, _ := api.OverrideOf(prev.object)
		if errs := api.ValidateOverrideUpdate(old, o); len(errs) > 0 {
			s.log.Warn("override update refused", "override", o.Key.String(), "err", errs)
			return true, nil
		}
	}
	return false, nil
}

func (s *server) lockOverride(ctx context.Context, tx pgx.Tx, k api.OverrideKey) (*storedOverride, error) {
	var (
		row storedOverride
		raw []byte
	)
	err := tx.QueryRow(ctx, `select object, deleted, event_seq from status_overrides
		where kind = $1 and namespace = $2 and name = $3 for update`, k.Kind, k.Namespace, k.Name).Scan(&raw, &row.deleted, &row.seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", k, err)
	}
	if row.object, err = overrideObject(k.Kind, raw); err != nil {
		return nil, fmt.Errorf("read %s: %w", k, err)
	}
	return &row, nil
}

// liveOverrides reads every live override of a kind.
func liveOverrides(ctx context.Context, tx pgx.Tx, kind string) ([]api.Override, error) {
	rows, err := tx.Query(ctx, `select object from status_overrides where kind = $1 and not deleted`, kind)
	if err != nil {
		return nil, fmt.Errorf("read the %ss: %w", kind, err)
	}
	raws, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, fmt.Errorf("read the %ss: %w", kind, err)
	}
	out := make([]api.Override, 0, len(raws))
	for _, raw := range raws {
		obj, err := overrideObject(kind, raw)
		if err != nil {
			return nil, fmt.Errorf("read the %ss: %w", kind, err)
		}
		o, _ := api.OverrideOf(obj)
		out = append(out, o)
	}
	return out, nil
}

// overrideObject decodes a stored override of a kind.
func overrideObject(kind string, raw []byte) (api.Object, error) {
	var obj api.Object
	switch kind {
	case api.ClusterResourceOverrideKind:
		obj = &api.ClusterResourceOverride{}
	case api.ResourceOverrideKind:
		obj = &api.ResourceOverride{}
	default:
		return nil, fmt.Errorf("unknown override kind %q", kind)
	}
	if err := json.Unmarshal(raw, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// Queries.

// checkOverrideKind refuses a query for a kind that is not an override's.
func checkOverrideKind(kind string) error {
	if kind != api.ClusterResourceOverrideKind && kind != api.ResourceOverrideKind {
		return badRequest{fmt.Errorf("kind %q is not %s or %s", kind, api.ClusterResourceOverrideKind, api.ResourceOverrideKind)}
	}
	return nil
}

func (s *server) getOverride(ctx context.Context, q events.OverrideQuery) (json.RawMessage, error) {
	if err := checkOverrideKind(q.Kind); err != nil {
		return nil, err
	}
	if err := requireName(events.NameQuery{Name: q.Name}); err != nil {
		return nil, err
	}
	var raw json.RawMessage
	err := s.pool.QueryRow(ctx, `select object from status_overrides where kind = $1 and namespace = $2 and name = $3 and not deleted`,
		q.Kind, q.Namespace, q.Name).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s %q %w", q.Kind, namespaced(q.Namespace, q.Name), errNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", q.Kind, namespaced(q.Namespace, q.Name), err)
	}
	return raw, nil
}

// listOverrides emits the live overrides of the query's kind (and namespace)
// that match its selector, by namespace and name, from one snapshot.
func (s *server) listOverrides(ctx context.Context, q events.OverrideListQuery, emit func(json.RawMessage) error) error {
	if err := checkOverrideKind(q.Kind); err != nil {
		return err
	}
	sel, err := selector(events.ListQuery{LabelSelector: q.LabelSelector})
	if err != nil {
		return err
	}
	const query = `select namespace || '/' || name as k, object from status_overrides
		where kind = $3 and not deleted and ($4 = '' or namespace = $4) and namespace || '/' || name > $1
		order by k limit $2`
	err = s.snapshot(ctx, func(tx pgx.Tx) error {
		return keyset(ctx, tx, query, memberPage, scanOverride, func(raw json.RawMessage) error {
			var meta struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(raw, &meta); err != nil || !sel.Matches(labels.Set(meta.Metadata.Labels)) {
				return err
			}
			return emit(raw)
		}, q.Kind, q.Namespace)
	})
	if err != nil {
		return fmt.Errorf("list %ss: %w", q.Kind, err)
	}
	return nil
}

func scanOverride(row pgx.CollectableRow) (keyed[json.RawMessage], error) {
	var k keyed[json.RawMessage]
	err := row.Scan(&k.key, &k.item)
	return k, err
}

func namespaced(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
