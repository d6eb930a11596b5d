package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/reply"
	"github.com/flotilla-dev/flotilla/services/rollout/override"
	"github.com/flotilla-dev/flotilla/services/rollout/plan"
	"github.com/flotilla-dev/flotilla/services/rollout/selection"
	"github.com/flotilla-dev/flotilla/services/rollout/snapshot"
	"github.com/flotilla-dev/flotilla/services/rollout/stage"
)

// servePreviews answers rollout previews (events.PreviewRolloutSubject) until
// ctx ends: what a placement would select, what each cluster would get after
// overrides and in which order, read in a read-only transaction with the
// same selection, snapshot, override and plan code a pass runs.
func (r *rollout) servePreviews(ctx context.Context) error {
	return reply.Serve(ctx, r.env.NC, events.PreviewRolloutSubject, "rollout", r.log, nil,
		func(ctx context.Context, m *nats.Msg, w io.Writer) error {
			var req events.RolloutPreviewRequest
			if err := json.Unmarshal(m.Data, &req); err != nil {
				return fmt.Errorf("preview request: %w", err)
			}
			return pgx.BeginTxFunc(ctx, r.env.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
				func(tx pgx.Tx) error { return r.preview(ctx, tx, &req, w) })
		})
}

// preview writes the QueryReply of req's RolloutPreview to w, one cluster's
// manifests at a time.
func (r *rollout) preview(ctx context.Context, tx pgx.Tx, req *events.RolloutPreviewRequest, w io.Writer) error {
	crp := req.Placement
	api.SetDefaults(&crp)
	if errs := api.ValidatePlacement(&crp); len(errs) > 0 {
		return fmt.Errorf("placement %s: %w", crp.Name, errs)
	}
	files := make(selection.Objects, 0, len(req.Objects))
	for i, m := range req.Objects {
		o, err := selection.NewObject(m)
		if err != nil {
			return fmt.Errorf("objects[%d]: %w", i, err)
		}
		files = append(files, o)
	}
	objs, err := selection.Select(ctx, crp.Namespace, crp.Spec.ResourceSelectors, overlay{hubStore{tx, r.keys}, files})
	if err != nil {
		return fmt.Errorf("select resources of %s: %w", crp.Name, err)
	}
	content, err := snapshot.Of(objs)
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", crp.Name, err)
	}
	all, err := overridesFor(ctx, tx, crp.Name)
	if err != nil {
		return err
	}
	if all, err = withFileOverrides(crp.Name, all, req.Overrides); err != nil {
		return err
	}
	overrides := override.Applicable(crp.Name, content.Manifests, all)
	clusters := slices.Sorted(slices.Values(req.Clusters))
	labels, err := memberLabels(ctx, tx, clusters)
	if err != nil {
		return err
	}
	pl, err := r.previewPlan(ctx, tx, &crp, clusters, labels)
	if err != nil {
		return err
	}
	head, err := json.Marshal(events.RolloutPreview{Placement: crp.Name, Resources: content.Resources, Plan: pl})
	if err != nil {
		return err
	}
	// {"result":{...,"clusters":[ ... ]}}: the head without its closing brace,
	// then the clusters one by one.
	head = append([]byte(`{"result":`), head[:len(head)-1]...)
	if _, err := w.Write(append(head, `,"clusters":[`...)); err != nil {
		return err
	}
	for i, c := range clusters {
		res := override.Result{Manifests: content.Manifests}
		if len(overrides) > 0 {
			res = override.Apply(content.Manifests, overrides, override.Cluster{Name: c, Labels: labels[c]})
		}
		data, err := json.Marshal(renderOf(c, res, *crp.Spec.Strategy.ApplyStrategy))
		if err != nil {
			return err
		}
		if i > 0 {
			data = append([]byte{','}, data...)
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	_, err = io.WriteString(w, "]}}")
	return err
}

// withFileOverrides lays the file's overrides over the live ones of a
// placement, defaulted and validated as upsertOverride does them: one that
// replaces a live override is its next snapshot (index + 1), a new one its
// first.
func withFileOverrides(placement string, live []override.Snapshot, file []events.OverrideUpserted) ([]override.Snapshot, error) {
	for i := range file {
		obj := file[i].Object()
		if obj == nil {
			return nil, fmt.Errorf("overrides[%d]: no override", i)
		}
		api.Default(obj)
		if errs := api.Validate(obj); len(errs) > 0 {
			return nil, fmt.Errorf("%s: %w", file[i].Key(), errs)
		}
		o, _ := api.OverrideOf(obj)
		if !o.ForPlacement(placement) {
			continue
		}
		next := override.Snapshot{Override: o}
		at := slices.IndexFunc(live, func(s override.Snapshot) bool { return s.Key == o.Key })
		if at < 0 {
			live = append(live, next)
			continue
		}
		next.Index = live[at].Index + 1
		live[at] = next
	}
	return live, nil
}

// renderOf is what one cluster would get.
func renderOf(cluster string, res override.Result, strategy api.ApplyStrategy) events.ClusterRender {
	out := events.ClusterRender{Cluster: cluster, Manifests: res.Manifests, ApplyStrategy: strategy}
	if res.Err != nil {
		out.Error, out.Manifests = res.Err.Error(), nil
	}
	if a := res.Applied; a != nil {
		out.Overrides = append(out.Overrides, a.ClusterResourceOverrides...)
		for _, n := range a.ResourceOverrides {
			out.Overrides = append(out.Overrides, n.Namespace+"/"+n.Name)
		}
	}
	return out
}

// previewPlan is the order the clusters would get the placement in: the
// batches of a rolling update from where the placement stands now (the
// clusters that hold it, assumed available), or the stages of the newest
// staged update run of an External placement.
func (r *rollout) previewPlan(ctx context.Context, tx pgx.Tx, crp *api.ClusterResourcePlacement, clusters []string, labels map[string]map[string]string) (events.RolloutPlan, error) {
	spec := &crp.Spec
	rows, err := loadClusters(ctx, tx, crp.Name)
	if err != nil {
		return events.RolloutPlan{}, err
	}
	if spec.Strategy.Type == api.ExternalRolloutStrategyType {
		return stagedPlan(ctx, tx, crp.Name, clusters, labels)
	}
	var in []plan.Cluster
	for _, c := range clusters {
		row := rows[c]
		holds := row != nil && row.holds()
		in = append(in, plan.Cluster{Name: c, Scheduled: true, Holds: holds, Ready: holds})
	}
	for name, row := range rows {
		if row.holds() && !slices.Contains(clusters, name) {
			in = append(in, plan.Cluster{Name: name, Holds: true, Ready: true})
		}
	}
	s := strategyOf(spec)
	steps, waiting, err := plan.Simulate(plan.Input{Target: target(spec, len(clusters)), Strategy: s, Clusters: in})
	if err != nil {
		return events.RolloutPlan{}, fmt.Errorf("plan of %s: %w", crp.Name, err)
	}
	first, _ := plan.Decide(plan.Input{Target: target(spec, len(clusters)), Strategy: s, Clusters: in})
	return events.RolloutPlan{Type: string(api.RollingUpdateRolloutStrategyType), MaxUnavailable: first.MaxUnavailable,
		MaxSurge: first.MaxSurge, Batches: batchesOf(steps), Waiting: waiting,
		Note: "each batch starts once the clusters of the one before are available; clusters holding the placement now are taken as available"}, nil
}

// batchesOf names the steps batch 1, 2, ...
func batchesOf(steps []plan.Step) []events.RolloutBatch {
	out := make([]events.RolloutBatch, 0, len(steps))
	for i, s := range steps {
		b := events.RolloutBatch{Name: fmt.Sprint(i + 1)}
		for _, set := range []struct {
			names  []string
			action string
		}{{s.Remove, "remove"}, {s.Update, "update"}, {s.Add, "add"}} {
			for _, n := range set.names {
				b.Clusters = append(b.Clusters, events.PlannedAction{Cluster: n, Action: set.action})
			}
		}
		out = append(out, b)
	}
	return out
}

// stagedPlan puts the clusters in the stages of the strategy of the
// placement's newest staged update run.
func stagedPlan(ctx context.Context, tx pgx.Tx, placement string, clusters []string, labels map[string]map[string]string) (events.RolloutPlan, error) {
	out := events.RolloutPlan{Type: string(api.ExternalRolloutStrategyType)}
	var run api.ClusterStagedUpdateRun
	var raw []byte
	err := tx.QueryRow(ctx, `select object from staged_updates where kind = $1 and placement = $2 and not deleted
		order by created_seq desc limit 1`, api.ClusterStagedUpdateRunKind, placement).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		out.Note = "the rollout strategy type is External and no staged update run names the placement: nothing rolls out until one does"
		return out, nil
	}
	if err == nil {
		err = json.Unmarshal(raw, &run)
	}
	var strategy api.ClusterStagedUpdateStrategy
	if err == nil {
		err = tx.QueryRow(ctx, `select object from staged_updates where kind = $1 and name = $2 and not deleted`,
			api.ClusterStagedUpdateStrategyKind, run.Spec.StagedUpdateStrategyName).Scan(&raw)
		if errors.Is(err, pgx.ErrNoRows) {
			out.Note = fmt.Sprintf("staged update run %s names strategy %s, which does not exist", run.Name, run.Spec.StagedUpdateStrategyName)
			return out, nil
		}
	}
	if err == nil {
		err = json.Unmarshal(raw, &strategy)
	}
	if err != nil {
		return out, fmt.Errorf("staged update run of %s: %w", placement, err)
	}
	in := make([]stage.Cluster, len(clusters))
	for i, c := range clusters {
		in[i] = stage.Cluster{Name: c, Labels: labels[c]}
	}
	assigned, err := stage.Assign(strategy.Spec.Stages, in)
	if err != nil {
		out.Note = fmt.Sprintf("staged update run %s cannot run: %v", run.Name, err)
		return out, nil
	}
	for i, names := range assigned {
		b := events.RolloutBatch{Name: strategy.Spec.Stages[i].Name}
		for _, n := range names {
			b.Clusters = append(b.Clusters, events.PlannedAction{Cluster: n, Action: "update"})
		}
		out.Stages = append(out.Stages, b)
	}
	out.Note = fmt.Sprintf("stages of strategy %s, as run %s would go through them", strategy.Name, run.Name)
	return out, nil
}

// overlay is the hub store with a file's objects laid over it: an object in
// both is the file's.
type overlay struct {
	hub   selection.Store
	files selection.Objects
}

func (o overlay) ByKind(ctx context.Context, group, version, kind, name string) ([]selection.Object, error) {
	hub, err := o.hub.ByKind(ctx, group, version, kind, name)
	if err != nil {
		return nil, err
	}
	files, _ := o.files.ByKind(ctx, group, version, kind, name)
	return merged(hub, files), nil
}

func (o overlay) InNamespace(ctx context.Context, namespace string) ([]selection.Object, error) {
	hub, err := o.hub.InNamespace(ctx, namespace)
	if err != nil {
		return nil, err
	}
	files, _ := o.files.InNamespace(ctx, namespace)
	return merged(hub, files), nil
}

// merged is hub without the objects files has, then files.
func merged(hub, files []selection.Object) []selection.Object {
	mine := make(map[string]bool, len(files))
	for _, f := range files {
		mine[selection.Key(f.ID)] = true
	}
	out := slices.DeleteFunc(hub, func(o selection.Object) bool { return mine[selection.Key(o.ID)] })
	return append(out, files...)
}
