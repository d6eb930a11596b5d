package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/rollout/override"
	"github.com/flotilla-dev/flotilla/services/rollout/plan"
)

// startedMessage is the message of a cluster whose rollout started (upstream
// Fleet's wording).
const startedMessage = "Detected the new changes on the resources and started the rollout process"

// reconcile brings one placement (its row locked by tx) forward: evaluates
// its selection when the coalescing window ended, cuts a snapshot when the
// content changed, plans the rollout, sends work and tombstones, reports
// progress when it changed and sets the next timer.
func (r *rollout) reconcile(ctx context.Context, tx pgx.Tx, p *placementRow, now time.Time) error {
	r.traces.remember(ctx, p.name)
	ps := &pass{r: r, tx: tx, p: p, now: now}
	if err := ps.load(ctx); err != nil {
		return err
	}
	if p.deleted || p.spec == nil {
		return ps.retire(ctx)
	}
	if err := ps.catchUpSnapshot(ctx); err != nil {
		return err
	}
	ps.involve()
	if err := ps.stagedTarget(ctx); err != nil {
		return err
	}
	if err := ps.assess(ctx); err != nil {
		return err
	}
	if err := ps.advanceRun(ctx); err != nil {
		return err
	}
	// Plan and act, once there is something to roll out.
	if ps.latest != nil {
		if err := ps.roll(ctx); err != nil {
			return err
		}
	}
	progress, err := ps.track(ctx)
	if err != nil {
		return err
	}
	ps.wakeForRemovals()
	p.wakeAt = ps.wake
	if err := ps.reportProgress(ctx, progress); err != nil {
		return err
	}
	return savePlacement(ctx, tx, p)
}

// pass is one reconcile of a placement: the transaction holding its row, the
// time the pass runs at, and what each phase learns for the next.
type pass struct {
	r   *rollout
	tx  pgx.Tx
	p   *placementRow
	now time.Time

	clusters map[string]*clusterRow        // by name; involve adds the newly scheduled
	loaded   map[string]clusterRow         // the rows as load read them (track saves only those that changed)
	gone     map[string]events.LeavePolicy // members that left the fleet
	latest   *latestSnapshot               // nil until the first snapshot is cut
	key      string                        // work key of latest under the current spec (see keyFor)

	// overrides are those latest applies, and labels the labels of the
	// involved clusters when there are overrides (their rules read them).
	overrides []override.Snapshot
	labels    map[string]map[string]string

	scheduled  map[string]bool // chosen by the scheduler's decision
	names      map[string]bool // scheduled or holding work
	readiness  map[string]plan.State
	reportDiff bool
	period     time.Duration

	// run is the staged update run driving the placement (nil when none),
	// released the clusters it lets have its snapshot now, and runWhy what
	// it waits for.
	run      *stagedRun
	released map[string]bool
	runWhy   string

	decided   plan.Plan
	manifests []json.RawMessage // of latest; loaded by the first send
	encoded   []byte            // manifests as one JSON array, encoded by the first send
	secret    bool              // the manifests hold a Secret value: they travel as a blob
	wake      *time.Time        // the earliest time the placement needs another look
}

// load reads the placement's cluster rows and the members that left.
func (ps *pass) load(ctx context.Context) error {
	var err error
	if ps.clusters, err = loadClusters(ctx, ps.tx, ps.p.name); err != nil {
		return err
	}
	ps.loaded = make(map[string]clusterRow, len(ps.clusters))
	for n, c := range ps.clusters {
		ps.loaded[n] = *c
	}
	ps.gone, err = leftMembers(ctx, ps.tx)
	return err
}

// retire ends a placement that was deleted, tombstoning its holders, or
// whose spec has not arrived: either way it needs no timer.
func (ps *pass) retire(ctx context.Context) error {
	if ps.p.deleted {
		for _, name := range sortedKeys(ps.clusters) {
			c := ps.clusters[name]
			if !c.holds() {
				continue
			}
			if err := ps.tombstone(ctx, c, "the placement was deleted"); err != nil {
				return err
			}
		}
	}
	ps.p.snapshotDueAt, ps.p.windowOpenedAt, ps.p.wakeAt = nil, nil, nil
	return savePlacement(ctx, ps.tx, ps.p)
}

