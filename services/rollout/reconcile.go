package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/outbox"
	"github.com/flotilla-dev/flotilla/services/rollout/plan"
	"github.com/flotilla-dev/flotilla/services/rollout/selection"
	"github.com/flotilla-dev/flotilla/services/rollout/snapshot"
)

// startedMessage is the message of a cluster whose rollout started (upstream
// Fleet's wording).
const startedMessage = "Detected the new changes on the resources and started the rollout process"

// reconcile brings one placement (its row locked by tx) forward: evaluates
// its selection when the coalescing window ended, cuts a snapshot when the
// content changed, plans the rollout, sends work and tombstones, reports
// progress when it changed and sets the next timer.
func (r *rollout) reconcile(ctx context.Context, tx pgx.Tx, p *placementRow, now time.Time) error {
	clusters, err := loadClusters(ctx, tx, p.name)
	if err != nil {
		return err
	}
	gone, err := leftMembers(ctx, tx)
	if err != nil {
		return err
	}
	if p.deleted || p.spec == nil {
		if p.deleted {
			for _, name := range sortedKeys(clusters) {
				c := clusters[name]
				if !c.holds() {
					continue
				}
				if err := r.tombstone(ctx, tx, p, c, deleteStrategyFor(p.spec, gone, c.cluster), "the placement was deleted", now); err != nil {
					return err
				}
			}
		}
		p.snapshotDueAt, p.windowOpenedAt, p.wakeAt = nil, nil, nil
		return savePlacement(ctx, tx, p)
	}
	spec := p.spec

	if p.snapshotDueAt != nil && !now.Before(*p.snapshotDueAt) {
		if err := r.evaluateSelection(ctx, tx, p, now); err != nil {
			return err
		}
		p.snapshotDueAt, p.windowOpenedAt = nil, nil
	}
	latest, err := loadLatestSnapshot(ctx, tx, p.name)
	if err != nil {
		return err
	}

	scheduled := map[string]bool{}
	if p.decision != nil {
		for _, c := range p.decision.Chosen {
			scheduled[c.Cluster] = true
		}
	}
	names := map[string]bool{}
	for n := range scheduled {
		names[n] = true
	}
	for n, c := range clusters {
		if c.holds() {
			names[n] = true
		}
	}
	for n := range names {
		if clusters[n] == nil {
			clusters[n] = &clusterRow{cluster: n}
		}
	}

	period := unavailablePeriod(spec)
	reportDiff := spec.Strategy.ApplyStrategy != nil && spec.Strategy.ApplyStrategy.Type == api.ApplyStrategyTypeReportDiff
	var key string
	if latest != nil {
		key = workKey(latest.index, spec)
	}
	readiness := map[string]plan.State{}
	for n := range names {
		c := clusters[n]
		if c.holds() {
			readiness[n] = plan.Readiness(c.report, reportDiff, deref(c.appliedAt), period, now)
		}
	}

	// Plan and act, once there is something to roll out.
	var pl plan.Plan
	if latest != nil {
		in := plan.Input{Target: target(spec, len(scheduled)), Strategy: strategyOf(spec)}
		for _, n := range sortedKeys(names) {
			c := clusters[n]
			st := readiness[n]
			_, left := gone[n]
			in.Clusters = append(in.Clusters, plan.Cluster{
				Name: n, Scheduled: scheduled[n], Holds: c.holds(), Current: c.holds() && c.workKey == key,
				Ready: st.Ready, Failed: st.Failed, Gone: left,
			})
		}
		pl, err = plan.Decide(in)
		if err != nil {
			return bus.Permanent(fmt.Errorf("placement %s: %w", p.name, err))
		}
		for _, n := range pl.Remove {
			if err := r.tombstone(ctx, tx, p, clusters[n], deleteStrategyFor(spec, gone, n), r.removalReason(p, gone, n), now); err != nil {
				return err
			}
		}
		var manifests []json.RawMessage
		send := append(slices.Clone(pl.Update), pl.Add...)
		if len(send) > 0 {
			if manifests, err = loadSnapshotManifests(ctx, tx, p.name, latest.index); err != nil {
				return err
			}
		}
		for _, n := range send {
			if err := r.sendWork(ctx, tx, p, clusters[n], latest, key, manifests, now); err != nil {
				return err
			}
			readiness[n] = plan.Readiness(nil, reportDiff, time.Time{}, period, now)
		}
		// A new generation that leaves the work unchanged (a policy edit,
		// say) reaches the holders at once: nothing on them changes.
		if !in.Strategy.External {
			for _, n := range sortedKeys(names) {
				c := clusters[n]
				if scheduled[n] && c.holds() && c.workKey == key && c.sentGeneration != p.generation {
					if manifests == nil {
						if manifests, err = loadSnapshotManifests(ctx, tx, p.name, latest.index); err != nil {
							return err
						}
					}
					if err := r.sendWork(ctx, tx, p, c, latest, key, manifests, now); err != nil {
						return err
					}
				}
			}
		}
	}

	// Progress of the scheduled clusters, stuck detection and the next timer.
	progress := events.RolloutProgressed{Placement: p.name, Generation: p.generation, Clusters: []events.ClusterRollout{}}
	if latest != nil {
		progress.ResourceIndex = latest.index
	}
	if p.selectionError != nil {
		progress.Reason, progress.Message = api.InvalidResourceSelectorsReason, *p.selectionError
	}
	var wake *time.Time
	later := func(t time.Time) {
		if wake == nil || t.Before(*wake) {
			wake = &t
		}
	}
	for _, n := range sortedKeys(scheduled) {
		c := clusters[n]
		current := latest != nil && c.holds() && c.workKey == key
		st := readiness[n]
		done := current && st.Ready
		if latest != nil && c.targetKey != key {
			c.targetKey, c.targetSince = key, &now
		} else if c.targetSince == nil || (c.ready && !done) {
			// First seen, or ready before and not any more: the deadline
			// runs from now.
			c.targetSince = &now
		}
		c.ready = done

		cr := events.ClusterRollout{Cluster: n, Started: current}
		if c.holds() {
			cr.ResourceIndex = c.sentIndex
		}
		why := st.Why
		switch {
		case current:
			cr.Reason, cr.Message = api.RolloutStartedReason, startedMessage
		case latest == nil:
			cr.Reason, why = api.RolloutNotStartedYetReason, "waiting for the first resource snapshot of the placement"
			cr.Message = why
		default:
			cr.Reason, why = api.RolloutNotStartedYetReason, pl.Waiting[n]
			if why == "" {
				why = "waiting for the rollout to reach the cluster"
			}
			cr.Message = why
		}
		if !done {
			deadline := c.targetSince.Add(r.stuckAfter)
			if !now.Before(deadline) {
				cr.Stuck = true
				cr.Message = fmt.Sprintf("The rollout on cluster %s is stuck: not applied and available within %s: %s", n, r.stuckAfter, why)
			} else {
				later(deadline)
			}
			if !st.ReadyAt.IsZero() {
				later(st.ReadyAt)
			}
		}
		if p.selectionError != nil {
			cr.Reason, cr.Message = api.InvalidResourceSelectorsReason, *p.selectionError
		}
		progress.Clusters = append(progress.Clusters, cr)
		if err := saveCluster(ctx, tx, p.name, c); err != nil {
			return err
		}
	}
	// Removals waiting for budget are re-planned when a report arrives;
	// a not-trackable holder being removed may become ready by the clock.
	for _, n := range sortedKeys(names) {
		if st := readiness[n]; !scheduled[n] && !st.ReadyAt.IsZero() {
			later(st.ReadyAt)
		}
	}
	p.wakeAt = wake
	if err := r.reportProgress(ctx, tx, p, progress); err != nil {
		return err
	}
	return savePlacement(ctx, tx, p)
}

