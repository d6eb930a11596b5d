package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/platform/outbox"
	"github.com/flotilla-dev/flotilla/services/rollout/override"
	"github.com/flotilla-dev/flotilla/services/rollout/plan"
)

// sendWork enqueues the complete desired state of the placement on a
// cluster. Its id derives from the cluster, placement, snapshot index,
// generation and the cluster's send count, so a retried transaction produces
// the same event while a later re-send (after a tombstone, say) is a new one.
func (ps *pass) sendWork(ctx context.Context, c *clusterRow) error {
	p, latest, key, now := ps.p, ps.latest, ps.keyFor(c.cluster), ps.now
	if ps.manifests == nil {
		var err error
		if ps.manifests, err = loadSnapshotManifests(ctx, ps.tx, ps.r.keys, p.name, latest.index); err != nil {
			return err
		}
	}
	rendered := ps.render(c.cluster)
	if rendered.Err != nil {
		return ps.overridesFailed(ctx, c, rendered)
	}
	spec := p.spec
	c.workSeq++
	id := events.ID("work", c.cluster, p.name, fmt.Sprint(latest.index), fmt.Sprint(p.generation), fmt.Sprint(c.workSeq))
	work := events.WorkDesired{
		Cluster: c.cluster, Placement: p.name, ResourceIndex: latest.index, ResourceHash: latest.hash,
		Generation:               p.generation,
		ApplyStrategy:            *spec.Strategy.ApplyStrategy,
		DeleteStrategy:           *spec.Strategy.DeleteStrategy,
		UnavailablePeriodSeconds: int(unavailablePeriod(spec) / time.Second),
	}
	if err := ps.attachManifests(ctx, c, &work, rendered); err != nil {
		return err
	}
	subject, err := events.WorkSubject(c.cluster, p.name)
	if err != nil {
		return bus.Permanent(err)
	}
	ev, err := events.New(events.TypeWorkDesired, ps.r.env.Source, c.cluster+"/"+p.name, id, work)
	if err != nil {
		return fmt.Errorf("work for %s on %s: %w", p.name, c.cluster, err)
	}
	if err := outbox.Enqueue(ctx, ps.tx, subject, ev); err != nil {
		return err
	}
	if !c.holds() || c.workKey != key {
		// New content: what was reported for the old work says nothing
		// about the new.
		c.report, c.appliedAt, c.keyGeneration = nil, nil, p.generation
	}
	c.sent, c.sentIndex, c.sentGeneration, c.workKey, c.sentAt = sentWork, latest.index, p.generation, key, &now
	c.overrides = rendered.Applied
	ps.r.log.Debug("work sent", "placement", p.name, "cluster", c.cluster, "index", latest.index, "generation", p.generation)
	return saveCluster(ctx, ps.tx, p.name, c)
}

// render applies the latest snapshot's overrides to its manifests for a cluster.
func (ps *pass) render(cluster string) override.Result {
	if len(ps.overrides) == 0 {
		return override.Result{Manifests: ps.manifests}
	}
	return override.Apply(ps.manifests, ps.overrides, ps.cluster(cluster))
}

// overridesFailed records that the overrides could not be applied for a
// cluster: it is sent nothing (what it holds stays, as upstream keeps its
// Work), and counts as moved to the latest snapshot and failed, with the
// reason in its progress, until the overrides or its labels change.
func (ps *pass) overridesFailed(ctx context.Context, c *clusterRow, r override.Result) error {
	p, key, now := ps.p, ps.keyFor(c.cluster), ps.now
	outcome := events.ClusterOverrides{Failed: events.Truncate(r.Err.Error(), events.MaxMessageBytes)}
	if r.Applied != nil {
		outcome.ClusterResourceOverrides, outcome.ResourceOverrides = r.Applied.ClusterResourceOverrides, r.Applied.ResourceOverrides
	}
	if !c.holds() || c.workKey != key {
		c.report, c.appliedAt, c.keyGeneration = nil, nil, p.generation
	}
	c.sent, c.sentIndex, c.sentGeneration, c.workKey, c.sentAt = sentWork, ps.latest.index, p.generation, key, &now
	c.overrides = &outcome
	ps.readiness[c.cluster] = plan.State{Failed: true, Why: "the overrides failed: " + outcome.Failed}
	ps.r.log.Warn("overrides failed: the cluster keeps its work", "placement", p.name, "cluster", c.cluster,
		"index", ps.latest.index, "err", r.Err)
	return saveCluster(ctx, ps.tx, p.name, c)
}