// catchUpSnapshot evaluates the selection when the coalescing window ended
// and reads the latest snapshot.
func (ps *pass) catchUpSnapshot(ctx context.Context) error {
	p := ps.p
	if p.snapshotDueAt != nil && !ps.now.Before(*p.snapshotDueAt) {
		// Closed before the evaluation, which may open a window again.
		p.snapshotDueAt, p.windowOpenedAt = nil, nil
		if err := ps.evaluateSelection(ctx); err != nil {
			return err
		}
	}
	var err error
	ps.latest, err = loadLatestSnapshot(ctx, ps.tx, p.name)
	return err
}

// involve gathers the clusters the pass looks at: the scheduled ones and
// those holding work, with a fresh row for each newly scheduled one.
func (ps *pass) involve() {
	ps.scheduled = map[string]bool{}
	if ps.p.decision != nil {
		for _, c := range ps.p.decision.Chosen {
			ps.scheduled[c.Cluster] = true
		}
	}
	ps.names = map[string]bool{}
	for n := range ps.scheduled {
		ps.names[n] = true
	}
	for n, c := range ps.clusters {
		if c.holds() {
			ps.names[n] = true
		}
	}
	for n := range ps.names {
		if ps.clusters[n] == nil {
			ps.clusters[n] = &clusterRow{cluster: n}
		}
	}
}

// assess reads the overrides of the latest snapshot and the labels they
// need, and judges the readiness of each holder from its last report (or its
// overrides' failure).
func (ps *pass) assess(ctx context.Context) error {
	spec := ps.p.spec
	ps.period = unavailablePeriod(spec)
	ps.reportDiff = spec.Strategy.ApplyStrategy != nil && spec.Strategy.ApplyStrategy.Type == api.ApplyStrategyTypeReportDiff
	if ps.latest != nil {
		ps.key = workKey(ps.latest.index, spec)
		var err error
		if ps.overrides, err = loadSnapshotOverrides(ctx, ps.tx, ps.p.name, ps.latest.index); err != nil {
			return err
		}
		if len(ps.overrides) > 0 {
			if ps.labels, err = memberLabels(ctx, ps.tx, sortedKeys(ps.names)); err != nil {
				return err
			}
		}
	}
	ps.readiness = map[string]plan.State{}
	for n := range ps.names {
		c := ps.clusters[n]
		switch {
		case c.holds() && c.overrides != nil && c.overrides.Failed != "" && c.workKey == ps.keyFor(n):
			ps.readiness[n] = plan.State{Failed: true, Why: "the overrides failed: " + c.overrides.Failed}
		case c.holds():
			ps.readiness[n] = plan.Readiness(c.report, ps.reportDiff, deref(c.appliedAt), ps.period, ps.now)
		}
	}
	return nil
}

// keyFor is the work key of the latest snapshot on a cluster: the
// placement's key, and what of the cluster its overrides depend on
// (override.View), so that a cluster whose labels change what the overrides
// make of its manifests is sent them again.
func (ps *pass) keyFor(cluster string) string {
	if len(ps.overrides) == 0 {
		return ps.key
	}
	sum := sha256.Sum256([]byte(ps.key + "\x00" + override.View(ps.overrides, ps.cluster(cluster))))
	return hex.EncodeToString(sum[:16])
}

// cluster is what override rules see of a cluster.
func (ps *pass) cluster(name string) override.Cluster {
	labels := ps.labels[name]
	if labels == nil {
		labels = map[string]string{api.MemberNameLabel: name}
	}
	return override.Cluster{Name: name, Labels: labels}
}

