// Package plan is the rolling-update arithmetic: given where each cluster
// stands, which clusters get the placement's current work now, which lose the
// placement, and why the others wait.
//
// The contract: the target is the number of scheduled clusters (PickAll),
// len(clusterNames) (PickFixed) or N (PickN); at most ceil(maxUnavailable ×
// target) of the target may be unready at a time while updating; at most
// target + ceil(maxSurge × target) clusters may hold the placement at a time;
// clusters whose previous apply failed are updated without waiting for budget.
package plan

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Cluster is where one cluster stands.
type Cluster struct {
	Name string
	// Scheduled: the scheduler's current decision includes the cluster.
	Scheduled bool
	// Holds: the cluster was sent the placement's work (any version) and not
	// a tombstone since.
	Holds bool
	// Current: the work it holds is the current one.
	Current bool
	// Ready: the work it holds is applied and available.
	Ready bool
	// Failed: the work it holds failed to apply.
	Failed bool
	// Gone: the member left the fleet; its readiness no longer counts.
	Gone bool
	// Release says how an unscheduled holder a failover or failback left is
	// removed: make-before-break (see Release).
	Release Release
}

// Release is how a holder that failover or failback moved the placement away
// from is removed.
type Release uint8

const (
	// ReleaseNormal: an ordinary removal, within maxUnavailable.
	ReleaseNormal Release = iota
	// ReleaseWhenAvailable: the holder is removed only once every scheduled
	// cluster holds the current work and is available. It does not count
	// against maxSurge (the placement surges onto its replacement).
	ReleaseWhenAvailable
	// ReleaseWhenBack: the holder is down; it is not removed (a tombstone would
	// be applied the moment it reconnects) and its readiness does not count. The
	// scheduler turns it into ReleaseWhenAvailable once it is back.
	ReleaseWhenBack
)

// Strategy is the placement's rollout strategy.
type Strategy struct {
	// External: an external controller rolls out; nothing is updated or
	// added automatically but the clusters in Released.
	External bool
	// Released are the clusters a staged update run lets have the current
	// work now (External only): they get it at once, the run having bounded
	// how many update at a time.
	Released       map[string]bool
	MaxUnavailable intstr.IntOrString
	MaxSurge       intstr.IntOrString
}

// Input is what a decision needs.
type Input struct {
	// Target is the desired number of clusters (see the package comment).
	Target   int
	Strategy Strategy
	Clusters []Cluster
}

// Plan says what to do now.
type Plan struct {
	// Update lists holders brought to the current work in place.
	Update []string
	// Add lists scheduled clusters that get the placement for the first time.
	Add []string
	// Remove lists holders that are no longer scheduled: they get a tombstone.
	Remove []string
	// Waiting maps each scheduled cluster that is not current and not in
	// Update or Add to why its rollout has not started; it also holds the
	// removals that wait.
	Waiting map[string]string
	// MaxUnavailable and MaxSurge are the strategy's numbers for the target.
	MaxUnavailable, MaxSurge int
}

// Decide plans one step of the rollout. It is deterministic: clusters are
// considered in name order.
func Decide(in Input) (Plan, error) {
	d := decision{Plan: Plan{Waiting: map[string]string{}}, target: max(in.Target, 0), external: in.Strategy.External,
		released: in.Strategy.Released}
	if !d.external {
		var err error
		if d.MaxUnavailable, err = scaled(in.Strategy.MaxUnavailable, d.target, "maxUnavailable"); err != nil {
			return Plan{}, err
		}
		if d.MaxSurge, err = scaled(in.Strategy.MaxSurge, d.target, "maxSurge"); err != nil {
			return Plan{}, err
		}
	}
	d.clusters = slices.Clone(in.Clusters)
	slices.SortFunc(d.clusters, func(a, b Cluster) int { return strings.Compare(a.Name, b.Name) })

	scheduled, holders, available := tally(d.clusters)
	// The availability floor. A target the scheduler could not fill (PickN
	// or PickFixed with too few clusters) counts only the clusters it has:
	// otherwise a placement short of clusters could never update.
	minAvailable := max(0, min(d.target, scheduled)-d.MaxUnavailable)
	d.budget = available - minAvailable
	// Removals first: they free surge slots for additions.
	d.remove()
	blocked := d.update()
	d.add(holders)
	if len(blocked) > 0 {
		d.explainBlocked(blocked)
	}
	return d.Plan, nil
}

// decision is a Decide in progress: the plan so far and the budget of
// clusters that may still become unavailable.
type decision struct {
	Plan
	clusters []Cluster // in name order
	target   int
	external bool
	released map[string]bool
	budget   int
	// releasedRemoved counts the removals of released holders, which tally
	// does not count as holders.
	releasedRemoved int
}

// tally counts the scheduled clusters, the holders and the holders that are
// available.
func tally(clusters []Cluster) (scheduled, holders, available int) {
	for _, c := range clusters {
		if c.Scheduled {
			scheduled++
		}
		if c.Holds && c.Release == ReleaseNormal {
			// A holder failover released is not counted: the placement surges
			// onto its replacement, and the released copy goes once that is
			// available.
			holders++
			if c.Ready && !c.Gone {
				available++
			}
		}
	}
	return scheduled, holders, available
}