// tombstone enqueues the removal of the placement from a cluster.
func (ps *pass) tombstone(ctx context.Context, c *clusterRow, reason string) error {
	p, now := ps.p, ps.now
	ds := deleteStrategyFor(p.spec, p.deleted, ps.gone, c.cluster)
	c.workSeq++
	id := events.ID("tombstone", c.cluster, p.name, fmt.Sprint(c.workSeq))
	subject, err := events.WorkSubject(c.cluster, p.name)
	if err != nil {
		return bus.Permanent(err)
	}
	ev, err := events.New(events.TypeWorkTombstoned, ps.r.env.Source, c.cluster+"/"+p.name, id, events.WorkTombstoned{
		Cluster: c.cluster, Placement: p.name, DeleteStrategy: ds, Reason: reason,
	})
	if err != nil {
		return fmt.Errorf("tombstone for %s on %s: %w", p.name, c.cluster, err)
	}
	if err := outbox.Enqueue(ctx, ps.tx, subject, ev); err != nil {
		return err
	}
	if err := supersedeBlobs(ctx, ps.tx, c.cluster, p.name, "", now); err != nil {
		return err
	}
	c.sent, c.sentAt, c.report, c.appliedAt, c.ready, c.overrides = sentTombstone, &now, nil, nil, false, nil
	c.targetKey, c.targetSince = "", nil
	ps.r.log.Debug("tombstone sent", "placement", p.name, "cluster", c.cluster, "reason", reason)
	return saveCluster(ctx, ps.tx, p.name, c)
}

// reportProgress enqueues the next revision of the placement's progress
// (RolloutProgressedV2, in pieces) when it differs from the last one: a base
// of every scheduled cluster for the first revision or when the changes are
// not shorter, else the clusters whose entry changed. Piece ids count the
// revisions, so a progress that returns to an earlier state is still new.
func (ps *pass) reportProgress(ctx context.Context, pr progress) error {
	p := ps.p
	raw, err := json.Marshal(pr.head)
	if err != nil {
		return fmt.Errorf("progress of %s: %w", p.name, err)
	}
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:])
	if len(pr.changed) == 0 && p.progressHash != nil && *p.progressHash == hash {
		return nil
	}
	p.progressRevision++
	p.progressHash = &hash
	pieces, err := progressPieces(pr, p.progressRevision)
	if err != nil {
		return bus.Permanent(fmt.Errorf("progress of %s: %w", p.name, err))
	}
	subject, err := events.RolloutSubject(p.name)
	if err != nil {
		return bus.Permanent(err)
	}
	for _, piece := range pieces {
		id := events.ID("rollout-progressed", p.name, fmt.Sprint(piece.Revision), fmt.Sprint(piece.Piece))
		ev, err := events.New(events.TypeRolloutProgressedV2, ps.r.env.Source, p.name, id, piece)
		if err != nil {
			return fmt.Errorf("progress event for %s: %w", p.name, err)
		}
		if err := outbox.Enqueue(ctx, ps.tx, subject, ev); err != nil {
			return err
		}
	}
	return nil
}

// progressPieces cuts revision rev of the progress into pieces: a base of
// every scheduled cluster for the first revision or when the changes are not
// shorter, else the changes.
func progressPieces(pr progress, rev int64) ([]events.RolloutProgressedV2, error) {
	head, clusters := pr.head, pr.changed
	head.Revision, head.ClusterCount = rev, len(pr.all)
	if head.Base = rev == 1 || len(pr.all) <= len(pr.changed); head.Base {
		clusters = pr.all
	}
	return revision.Cut(head, clusters, func(p *events.RolloutProgressedV2, piece, pieces int, cs []events.ClusterProgress) {
		p.Piece, p.Pieces, p.Clusters = piece, pieces, cs
	})
}

// removalReason says why a cluster loses the placement.
func (ps *pass) removalReason(cluster string) string {
	if _, left := ps.gone[cluster]; left {
		return fmt.Sprintf("cluster %s left the fleet", cluster)
	}
	if ps.p.decision != nil {
		if reason := ps.p.decision.RemovalReason(cluster); reason != "" {
			return reason
		}
	}
	return "the cluster is no longer scheduled for the placement"
}

// deleteStrategyFor is the delete strategy of a tombstone: a member that
// left decides by its leave policy (Keep, the default, abandons the objects
// as upstream Fleet does; Delete removes them); a deleted placement by its
// deleteStrategy; a cluster no longer scheduled (or evicted) for a live
// placement loses the objects, as upstream's deleteStrategy applies only to
// the deletion of the placement.
func deleteStrategyFor(spec *api.PlacementSpec, deleted bool, gone map[string]events.LeavePolicy, cluster string) api.DeleteStrategy {
	if policy, left := gone[cluster]; left {
		if policy == events.LeaveDelete {
			return api.DeleteStrategy{PropagationPolicy: api.DeletePropagationPolicyDelete}
		}
		return api.DeleteStrategy{PropagationPolicy: api.DeletePropagationPolicyAbandon}
	}
	if deleted && spec != nil && spec.Strategy.DeleteStrategy != nil && spec.Strategy.DeleteStrategy.PropagationPolicy != "" {
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