// roll plans the rollout of the latest snapshot and carries the plan out:
// tombstones to the removed clusters, work to the updated and added ones.
func (ps *pass) roll(ctx context.Context) error {
	spec := ps.p.spec
	in := plan.Input{Target: target(spec, len(ps.scheduled)), Strategy: strategyOf(spec)}
	in.Strategy.Released = ps.released
	for _, n := range sortedKeys(ps.names) {
		c := ps.clusters[n]
		st := ps.readiness[n]
		_, left := ps.gone[n]
		in.Clusters = append(in.Clusters, plan.Cluster{
			Name: n, Scheduled: ps.scheduled[n], Holds: c.holds(), Current: c.holds() && c.workKey == ps.keyFor(n),
			Ready: st.Ready, Failed: st.Failed, Gone: left, Release: ps.release(n),
		})
	}
	var err error
	if ps.decided, err = plan.Decide(in); err != nil {
		return bus.Permanent(fmt.Errorf("placement %s: %w", ps.p.name, err))
	}
	if ps.runWhy != "" {
		// Say which run holds an External placement's clusters back.
		for n, why := range ps.decided.Waiting {
			if why == plan.ExternalMessage {
				ps.decided.Waiting[n] = ps.runWhy
			}
		}
	}
	for _, n := range ps.decided.Remove {
		if err := ps.tombstone(ctx, ps.clusters[n], ps.removalReason(n)); err != nil {
			return err
		}
	}
	for _, n := range append(slices.Clone(ps.decided.Update), ps.decided.Add...) {
		c := ps.clusters[n]
		if err := ps.sendWork(ctx, c); err != nil {
			return err
		}
		if c.overrides == nil || c.overrides.Failed == "" {
			ps.readiness[n] = plan.Readiness(nil, ps.reportDiff, time.Time{}, ps.period, ps.now)
		}
	}
	if in.Strategy.External {
		return nil
	}
	return ps.refreshGeneration(ctx)
}