// evaluateSelection selects the placement's resources and cuts a snapshot
// when their content differs from the latest one.
func (r *rollout) evaluateSelection(ctx context.Context, tx pgx.Tx, p *placementRow, now time.Time) error {
	objs, err := selection.Select(ctx, p.spec.ResourceSelectors, hubStore{tx})
	var invalid *selection.InvalidError
	if errors.As(err, &invalid) {
		msg := invalid.Error()
		p.selectionError = &msg
		return nil
	}
	if err != nil {
		return fmt.Errorf("select resources of %s: %w", p.name, err)
	}
	p.selectionError = nil
	content, err := snapshot.Of(objs)
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", p.name, err)
	}
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
	if _, err := tx.Exec(ctx, `
		insert into resource_snapshots (placement, snapshot_index, content_hash, manifests, selected_resources, generation, event_id, created_at)
		values ($1, $2, $3, $4, $5, $6, $7, $8)`,
		p.name, index, content.Hash, content.Manifests, resources, p.generation, id, now); err != nil {
		return fmt.Errorf("store snapshot %d of %s: %w", index, p.name, err)
	}
	if err := pruneSnapshots(ctx, tx, p, now); err != nil {
		return err
	}
	subject, err := events.RolloutSubject(p.name)
	if err != nil {
		return bus.Permanent(err)
	}
	ev, err := events.New(events.TypeSnapshotCreated, r.env.Source, p.name, id, events.SnapshotCreated{
		Placement: p.name, Index: index, Hash: content.Hash, SelectedResources: content.Resources,
	})
	if err != nil {
		return fmt.Errorf("snapshot event for %s: %w", p.name, err)
	}
	r.log.Info("resource snapshot cut", "placement", p.name, "index", index, "hash", content.Hash, "resources", len(content.Resources))
	return outbox.Enqueue(ctx, tx, subject, ev)
}

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

