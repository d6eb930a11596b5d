// Package plugins holds the scheduler's plugins: cluster eligibility, a
// ResourcePlacement's namespace, required and preferred cluster affinity,
// taints and tolerations, and topology spread.
// Each is small and tested alone; Default assembles them into a profile.
package plugins

import "github.com/flotilla-dev/flotilla/services/scheduler/framework"

// Default is the profile every decision runs: filters in the order their
// rejections are reported, then scoring, then spreading.
func Default() framework.Profile {
	return framework.Profile{
		Filters: []framework.FilterPlugin{Eligibility{}, NamespaceAffinity{}, TaintToleration{}, RequiredAffinity{}},
		Scorers: []framework.ScorePlugin{PreferredAffinity{}},
		Spread:  TopologySpread{},
	}
}
