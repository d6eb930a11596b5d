package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// Evictions (with their status) and disruption budgets are the scheduler's:
// it keeps them in disruptions, which the status service only reads to answer
// fleetctl get / describe.

func checkDisruptionKind(kind string) error {
	switch kind {
	case api.ClusterResourcePlacementEvictionKind, api.ClusterResourcePlacementDisruptionBudgetKind:
		return nil
	}
	return badRequest{fmt.Errorf("kind %q is not %s or %s", kind,
		api.ClusterResourcePlacementEvictionKind, api.ClusterResourcePlacementDisruptionBudgetKind)}
}

func (s *server) getDisruption(ctx context.Context, q events.DisruptionKey) (json.RawMessage, error) {
	if err := checkDisruptionKind(q.Kind); err != nil {
		return nil, err
	}
	return s.getKept(ctx, "disruptions", q.Kind, q.Name)
}

// listDisruptions emits the live objects of the query's kind that match its
// selector, by name, from one snapshot.
func (s *server) listDisruptions(ctx context.Context, q events.DisruptionListQuery, emit func(json.RawMessage) error) error {
	if err := checkDisruptionKind(q.Kind); err != nil {
		return err
	}
	return s.listKept(ctx, "disruptions", q.Kind, q.LabelSelector, emit)
}

// getKept returns a live object of kind another service keeps in table (kind, name,
// object, deleted), with its type meta.
func (s *server) getKept(ctx context.Context, table, kind, name string) (json.RawMessage, error) {
	if err := requireName(events.NameQuery{Name: name}); err != nil {
		return nil, err
	}
	var raw json.RawMessage
	err := s.pool.QueryRow(ctx, `select object from `+table+` where kind = $1 and name = $2 and not deleted`,
		kind, name).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s %q %w", kind, name, errNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", kind, name, err)
	}
	return withTypeMeta(kind, raw)
}

// listKept emits the live objects of kind in table (see getKept) that match
// labelSelector, by name, from one snapshot.
func (s *server) listKept(ctx context.Context, table, kind, labelSelector string, emit func(json.RawMessage) error) error {
	sel, err := selector(events.ListQuery{LabelSelector: labelSelector})
	if err != nil {
		return err
	}
	query := `select name, object from ` + table + ` where kind = $3 and not deleted and name > $1 order by name limit $2`
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
			raw, err := withTypeMeta(kind, raw)
			if err != nil {
				return err
			}
			return emit(raw)
		}, kind)
	})
	if err != nil {
		return fmt.Errorf("list %ss: %w", kind, err)
	}
	return nil
}