// sendWork enqueues the complete desired state of the placement on a
// cluster. Its id derives from the cluster, placement, snapshot index,
// generation and the cluster's send count, so a retried transaction produces
// the same event while a later re-send (after a tombstone, say) is a new one.
func (r *rollout) sendWork(ctx context.Context, tx pgx.Tx, p *placementRow, c *clusterRow, latest *latestSnapshot, key string,
	manifests []json.RawMessage, now time.Time) error {
	spec := p.spec
	c.workSeq++
	id := events.ID("work", c.cluster, p.name, fmt.Sprint(latest.index), fmt.Sprint(p.generation), fmt.Sprint(c.workSeq))
	work := events.WorkDesired{
		Cluster: c.cluster, Placement: p.name, ResourceIndex: latest.index, ResourceHash: latest.hash,
		Generation: p.generation, Manifests: manifests,
		ApplyStrategy:            *spec.Strategy.ApplyStrategy,
		DeleteStrategy:           *spec.Strategy.DeleteStrategy,
		UnavailablePeriodSeconds: int(unavailablePeriod(spec) / time.Second),
	}
	if work.Manifests == nil {
		work.Manifests = []json.RawMessage{}
	}
	subject, err := events.WorkSubject(c.cluster, p.name)
	if err != nil {
		return bus.Permanent(err)
	}
	ev, err := events.New(events.TypeWorkDesired, r.env.Source, c.cluster+"/"+p.name, id, work)
	if err != nil {
		return fmt.Errorf("work for %s on %s: %w", p.name, c.cluster, err)
	}
	if err := outbox.Enqueue(ctx, tx, subject, ev); err != nil {
		return err
	}
	if !c.holds() || c.workKey != key {
		// New content: what was reported for the old work says nothing
		// about the new.
		c.report, c.appliedAt, c.keyGeneration = nil, nil, p.generation
	}
	c.sent, c.sentIndex, c.sentGeneration, c.workKey, c.sentAt = sentWork, latest.index, p.generation, key, &now
	r.log.Debug("work sent", "placement", p.name, "cluster", c.cluster, "index", latest.index, "generation", p.generation)
	return saveCluster(ctx, tx, p.name, c)
}

// tombstone enqueues the removal of the placement from a cluster.
func (r *rollout) tombstone(ctx context.Context, tx pgx.Tx, p *placementRow, c *clusterRow, ds api.DeleteStrategy, reason string, now time.Time) error {
	c.workSeq++
	id := events.ID("tombstone", c.cluster, p.name, fmt.Sprint(c.workSeq))
	subject, err := events.WorkSubject(c.cluster, p.name)
	if err != nil {
		return bus.Permanent(err)
	}
	ev, err := events.New(events.TypeWorkTombstoned, r.env.Source, c.cluster+"/"+p.name, id, events.WorkTombstoned{
		Cluster: c.cluster, Placement: p.name, DeleteStrategy: ds, Reason: reason,
	})
	if err != nil {
		return fmt.Errorf("tombstone for %s on %s: %w", p.name, c.cluster, err)
	}
	if err := outbox.Enqueue(ctx, tx, subject, ev); err != nil {
		return err
	}
	c.sent, c.sentAt, c.report, c.appliedAt, c.ready = sentTombstone, &now, nil, nil, false
	c.targetKey, c.targetSince = "", nil
	r.log.Debug("tombstone sent", "placement", p.name, "cluster", c.cluster, "reason", reason)
	return saveCluster(ctx, tx, p.name, c)
}

