package fold

import (
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/revision"
)

// InvalidSelectorsMessage is the Scheduled=False message when the rollout
// reported invalid resource selectors without saying why.
const InvalidSelectorsMessage = "the placement's resource selectors are invalid"

// Status folds the inputs into the placement's Fleet-shaped status, the way
// upstream Fleet builds it:
//
//   - ClusterResourcePlacementScheduled comes from the scheduler's decision for
//     the current generation (SchedulePending until there is one), or is False
//     with InvalidResourceSelectors when the rollout found the selectors invalid.
//   - Each chosen cluster gets Scheduled, then RolloutStarted, Overridden,
//     WorkSynchronized, Applied and Available (DiffReported instead of the last
//     two with the ReportDiff apply strategy), in order, up to the first that
//     is not True.
//   - Each placement-level condition after Scheduled counts the clusters that
//     reached it: Unknown if any is Unknown, else False if any is False, else
//     True; the conditions after the first that is not True are left out.
//
// prev is the status last stored: a condition keeps its lastTransitionTime
// while its status stays the same. now stamps those that changed. The
// placement must be known (in.Placement not nil).
func Status(in *Inputs, prev api.PlacementStatus, now time.Time) api.PlacementStatus {
	st, _ := status(in, prev, now, nil)
	return st
}

// Refold is Status when only the apply reports or quarantined work of the
// clusters in changed differ from the inputs prev was folded from: it folds
// those clusters again and keeps prev's entry of every other chosen cluster
// (a fold of unchanged inputs gives the same entry), so it reads no other
// cluster's report, and counts the placement-level conditions from the
// entries. ok is false when prev cannot have been folded from these inputs
// (a chosen cluster not in changed has no entry there, or one of another
// generation): fold with Status then, every report at hand.
func Refold(in *Inputs, prev api.PlacementStatus, changed map[string]bool, now time.Time) (st api.PlacementStatus, ok bool) {
	return status(in, prev, now, func(cluster string) bool { return !changed[cluster] })
}

// status is Status, keeping prev's entry of the chosen clusters keep says
// (none when keep is nil); ok is false when one of them has no usable entry.
func status(in *Inputs, prev api.PlacementStatus, now time.Time, keep func(cluster string) bool) (api.PlacementStatus, bool) {
	f := folder{in: in, gen: in.Generation(), at: metav1.NewTime(now.UTC().Truncate(time.Second))}
	var st api.PlacementStatus
	if in.Snapshot != nil {
		st.SelectedResources = in.Snapshot.SelectedResources
		st.ObservedResourceIndex = strconv.FormatInt(in.Snapshot.Index, 10)
	}

	if msg, invalid := in.invalidSelectors(); invalid {
		// Nothing was selected, so nothing else is reported.
		st.SelectedResources, st.ObservedResourceIndex = nil, ""
		st.Conditions = []metav1.Condition{f.carry(prev.Conditions, metav1.Condition{
			Type:   string(api.ClusterResourcePlacementScheduledConditionType),
			Status: metav1.ConditionFalse, Reason: api.InvalidResourceSelectorsReason, Message: msg,
		})}
		return st, true
	}

	scheduled := f.scheduledCondition()
	st.Conditions = []metav1.Condition{f.carry(prev.Conditions, scheduled)}
	if scheduled.Status == metav1.ConditionUnknown {
		return st, true
	}

	prevClusters := map[string]*api.ResourcePlacementStatus{}
	prevChosen := map[string]*api.ResourcePlacementStatus{}
	for i := range prev.PlacementStatuses {
		p := &prev.PlacementStatuses[i]
		prevClusters[p.ClusterName] = p
		if _, seen := prevChosen[p.ClusterName]; !seen && wasChosen(p) {
			prevChosen[p.ClusterName] = p
		}
	}
	chain := f.chain()
	counts := make([]map[metav1.ConditionStatus]int, len(chain))
	for i := range counts {
		counts[i] = map[metav1.ConditionStatus]int{}
	}
	d := in.Decision
	for _, c := range d.Chosen {
		var (
			rps     api.ResourcePlacementStatus
			reached []metav1.ConditionStatus
		)
		if keep != nil && keep(c.Cluster) {
			p := prevChosen[c.Cluster]
			if p == nil || !f.current(p) {
				return api.PlacementStatus{}, false
			}
			rps, reached = *p, f.reached(p, chain)
		} else {
			rps, reached = f.cluster(c, prevClusters[c.Cluster])
		}
		for i, s := range reached {
			counts[i][s]++
		}
		st.PlacementStatuses = append(st.PlacementStatuses, rps)
	}
	chosen := len(st.PlacementStatuses)

	// A PickN or PickFixed placement that could not be fulfilled shows, for
	// each missing cluster, one that was not chosen and why.
	for i := 0; i < f.unscheduled() && i < len(d.NotChosen); i++ {
		u := d.NotChosen[i]
		var prevConds []metav1.Condition
		if p := prevClusters[u.Cluster]; p != nil {
			prevConds = p.Conditions
		}
		st.PlacementStatuses = append(st.PlacementStatuses, api.ResourcePlacementStatus{
			ClusterName: u.Cluster,
			Conditions: []metav1.Condition{f.carry(prevConds, metav1.Condition{
				Type:   string(api.PerClusterScheduledConditionType),
				Status: metav1.ConditionFalse, Reason: api.ScheduleFailedReason, Message: u.Reason,
			})},
		})
	}

	for _, r := range d.Released {
		st.PlacementStatuses = append(st.PlacementStatuses, f.released(r, prevClusters[r.Cluster]))
	}

	if chosen == 0 {
		return st, true
	}
	for i, link := range chain {
		status, n := aggregate(counts[i])
		c := api.PlacementCondition(link.placement, status, n, f.gen)
		if link == overridden && status == metav1.ConditionTrue && f.overridden {
			// Upstream: OverriddenSucceeded once overrides apply on some cluster.
			c.Reason, c.Message = api.OverriddenSucceededReason, api.OverriddenSucceededPlacementMessage(n)
		}
		st.Conditions = append(st.Conditions, f.carry(prev.Conditions, c))
		if status != metav1.ConditionTrue {
			break
		}
	}
	return st, true
}

