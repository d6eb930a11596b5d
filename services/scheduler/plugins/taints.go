package plugins

import "github.com/flotilla-dev/flotilla/services/scheduler/framework"

// TaintToleration keeps placements off clusters with a NoSchedule taint the
// policy does not tolerate. PickFixed names its clusters outright, so taints do
// not apply to it, as in Fleet.
type TaintToleration struct{}

// Name implements framework.Plugin.
func (TaintToleration) Name() string { return "TaintToleration" }

// Filterer implements framework.FilterPlugin.
func (TaintToleration) Filterer(c *framework.Cycle) framework.Filterer {
	if c.Policy.Type == framework.PickFixed {
		return nil
	}
	tolerations := c.Policy.Tolerations
	return framework.FilterFunc(func(m *framework.Member) framework.Reason { return tolerated(tolerations, m) })
}

func tolerated(tolerations []framework.Toleration, m *framework.Member) framework.Reason {
taints:
	for i := range m.Taints {
		taint := &m.Taints[i]
		if taint.Effect != framework.TaintEffectNoSchedule {
			continue
		}
		for j := range tolerations {
			if tolerations[j].Tolerates(taint) {
				continue taints
			}
		}
		return framework.Reason{
			Code:    framework.ReasonTaintNotTolerated,
			Message: "the cluster has taint " + m.TaintText(i) + ", which the placement does not tolerate",
		}
	}
	return framework.Reason{}
}
