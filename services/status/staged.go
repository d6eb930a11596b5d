package status

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	if api.ClusterStagedKind(kind) != "" {
		return nil
	}
	return badRequest{fmt.Errorf("kind %q is not %s, %s or %s", kind,
		api.ClusterStagedUpdateStrategyKind, api.ClusterStagedUpdateRunKind, api.ClusterApprovalRequestKind)}
}

// A namespaced staged update object (for a ResourcePlacement) is kept under
// its cluster-scoped kind and its key (api.InternalStaged), and shown as the
// user wrote it (api.ExternalStaged).
func (s *server) getStaged(ctx context.Context, q events.StagedUpdateKey) (json.RawMessage, error) {
	if err := checkStagedKind(q.Kind); err != nil {
		return nil, err
	}
	kind := q.Kind
	if cluster := api.ClusterStagedKind(kind); cluster != "" {
		kind = cluster
	}
	raw, err := s.getKept(ctx, "staged_updates", kind, q.Name)
	if err != nil {
		return nil, err
	}
	return externalStaged(kind, raw)
}

// listStaged emits the live objects of the query's kind that match its
// selector, by name, from one snapshot.
func (s *server) listStaged(ctx context.Context, q events.StagedUpdateListQuery, emit func(json.RawMessage) error) error {
	if err := checkStagedKind(q.Kind); err != nil {
		return err
	}
	kind, namespaced := q.Kind, false
	if cluster := api.ClusterStagedKind(q.Kind); cluster != "" {
		kind, namespaced = cluster, true
	}
	return s.listKept(ctx, "staged_updates", kind, q.LabelSelector, func(raw json.RawMessage) error {
		var m struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("read %s: %w", kind, err)
		}
		ns, _ := api.SplitPlacementKey(m.Metadata.Name)
		if namespaced != (ns != "") || (namespaced && q.Namespace != "" && q.Namespace != ns) {
			return nil
		}
		out, err := externalStaged(kind, raw)
		if err != nil {
			return err
		}
		return emit(out)
	})
}

// externalStaged shows a namespaced object (its name a key) as the user wrote it.
func externalStaged(kind string, raw json.RawMessage) (json.RawMessage, error) {
	var obj api.Object
	switch kind {
	case api.ClusterStagedUpdateStrategyKind:
		obj = &api.ClusterStagedUpdateStrategy{}
	case api.ClusterStagedUpdateRunKind:
		obj = &api.ClusterStagedUpdateRun{}
	case api.ClusterApprovalRequestKind:
		obj = &api.ClusterApprovalRequest{}
	default:
		return raw, nil
	}
	if err := json.Unmarshal(raw, obj); err != nil {
		return nil, fmt.Errorf("read %s: %w", kind, err)
	}
	if ns, _ := api.SplitPlacementKey(obj.GetName()); ns == "" {
		return raw, nil
	}
	return json.Marshal(api.ExternalStaged(obj))
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

// runHistory reads a page of the staged update runs of a placement for fleetctl
// history: the newest after skip, at most events.MaxHistoryRuns and about
// events.MaxHistoryRunBytes of them, oldest first, and how many older runs it
// left out.
func (s *server) runHistory(ctx context.Context, placement string, skip int) (runs []events.RunRecord, leftOut int, err error) {
	var total int
	if err := s.pool.QueryRow(ctx, `select count(*) from staged_updates where kind = $1 and placement = $2`,
		api.ClusterStagedUpdateRunKind, placement).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("runs of %s: %w", placement, err)
	}
	rows, err := s.pool.Query(ctx, `select object, deleted from staged_updates
		where kind = $1 and placement = $2 order by created_seq desc, name desc offset $3 limit $4`,
		api.ClusterStagedUpdateRunKind, placement, skip, events.MaxHistoryRuns)
	if err != nil {
		return nil, 0, fmt.Errorf("runs of %s: %w", placement, err)
	}
	defer rows.Close()
	size := 0
	for rows.Next() {
		var (
			raw     []byte
			deleted bool
			run     api.ClusterStagedUpdateRun
		)
		if err := rows.Scan(&raw, &deleted); err != nil {
			return nil, 0, fmt.Errorf("runs of %s: %w", placement, err)
		}
		if err := json.Unmarshal(raw, &run); err != nil {
			return nil, 0, fmt.Errorf("run of %s: %w", placement, err)
		}
		r := runRecord(&run, deleted)
		encoded, err := json.Marshal(r)
		if err != nil {
			return nil, 0, fmt.Errorf("run of %s: %w", placement, err)
		}
		if size += len(encoded); size > events.MaxHistoryRunBytes && len(runs) > 0 {
			break // the page is full: the rest is left out, and counted
		}
		runs = append(runs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("runs of %s: %w", placement, err)
	}
	slices.Reverse(runs)
	return runs, max(0, total-skip-len(runs)), nil
}

func runRecord(run *api.ClusterStagedUpdateRun, deleted bool) events.RunRecord {
	run = api.ExternalStaged(run).(*api.ClusterStagedUpdateRun) // a StagedUpdateRun by its own name
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