// refreshGeneration sends a new generation that leaves the work unchanged (a
// policy edit, say) to the holders at once: nothing on them changes.
func (ps *pass) refreshGeneration(ctx context.Context) error {
	for _, n := range sortedKeys(ps.names) {
		c := ps.clusters[n]
		if ps.scheduled[n] && c.holds() && c.workKey == ps.keyFor(n) && c.sentGeneration != ps.p.generation {
			if err := ps.sendWork(ctx, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// progress is what a pass learned of the rollout's progress: the
// placement-wide fields, the entry of every scheduled cluster, and the
// entries that changed since the progress last emitted (with a removal for
// each cluster that left it), in name order.
type progress struct {
	head    events.RolloutProgressedV2
	all     []events.ClusterProgress
	changed []events.ClusterProgress
}

// track reports the progress of the scheduled clusters, detects the stuck
// ones and saves their rows, with the entry each has in the progress.
func (ps *pass) track(ctx context.Context) (progress, error) {
	p := ps.p
	pr := progress{head: events.RolloutProgressedV2{Placement: p.name, Generation: p.generation}}
	if ps.latest != nil {
		pr.head.ResourceIndex = ps.latest.index
	}
	if p.selectionError != nil {
		pr.head.Reason = api.InvalidResourceSelectorsReason
		pr.head.Message = events.Truncate(*p.selectionError, events.MaxMessageBytes)
	}
	for _, n := range sortedKeys(ps.clusters) {
		c := ps.clusters[n]
		var entry *events.ClusterProgress
		if ps.scheduled[n] {
			cr := ps.clusterRollout(c)
			e := events.ClusterProgress{Cluster: n, Started: cr.Started, ResourceIndex: cr.ResourceIndex, Reason: cr.Reason,
				Message: events.Truncate(cr.Message, events.MaxMessageBytes), Stuck: cr.Stuck, Overrides: cr.Overrides}
			pr.all = append(pr.all, e)
			entry = &e
		}
		switch {
		case entry != nil && (c.reported == nil || !c.reported.Equal(*entry)):
			pr.changed = append(pr.changed, *entry)
		case entry == nil && c.reported != nil:
			pr.changed = append(pr.changed, events.ClusterProgress{Cluster: n, Removed: true})
		case entry == nil:
			continue // not scheduled, not reported: nothing to save
		default:
			// Its entry is the same: the row is saved only if the pass
			// changed it, so a reconcile for one cluster's report writes
			// that cluster's row, not every cluster's.
			if ps.unchanged(c) {
				continue
			}
		}
		c.reported = entry
		if err := saveCluster(ctx, ps.tx, p.name, c); err != nil {
			return pr, err
		}
	}
	return pr, nil
}

// unchanged reports whether a cluster's row is as load read it, its progress
// entry aside (track compares that). The report and the overrides are only
// ever replaced, never changed in place, so their pointers tell.
func (ps *pass) unchanged(c *clusterRow) bool {
	was, ok := ps.loaded[c.cluster]
	return ok && was.sent == c.sent && was.sentIndex == c.sentIndex && was.sentGeneration == c.sentGeneration &&
		was.workKey == c.workKey && was.keyGeneration == c.keyGeneration && sameTime(was.sentAt, c.sentAt) &&
		was.workSeq == c.workSeq && was.report == c.report && was.reportSeq == c.reportSeq &&
		sameTime(was.appliedAt, c.appliedAt) && was.targetKey == c.targetKey && sameTime(was.targetSince, c.targetSince) &&
		was.ready == c.ready && was.overrides == c.overrides
}

func sameTime(a, b *time.Time) bool {
	return a == b || (a != nil && b != nil && a.Equal(*b))
}

// clusterRollout is the progress of one scheduled cluster. It restarts the
// cluster's stuck deadline when its target changed or it stopped being
// ready, and asks to wake at the deadline or when the cluster may become
// ready by the clock.
func (ps *pass) clusterRollout(c *clusterRow) events.ClusterRollout {
	n := c.cluster
	key := ps.keyFor(n)
	current := ps.latest != nil && c.holds() && c.workKey == key
	st := ps.readiness[n]
	done := current && st.Ready
	if ps.latest != nil && c.targetKey != key {
		c.targetKey, c.targetSince = key, &ps.now
	} else if c.targetSince == nil || (c.ready && !done) {
		// First seen, or ready before and not any more: the deadline
		// runs from now.
		c.targetSince = &ps.now
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
		cr.Overrides = c.overrides
	case ps.latest == nil:
		cr.Reason, why = api.RolloutNotStartedYetReason, "waiting for the first resource snapshot of the placement"
		cr.Message = why
	default:
		cr.Reason, why = api.RolloutNotStartedYetReason, ps.decided.Waiting[n]
		if why == "" {
			why = "waiting for the rollout to reach the cluster"
		}
		cr.Message = why
	}
	if !done {
		deadline := c.targetSince.Add(ps.r.stuckAfter)
		if !ps.now.Before(deadline) {
			cr.Stuck = true
			cr.Message = fmt.Sprintf("The rollout on cluster %s is stuck: not applied and available within %s: %s", n, ps.r.stuckAfter, why)
		} else {
			ps.later(deadline)
		}
		if !st.ReadyAt.IsZero() {
			ps.later(st.ReadyAt)
		}
	}
	if ps.p.selectionError != nil {
		cr.Reason, cr.Message = api.InvalidResourceSelectorsReason, *ps.p.selectionError
	}
	return cr
}

// wakeForRemovals asks to wake when a not-trackable holder being removed
// may become ready by the clock; removals waiting for budget need no timer,
// they are re-planned when a report arrives.
func (ps *pass) wakeForRemovals() {
	for _, n := range sortedKeys(ps.names) {
		if st := ps.readiness[n]; !ps.scheduled[n] && !st.ReadyAt.IsZero() {
			ps.later(st.ReadyAt)
		}
	}
}

// later asks to wake at t unless an earlier wake-up is set.
func (ps *pass) later(t time.Time) {
	if ps.wake == nil || t.Before(*ps.wake) {
		ps.wake = &t
	}
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

// release is how a cluster the scheduler's failover or failback moved the
// placement away from is removed: only once it is back (action lost) and the
// placement is available on the chosen clusters (make-before-break).
func (ps *pass) release(cluster string) plan.Release {
	if ps.p.decision == nil || ps.scheduled[cluster] {
		return plan.ReleaseNormal
	}
	r, ok := ps.p.decision.ReleasedAs(cluster)
	switch {
	case !ok:
		return plan.ReleaseNormal
	case r.Action == events.ActionLost:
		return plan.ReleaseWhenBack
	default:
		return plan.ReleaseWhenAvailable
	}
}
