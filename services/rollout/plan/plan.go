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
}

// Strategy is the placement's rollout strategy.
type Strategy struct {
	// External: an external controller rolls out; nothing is updated or
	// added automatically.
	External       bool
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
	p := Plan{Waiting: map[string]string{}}
	target := max(in.Target, 0)
	var err error
	if !in.Strategy.External {
		p.MaxUnavailable, err = scaled(in.Strategy.MaxUnavailable, target, "maxUnavailable")
		if err != nil {
			return Plan{}, err
		}
		p.MaxSurge, err = scaled(in.Strategy.MaxSurge, target, "maxSurge")
		if err != nil {
			return Plan{}, err
		}
	}
	clusters := slices.Clone(in.Clusters)
	slices.SortFunc(clusters, func(a, b Cluster) int { return strings.Compare(a.Name, b.Name) })

	scheduled, holders, available := 0, 0, 0
	for _, c := range clusters {
		if c.Scheduled {
			scheduled++
		}
		if c.Holds {
			holders++
			if c.Ready && !c.Gone {
				available++
			}
		}
	}
	// The availability floor. A target the scheduler could not fill (PickN
	// or PickFixed with too few clusters) counts only the clusters it has:
	// otherwise a placement short of clusters could never update.
	minAvailable := max(0, min(target, scheduled)-p.MaxUnavailable)
	budget := available - minAvailable
	// Removals first: they free surge slots for additions.
	for _, c := range clusters {
		if c.Scheduled || !c.Holds {
			continue
		}
		switch {
		case c.Gone || !c.Ready:
			p.Remove = append(p.Remove, c.Name) // already unavailable: free
		case budget > 0:
			budget--
			p.Remove = append(p.Remove, c.Name)
		default:
			p.Waiting[c.Name] = fmt.Sprintf("removal waits until the placement is available elsewhere (maxUnavailable %d of %d cluster(s))",
				p.MaxUnavailable, target)
		}
	}

	// In-place updates of scheduled holders.
	var blocked []string
	for _, c := range clusters {
		if !c.Scheduled || !c.Holds || c.Current {
			continue
		}
		switch {
		case in.Strategy.External:
			p.Waiting[c.Name] = externalMessage
		case c.Failed || !c.Ready:
			// Failed or otherwise unavailable already: updating it takes
			// nothing more away.
			p.Update = append(p.Update, c.Name)
		case budget > 0:
			budget--
			p.Update = append(p.Update, c.Name)
		default:
			blocked = append(blocked, c.Name)
		}
	}
	// Additions, within the surge bound.
	slots := target + p.MaxSurge - (holders - len(p.Remove))
	for _, c := range clusters {
		if !c.Scheduled || c.Holds {
			continue
		}
		switch {
		case in.Strategy.External:
			p.Waiting[c.Name] = externalMessage
		case slots > 0:
			slots--
			p.Add = append(p.Add, c.Name)
		default:
			p.Waiting[c.Name] = fmt.Sprintf("waiting for clusters the placement is leaving to be cleaned up: maxSurge %d allows at most %d cluster(s) to hold the placement and %d do",
				p.MaxSurge, target+p.MaxSurge, holders-len(p.Remove)+len(p.Add))
		}
	}
	if len(blocked) > 0 {
		// Name the clusters whose availability the budget waits for: the
		// scheduled ones that are not ready, including those started now.
		updated := map[string]bool{}
		for _, n := range p.Update {
			updated[n] = true
		}
		var unready []string
		for _, c := range clusters {
			_, waits := p.Waiting[c.Name]
			if c.Scheduled && !c.Gone && !waits && !slices.Contains(blocked, c.Name) && (!c.Holds || !c.Ready || updated[c.Name]) {
				unready = append(unready, c.Name)
			}
		}
		for _, name := range blocked {
			p.Waiting[name] = budgetMessage(unready, p.MaxUnavailable, target)
		}
	}
	return p, nil
}

const externalMessage = "the rollout strategy type is External: resources are not rolled out automatically; an external rollout must update this cluster"

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
