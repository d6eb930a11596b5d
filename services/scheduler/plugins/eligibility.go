package plugins

import (
	"fmt"

	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
)

var (
	reasonNotJoined = framework.Reason{Code: framework.ReasonNotJoined, Message: "the cluster has not joined the fleet"}
	reasonLeaving   = framework.Reason{Code: framework.ReasonLeaving, Message: "the cluster is leaving the fleet"}
	reasonNoBeat    = framework.Reason{Code: framework.ReasonHeartbeatMissed, Message: "the cluster has not reported a heartbeat yet"}
)

// Eligibility keeps placements on clusters that have joined the fleet, are not
// leaving it, and have reported a heartbeat within framework.MissedHeartbeats
// periods. A cluster that already holds the placement is not evicted for
// missed heartbeats, only not chosen anew.
type Eligibility struct{}

// Name implements framework.Plugin.
func (Eligibility) Name() string { return "ClusterEligibility" }

// Filterer implements framework.FilterPlugin.
func (Eligibility) Filterer(c *framework.Cycle) framework.Filterer {
	return framework.FilterFunc(func(m *framework.Member) framework.Reason { return eligible(c, m) })
}

func eligible(c *framework.Cycle, m *framework.Member) framework.Reason {
	switch {
	case !m.Joined:
		return reasonNotJoined
	case m.Leaving:
		return reasonLeaving
	case m.HeartbeatFresh(c.Now) || c.Holds(m):
		return framework.Reason{}
	case m.LastHeartbeat.IsZero():
		return reasonNoBeat
	}
	return framework.Reason{Code: framework.ReasonHeartbeatMissed, Message: fmt.Sprintf(
		"the cluster missed heartbeats: the last was %s ago, more than %d periods of %s",
		c.Now.Sub(m.LastHeartbeat).Round(1e9), framework.MissedHeartbeats, m.HeartbeatPeriod)}
}
