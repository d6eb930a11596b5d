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

// Filterer implements framework.FilterPlugin.
func (RequiredAffinity) Filterer(c *framework.Cycle) framework.Filterer {
	terms := c.Policy.Required
	if len(terms) == 0 {
		return nil
	}
	matchers := make([]framework.Matcher, len(terms))
	for i := range terms {
		matchers[i] = terms[i].Bind(c.Members)
	}
	return framework.FilterFunc(func(m *framework.Member) framework.Reason {
		for i := range matchers {
			if matchers[i].Matches(m) {
				return framework.Reason{}
			}
		}
		return reasonAffinity
	})
}