// wasChosen reports whether an entry is a chosen cluster's: Scheduled True
// first (one not chosen has Scheduled False, a released one Failover only).
func wasChosen(p *api.ResourcePlacementStatus) bool {
	return len(p.Conditions) > 0 && p.Conditions[0].Type == string(api.PerClusterScheduledConditionType) &&
		p.Conditions[0].Status == metav1.ConditionTrue
}

// current reports whether every condition of a chosen cluster's entry was
// folded for the placement's generation.
func (f *folder) current(p *api.ResourcePlacementStatus) bool {
	for _, c := range p.Conditions {
		if c.ObservedGeneration != f.gen {
			return false
		}
	}
	return true
}

// reached is what cluster returned with a kept entry: the status of each
// condition of the chain the entry holds, in order. It notes overrides that
// apply on the cluster (Overridden True with OverriddenSucceeded) as cluster does.
func (f *folder) reached(p *api.ResourcePlacementStatus, chain []link) []metav1.ConditionStatus {
	var out []metav1.ConditionStatus
	for _, c := range p.Conditions {
		if !slices.ContainsFunc(chain, func(l link) bool { return string(l.cluster) == c.Type }) {
			continue
		}
		out = append(out, c.Status)
		if c.Type == string(api.PerClusterOverriddenConditionType) && c.Status == metav1.ConditionTrue &&
			c.Reason == api.OverriddenSucceededReason {
			f.overridden = true
		}
	}
	return out
}

// aggregate is upstream's rule: Unknown wins, then False, else True; n is
// the number of clusters with that status.
func aggregate(c map[metav1.ConditionStatus]int) (metav1.ConditionStatus, int) {
	switch {
	case c[metav1.ConditionUnknown] > 0:
		return metav1.ConditionUnknown, c[metav1.ConditionUnknown]
	case c[metav1.ConditionFalse] > 0:
		return metav1.ConditionFalse, c[metav1.ConditionFalse]
	}
	return metav1.ConditionTrue, c[metav1.ConditionTrue]
}

// folder carries what every step of one fold needs.
type folder struct {
	in  *Inputs
	gen int64
	at  metav1.Time
	// overridden: overrides apply on some cluster.
	overridden bool
}

