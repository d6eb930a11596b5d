// Package framework holds what scheduler plugins and the decision loop share:
// members as the scheduler sees them, compiled policies, the plugin interfaces
// and the reasons a cluster is not chosen.
//
// The shape follows the Kubernetes scheduler: filter plugins reject clusters,
// score plugins rank the rest, and a spread plugin scores each pick against
// the picks made before it, so that one decision can spread N clusters.
package framework

import "time"

// Cycle is one scheduling decision in progress: the policy, the members and
// the clock, plus which members already hold the placement.
type Cycle struct {
	Policy  *Policy
	Members *MemberSet
	Now     time.Time
	held    []bool
}

// NewCycle starts a decision of policy over members at now.
func NewCycle(policy *Policy, members *MemberSet, now time.Time) *Cycle {
	return &Cycle{Policy: policy, Members: members, Now: now, held: make([]bool, members.Len())}
}

// MarkHeld records that m already holds the placement; m must belong to the
// cycle's members.
func (c *Cycle) MarkHeld(m *Member) {
	if i := m.Index(); i >= 0 && i < len(c.held) {
		c.held[i] = true
	}
}

// Holds reports whether m already holds the placement. Filters use it to keep
// a cluster they would not choose anew, e.g. one that missed heartbeats.
func (c *Cycle) Holds(m *Member) bool {
	i := m.Index()
	return i >= 0 && i < len(c.held) && c.held[i]
}

// Plugin is a named scheduler plugin.
type Plugin interface {
	Name() string
}

// FilterPlugin rejects clusters that cannot take the placement.
type FilterPlugin interface {
	Plugin
	// Filterer prepares filtering for a decision (e.g. binds selectors to the
	// members' columns); it returns nil when the policy gives the plugin
	// nothing to check.
	Filterer(c *Cycle) Filterer
}

// Filterer filters one member at a time.
type Filterer interface {
	// Filter returns the zero Reason when m may take the placement.
	Filter(m *Member) Reason
}

// FilterFunc is a Filterer from a function.
type FilterFunc func(m *Member) Reason

// Filter calls f.
func (f FilterFunc) Filter(m *Member) Reason { return f(m) }

// ScorePlugin ranks clusters that passed every filter. Its score adds to the
// affinity score.
type ScorePlugin interface {
	Plugin
	// Scorer prepares scoring of members (e.g. the range of a sorted property
	// among them); it returns nil when the policy gives it nothing to score.
	Scorer(c *Cycle, members []*Member) Scorer
}

// Scorer scores one member at a time, after ScorePlugin.Scorer has seen all of them.
type Scorer interface {
	Score(m *Member) int32
}

// SpreadPlugin scores each pick against the picks before it, filtering those
// that would break a hard constraint.
type SpreadPlugin interface {
	Plugin
	// Spreader prepares spreading over the members that already hold the
	// placement and the candidates for it; it returns nil when the policy has
	// nothing to spread.
	Spreader(c *Cycle, placed, candidates []*Member) Spreader
}

// Spreader tracks how many picks each topology domain holds during one
// decision. Members of one group sit in the same domains, so they always get
// the same verdict; the decision loop evaluates groups, not members, which
// keeps a pick of N out of M clusters near O(N x groups).
type Spreader interface {
	// Group returns the group of a placed member or candidate, in [0, Groups()).
	Group(m *Member) int
	Groups() int
	// Evaluate returns whether one more member of group g may be placed and,
	// if so, the topology spread score of that placement.
	Evaluate(g int) (Reason, int32)
	// Place records one more member of group g; Unplace records one fewer.
	Place(g int)
	Unplace(g int)
}

// Profile is the set of plugins a decision runs.
type Profile struct {
	Filters []FilterPlugin
	Scorers []ScorePlugin
	// Spread may be nil.
	Spread SpreadPlugin
}
