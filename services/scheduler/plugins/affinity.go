package plugins

import "github.com/flotilla-dev/flotilla/services/scheduler/framework"

var reasonAffinity = framework.Reason{
	Code:    framework.ReasonAffinityMismatch,
	Message: "the cluster does not match any required cluster selector term",
}

// RequiredAffinity keeps placements on clusters that match at least one
// required cluster selector term: its label selector and every property
// requirement.
type RequiredAffinity struct{}

// Name implements framework.Plugin.
func (RequiredAffinity) Name() string { return "ClusterAffinity" }

// Filter implements framework.FilterPlugin.
func (RequiredAffinity) Filter(c *framework.Cycle, m *framework.Member) framework.Reason {
	terms := c.Policy.Required
	if len(terms) == 0 {
		return framework.Reason{}
	}
	for i := range terms {
		if terms[i].Matches(m) {
			return framework.Reason{}
		}
	}
	return reasonAffinity
}