// reportProgress enqueues RolloutProgressed when it differs from the last
// one reported. Its id counts the reports, so a progress that returns to an
// earlier state is still a new event.
func (r *rollout) reportProgress(ctx context.Context, tx pgx.Tx, p *placementRow, progress events.RolloutProgressed) error {
	raw, err := json.Marshal(progress)
	if err != nil {
		return fmt.Errorf("progress of %s: %w", p.name, err)
	}
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:])
	if p.progressHash != nil && *p.progressHash == hash {
		return nil
	}
	p.progressSeq++
	p.progressHash = &hash
	subject, err := events.RolloutSubject(p.name)
	if err != nil {
		return bus.Permanent(err)
	}
	id := events.ID("rollout-progressed", p.name, fmt.Sprint(p.progressSeq))
	ev, err := events.New(events.TypeRolloutProgressed, r.env.Source, p.name, id, progress)
	if err != nil {
		return fmt.Errorf("progress event for %s: %w", p.name, err)
	}
	return outbox.Enqueue(ctx, tx, subject, ev)
}

// removalReason says why a cluster loses the placement.
func (r *rollout) removalReason(p *placementRow, gone map[string]events.LeavePolicy, cluster string) string {
	if _, left := gone[cluster]; left {
		return fmt.Sprintf("cluster %s left the fleet", cluster)
	}
	if p.decision != nil {
		for _, d := range p.decision.Removed {
			if d.Cluster == cluster && d.Reason != "" {
				return d.Reason
			}
		}
	}
	return "the cluster is no longer scheduled for the placement"
}

// deleteStrategyFor is the delete strategy of a tombstone: a member that
// left decides by its leave policy (Keep, the default, abandons the objects
// as upstream Fleet does; Delete removes them); otherwise the placement's.
func deleteStrategyFor(spec *api.PlacementSpec, gone map[string]events.LeavePolicy, cluster string) api.DeleteStrategy {
	if policy, left := gone[cluster]; left {
		if policy == events.LeaveDelete {
			return api.DeleteStrategy{PropagationPolicy: api.DeletePropagationPolicyDelete}
		}
		return api.DeleteStrategy{PropagationPolicy: api.DeletePropagationPolicyAbandon}
	}
	if spec != nil && spec.Strategy.DeleteStrategy != nil && spec.Strategy.DeleteStrategy.PropagationPolicy != "" {
		return *spec.Strategy.DeleteStrategy
	}
	return api.DeleteStrategy{PropagationPolicy: api.DeletePropagationPolicyDelete}
}

// workKey identifies what a WorkDesired carries apart from the generation:
// a cluster holding work with the same key needs no update.
func workKey(index int64, spec *api.PlacementSpec) string {
	raw, _ := json.Marshal(struct {
		Index  int64               `json:"index"`
		Apply  *api.ApplyStrategy  `json:"apply"`
		Delete *api.DeleteStrategy `json:"delete"`
		Period time.Duration       `json:"period"`
	}{index, spec.Strategy.ApplyStrategy, spec.Strategy.DeleteStrategy, unavailablePeriod(spec)})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:16])
}

// target is the contract's desired number of clusters.
func target(spec *api.PlacementSpec, scheduled int) int {
	switch spec.EffectivePlacementType() {
	case api.PickFixedPlacementType:
		return len(spec.Policy.ClusterNames)
	case api.PickNPlacementType:
		if spec.Policy.NumberOfClusters != nil {
			return int(*spec.Policy.NumberOfClusters)
		}
	}
	return scheduled
}

func strategyOf(spec *api.PlacementSpec) plan.Strategy {
	s := plan.Strategy{
		External:       spec.Strategy.Type == api.ExternalRolloutStrategyType,
		MaxUnavailable: intstr.FromString(api.DefaultMaxUnavailable),
		MaxSurge:       intstr.FromString(api.DefaultMaxSurge),
	}
	if ru := spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxUnavailable != nil {
			s.MaxUnavailable = *ru.MaxUnavailable
		}
		if ru.MaxSurge != nil {
			s.MaxSurge = *ru.MaxSurge
		}
	}
	return s
}

func unavailablePeriod(spec *api.PlacementSpec) time.Duration {
	seconds := api.DefaultUnavailablePeriodSeconds
	if ru := spec.Strategy.RollingUpdate; ru != nil && ru.UnavailablePeriodSeconds != nil {
		seconds = *ru.UnavailablePeriodSeconds
	}
	return time.Duration(seconds) * time.Second
}

func deref(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