// carry sets c's observedGeneration, and its lastTransitionTime to that of the
// same condition in prev if its status did not change, else to the fold's time.
func (f *folder) carry(prev []metav1.Condition, c metav1.Condition) metav1.Condition {
	c.ObservedGeneration = f.gen
	c.LastTransitionTime = f.at
	for _, p := range prev {
		if p.Type == c.Type && p.Status == c.Status {
			c.LastTransitionTime = p.LastTransitionTime
		}
	}
	return c
}

func (f *folder) scheduledCondition() metav1.Condition {
	c := metav1.Condition{Type: string(api.ClusterResourcePlacementScheduledConditionType)}
	d := f.in.Decision
	switch {
	case d == nil || d.Generation < f.gen:
		c.Status, c.Reason, c.Message = metav1.ConditionUnknown, api.SchedulePendingReason, api.SchedulePendingMessage
	case d.Fulfilled:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, api.SchedulingPolicyFulfilledReason, api.SchedulingPolicyFulfilledMessage
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, api.SchedulingPolicyUnfulfilledReason, d.Message
		if c.Message == "" {
			c.Message = api.SchedulingPolicyUnfulfilledMessage(len(d.Chosen), d.Wanted)
		}
	}
	return c
}

// unscheduled is how many more clusters the policy wants than were chosen.
func (f *folder) unscheduled() int {
	spec := f.in.Placement.Spec
	d := f.in.Decision
	want := d.Wanted
	switch spec.EffectivePlacementType() {
	case api.PickNPlacementType:
		if spec.Policy.NumberOfClusters != nil {
			want = int(*spec.Policy.NumberOfClusters)
		}
	case api.PickFixedPlacementType:
		want = len(spec.Policy.ClusterNames)
	default:
		return 0
	}
	return want - len(d.Chosen)
}

// link pairs a placement-level condition type with its per-cluster type.
type link struct {
	placement api.ClusterResourcePlacementConditionType
	cluster   api.PerClusterPlacementConditionType
}

var (
	rolloutStarted   = link{api.ClusterResourcePlacementRolloutStartedConditionType, api.PerClusterRolloutStartedConditionType}
	overridden       = link{api.ClusterResourcePlacementOverriddenConditionType, api.PerClusterOverriddenConditionType}
	workSynchronized = link{api.ClusterResourcePlacementWorkSynchronizedConditionType, api.PerClusterWorkSynchronizedConditionType}
	applied          = link{api.ClusterResourcePlacementAppliedConditionType, api.PerClusterAppliedConditionType}
	available        = link{api.ClusterResourcePlacementAvailableConditionType, api.PerClusterAvailableConditionType}
	diffReported     = link{api.ClusterResourcePlacementDiffReportedConditionType, api.PerClusterDiffReportedConditionType}
)

// chain lists the conditions after Scheduled, in the order a placement
// progresses through them.
func (f *folder) chain() []link {
	if f.reportDiff() {
		return []link{rolloutStarted, overridden, workSynchronized, diffReported}
	}
	return []link{rolloutStarted, overridden, workSynchronized, applied, available}
}

func (f *folder) reportDiff() bool {
	as := f.in.Placement.Spec.Strategy.ApplyStrategy
	return as != nil && as.Type == api.ApplyStrategyTypeReportDiff
}

// invalidSelectors reports whether the rollout found the current
// generation's resource selectors invalid: it says so with a cluster entry
// (possibly with an empty cluster name) whose reason is
// InvalidResourceSelectors, and the message why.
func (in *Inputs) invalidSelectors() (string, bool) {
	r := in.Rollout
	if r == nil || r.Generation < in.Generation() {
		return "", false
	}
	if r.Reason == api.InvalidResourceSelectorsReason {
		if r.Message == "" {
			return InvalidSelectorsMessage, true
		}
		return r.Message, true
	}
	for _, c := range r.Clusters {
		if c.Reason == api.InvalidResourceSelectorsReason {
			if c.Message == "" {
				return InvalidSelectorsMessage, true
			}
			return c.Message, true
		}
	}
	return "", false
}

// rolloutEntry is the rollout's entry for a cluster, nil if it has none.
func rolloutEntry(r *revision.Progress, cluster string) *events.ClusterRollout {
	return r.Cluster(cluster)
}
