package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// Staged update strategies, runs (with their status) and approval requests
// are the rollout's: it keeps them in staged_updates, which the status service
// only reads to answer fleetctl get / describe / approve.

func checkStagedKind(kind string) error {
	switch kind {
	case api.ClusterStagedUpdateStrategyKind, api.ClusterStagedUpdateRunKind, api.ClusterApprovalRequestKind:
		return nil
	}
	return badRequest{fmt.Errorf("kind %q is not %s, %s or %s", kind,
		api.ClusterStagedUpdateStrategyKind, api.ClusterStagedUpdateRunKind, api.ClusterApprovalRequestKind)}
}

func (s *server) getStaged(ctx context.Context, q events.StagedUpdateKey) (json.RawMessage, error) {
	if err := checkStagedKind(q.Kind); err != nil {
		return nil, err
	}
	if err := requireName(events.NameQuery{Name: q.Name}); err != nil {
		return nil, err
	}
	var raw json.RawMessage
	err := s.pool.QueryRow(ctx, `select object from staged_updates where kind = $1 and name = $2 and not deleted`,
		q.Kind, q.Name).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s %q %w", q.Kind, q.Name, errNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", q.Kind, q.Name, err)
	}
	return withTypeMeta(q.Kind, raw)
}

// listStaged emits the live objects of the query's kind that match its
// selector, by name, from one snapshot.
func (s *server) listStaged(ctx context.Context, q events.StagedUpdateListQuery, emit func(json.RawMessage) error) error {
	if err := checkStagedKind(q.Kind); err != nil {
		return err
	}
	sel, err := selector(events.ListQuery{LabelSelector: q.LabelSelector})
	if err != nil {
		return err
	}
	const query = `select name, object from staged_updates where kind = $3 and not deleted and name > $1 order by name limit $2`
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
			raw, err := withTypeMeta(q.Kind, raw)
			if err != nil {
				return err
			}
			return emit(raw)
		}, q.Kind)
	})
	if err != nil {
		return fmt.Errorf("list %ss: %w", q.Kind, err)
	}
	return nil
}

// withTypeMeta fills in apiVersion and kind when the stored object lacks them
// (an object applied without, or made by the rollout).
func withTypeMeta(kind string, raw json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("read %s: %w", kind, err)
	}
	if _, ok := m["apiVersion"]; ok {
		return raw, nil
	}
	m["apiVersion"], _ = json.Marshal(api.PlacementGroupVersion.String())
	m["kind"], _ = json.Marshal(kind)
	return json.Marshal(m)
}

// runHistory reads the staged update runs of a placement, oldest first, for
// fleetctl history: which run put which revision on which clusters.
func (s *server) runHistory(ctx context.Context, placement string) ([]events.RunRecord, error) {
	rows, err := s.pool.Query(ctx, `select object, deleted from staged_updates
		where kind = $1 and placement = $2 order by created_seq, name limit 1000`, api.ClusterStagedUpdateRunKind, placement)
	if err != nil {
		return nil, fmt.Errorf("runs of %s: %w", placement, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (events.RunRecord, error) {
		var (
			raw     []byte
			deleted bool
			run     api.ClusterStagedUpdateRun
		)
		if err := row.Scan(&raw, &deleted); err != nil {
			return events.RunRecord{}, err
		}
		if err := json.Unmarshal(raw, &run); err != nil {
			return events.RunRecord{}, fmt.Errorf("run of %s: %w", placement, err)
		}
		return runRecord(&run, deleted), nil
	})
}

func runRecord(run *api.ClusterStagedUpdateRun, deleted bool) events.RunRecord {
	r := events.RunRecord{Name: run.Name, Strategy: run.Spec.StagedUpdateStrategyName, ResourceIndex: run.Status.ResourceSnapshotIndexUsed,
		Deleted: deleted, CreatedAt: run.CreationTimestamp.Time, Outcome: "NotStarted"}
	if r.ResourceIndex == "" {
		r.ResourceIndex = run.Spec.ResourceSnapshotIndex
	}
	for _, st := range run.Status.StagesStatus {
		for _, c := range st.Clusters {
			if meta.IsStatusConditionTrue(c.Conditions, api.ClusterUpdatingConditionSucceeded) {
				r.Clusters = append(r.Clusters, c.ClusterName)
			}
		}
	}
	conds := run.Status.Conditions
	switch succeeded, progressing := meta.FindStatusCondition(conds, api.UpdateRunConditionSucceeded), meta.FindStatusCondition(conds, api.UpdateRunConditionProgressing); {
	case succeeded != nil:
		r.Outcome, r.Message = "Failed", succeeded.Message
		if succeeded.Status == metav1.ConditionTrue {
			r.Outcome = "Succeeded"
		}
		at := succeeded.LastTransitionTime.Time.UTC().Truncate(time.Second)
		r.EndedAt = &at
	case progressing != nil && progressing.Status == metav1.ConditionTrue:
		r.Outcome, r.Message = "Progressing", progressing.Message
	case progressing != nil && run.Spec.State == api.UpdateRunStateStop:
		r.Outcome, r.Message = "Stopped", progressing.Message
	case progressing != nil && run.Spec.State == api.UpdateRunStateRun:
		r.Outcome, r.Message = "Waiting", progressing.Message
	}
	return r
}
