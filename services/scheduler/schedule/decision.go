package schedule

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

// Action is what a decision does with a chosen cluster.
type Action string

// Actions on chosen clusters; removed clusters are listed apart.
const (
	Added Action = "added"
	Kept  Action = "kept"
)

// Scores is the score breakdown of a chosen cluster.
type Scores struct {
	Affinity       int32 `json:"affinityScore"`
	TopologySpread int32 `json:"topologySpreadScore"`
}

// Chosen is a cluster the placement goes to.
type Chosen struct {
	Cluster string `json:"cluster"`
	Action  Action `json:"action"`
	Scores  Scores `json:"scores"`
	// Failover says what failover did on the cluster, if anything.
	Failover *Note `json:"failover,omitempty"`
}

// Message is the per-cluster Scheduled condition message, as in Fleet.
func (c Chosen) Message() string {
	return api.ScheduledMessage(c.Cluster, c.Scores.Affinity, c.Scores.TopologySpread)
}

// Unchosen is a cluster that was removed or not chosen, and why.
type Unchosen struct {
	Cluster string           `json:"cluster"`
	Reason  framework.Reason `json:"reason"`
}

// Decision is where a placement goes under its policy, and why not elsewhere.
// Pass it back to the next Decide call for the same placement: it is the
// previous decision that makes scheduling sticky.
type Decision struct {
	// PolicyKey is framework.Policy.Key of the policy decided under.
	PolicyKey        string                  `json:"policyKey"`
	Type             framework.PlacementType `json:"placementType"`
	NumberOfClusters int                     `json:"numberOfClusters,omitempty"`
	// Chosen, Removed and NotChosen are sorted by cluster name. NotChosen lists
	// every member that was not chosen (for PickFixed, the named ones only).
	Chosen    []Chosen   `json:"chosen"`
	Removed   []Unchosen `json:"removed,omitempty"`
	NotChosen []Unchosen `json:"notChosen,omitempty"`
	// Needed is how many clusters the policy asks for: N for PickN, the
	// number of names for PickFixed, and the number chosen for PickAll.
	Needed    int  `json:"needed"`
	Fulfilled bool `json:"fulfilled"`
	// Released are the clusters failover or failback moved the placement away
	// from whose copies go make-before-break; Moves are the failovers a
	// failback may undo (see DecideFailover).
	Released []Released `json:"released,omitempty"`
	Moves    []Move     `json:"moves,omitempty"`
	// Steps is what failover did in this decision, for the history.
	Steps []Step `json:"-"`
}

// Found is how many clusters were chosen.
func (d *Decision) Found() int { return len(d.Chosen) }

// ChosenNames lists the chosen clusters by name.
func (d *Decision) ChosenNames() []string {
	names := make([]string, len(d.Chosen))
	for i, c := range d.Chosen {
		names[i] = c.Cluster
	}
	return names
}

// Condition returns the reason and message of the placement's
// ClusterResourcePlacementScheduled condition (status True when fulfilled).
func (d *Decision) Condition() (fulfilled bool, reason, message string) {
	if d.Fulfilled {
		return true, api.SchedulingPolicyFulfilledReason, api.SchedulingPolicyFulfilledMessage
	}
	return false, api.SchedulingPolicyUnfulfilledReason, d.UnfulfilledMessage()
}

// UnfulfilledMessage says how many clusters were found against how many are
// needed, and why the others were rejected, e.g. "found 2 of 3 required
// clusters; 5 clusters were rejected: 3 did not match required affinity, 2 are
// tainted".
func (d *Decision) UnfulfilledMessage() string {
	var b strings.Builder
	fmt.Fprintf(&b, "found %d of %d required clusters", d.Found(), d.Needed)
	counts := d.Rejections()
	total := 0
	for _, c := range counts {
		total += c.Count
	}
	switch total {
	case 0:
		b.WriteString("; no other cluster is available")
		return b.String()
	case 1:
		b.WriteString("; 1 cluster was rejected: ")
	default:
		fmt.Fprintf(&b, "; %d clusters were rejected: ", total)
	}
	for i, c := range counts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d %s", c.Count, c.Code.Summary(c.Count))
	}
	return b.String()
}

// RejectionCount is how many clusters a decision rejected for one reason.
type RejectionCount struct {
	Code  framework.ReasonCode
	Count int
}

// Rejections counts the not-chosen clusters by rejection reason, most common
// first. Clusters that fit but were not needed are not rejections.
func (d *Decision) Rejections() []RejectionCount {
	var counts []RejectionCount
	for _, code := range framework.RejectionCodes {
		n := 0
		for _, u := range d.NotChosen {
			if u.Reason.Code == code {
				n++
			}
		}
		if n > 0 {
			counts = append(counts, RejectionCount{Code: code, Count: n})
		}
	}
	slices.SortStableFunc(counts, func(a, b RejectionCount) int { return cmp.Compare(b.Count, a.Count) })
	return counts
}

// Changed reports whether d differs from prev in anything a consumer acts on:
// the policy it was made under, the chosen clusters and their scores, removals,
// or whether the policy is fulfilled and why not. A service publishes a
// decision only when it changed.
func (d *Decision) Changed(prev *Decision) bool {
	if prev == nil || len(d.Removed) > 0 || d.PolicyKey != prev.PolicyKey ||
		d.NumberOfClusters != prev.NumberOfClusters || d.Fulfilled != prev.Fulfilled ||
		d.Needed != prev.Needed || len(d.Chosen) != len(prev.Chosen) {
		return true
	}
	for i, c := range d.Chosen {
		p := prev.Chosen[i]
		if c.Cluster != p.Cluster || c.Scores != p.Scores || !equalNotes(c.Failover, p.Failover) {
			return true
		}
	}
	if !slices.Equal(d.Released, prev.Released) || !slices.Equal(d.Moves, prev.Moves) {
		return true
	}
	if !d.Fulfilled && d.UnfulfilledMessage() != prev.UnfulfilledMessage() {
		return true
	}
	return false
}

func equalNotes(a, b *Note) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// holds reports whether d chose cluster.
func (d *Decision) holds(cluster string) bool {
	for _, c := range d.chosenOrNil() {
		if c.Cluster == cluster {
			return true
		}
	}
	return false
}