// remove plans the tombstones of holders that are no longer scheduled.
func (d *decision) remove() {
	for _, c := range d.clusters {
		if c.Scheduled || !c.Holds {
			continue
		}
		switch {
		case c.Release == ReleaseWhenBack:
			d.Waiting[c.Name] = "the cluster is lost: its copy is removed once it is back and the placement is available on the clusters chosen instead"
		case c.Release == ReleaseWhenAvailable && !d.allAvailable():
			d.Waiting[c.Name] = "make-before-break: the copy is removed once the placement is available on every chosen cluster"
		case c.Release == ReleaseWhenAvailable:
			d.Remove = append(d.Remove, c.Name)
			d.releasedRemoved++
		case c.Gone || !c.Ready:
			d.Remove = append(d.Remove, c.Name) // already unavailable: free
		case d.budget > 0:
			d.budget--
			d.Remove = append(d.Remove, c.Name)
		default:
			d.Waiting[c.Name] = fmt.Sprintf("removal waits until the placement is available elsewhere (maxUnavailable %d of %d cluster(s))",
				d.MaxUnavailable, d.target)
		}
	}
}

// allAvailable reports whether every scheduled cluster holds the current work
// and is available.
func (d *decision) allAvailable() bool {
	for _, c := range d.clusters {
		if c.Scheduled && (!c.Holds || !c.Current || !c.Ready || c.Gone) {
			return false
		}
	}
	return true
}

// update plans the in-place updates of scheduled holders and returns those
// the budget blocks.
func (d *decision) update() (blocked []string) {
	for _, c := range d.clusters {
		if !c.Scheduled || !c.Holds || c.Current {
			continue
		}
		switch {
		case d.external && d.released[c.Name]:
			d.Update = append(d.Update, c.Name)
		case d.external:
			d.Waiting[c.Name] = ExternalMessage
		case c.Failed || !c.Ready:
			// Failed or otherwise unavailable already: updating it takes
			// nothing more away.
			d.Update = append(d.Update, c.Name)
		case d.budget > 0:
			d.budget--
			d.Update = append(d.Update, c.Name)
		default:
			blocked = append(blocked, c.Name)
		}
	}
	return blocked
}

// add plans the additions of scheduled clusters, within the surge bound.
func (d *decision) add(holders int) {
	slots := d.target + d.MaxSurge - (holders - (len(d.Remove) - d.releasedRemoved))
	for _, c := range d.clusters {
		if !c.Scheduled || c.Holds {
			continue
		}
		switch {
		case d.external && d.released[c.Name]:
			d.Add = append(d.Add, c.Name)
		case d.external:
			d.Waiting[c.Name] = ExternalMessage
		case slots > 0:
			slots--
			d.Add = append(d.Add, c.Name)
		default:
			d.Waiting[c.Name] = fmt.Sprintf("waiting for clusters the placement is leaving to be cleaned up: maxSurge %d allows at most %d cluster(s) to hold the placement and %d do",
				d.MaxSurge, d.target+d.MaxSurge, holders-(len(d.Remove)-d.releasedRemoved)+len(d.Add))
		}
	}
}

// explainBlocked names, for each update the budget blocks, the clusters
// whose availability the budget waits for: the scheduled ones that are not
// ready, including those started now.
func (d *decision) explainBlocked(blocked []string) {
	updated := map[string]bool{}
	for _, n := range d.Update {
		updated[n] = true
	}
	var unready []string
	for _, c := range d.clusters {
		_, waits := d.Waiting[c.Name]
		if c.Scheduled && !c.Gone && !waits && !slices.Contains(blocked, c.Name) && (!c.Holds || !c.Ready || updated[c.Name]) {
			unready = append(unready, c.Name)
		}
	}
	for _, name := range blocked {
		d.Waiting[name] = budgetMessage(unready, d.MaxUnavailable, d.target)
	}
}

// ExternalMessage is why a cluster of an External placement waits.
const ExternalMessage = "the rollout strategy type is External: resources are not rolled out automatically; an external rollout must update this cluster"

func budgetMessage(unready []string, maxUnavailable, target int) string {
	if maxUnavailable == 0 {
		return fmt.Sprintf("maxUnavailable is 0 of %d cluster(s): updating a cluster in place would make it unavailable; set maxUnavailable above 0 to roll out", target)
	}
	if len(unready) == 0 {
		return fmt.Sprintf("waiting for more clusters to become available (maxUnavailable %d of %d cluster(s))", maxUnavailable, target)
	}
	names := unready
	more := ""
	if len(names) > 5 {
		names, more = names[:5], fmt.Sprintf(" and %d more", len(unready)-5)
	}
	return fmt.Sprintf("waiting for %s%s to become available (maxUnavailable %d of %d cluster(s))",
		strings.Join(names, ", "), more, maxUnavailable, target)
}

// scaled resolves an int-or-percent against the target, rounding up.
func scaled(v intstr.IntOrString, target int, field string) (int, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(&v, target, true)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", field, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("%s: %d is negative", field, n)
	}
	return n, nil
}
