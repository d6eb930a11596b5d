package plugins

import "github.com/flotilla-dev/flotilla/services/scheduler/framework"

// NamespaceAffinity keeps a ResourcePlacement on clusters that have its
// namespace, as upstream's namespaceaffinity plugin does: the namespace must
// be among those the member's heartbeats report (api.MemberClusterStatus.
// Namespaces), and a member that reports none is not chosen. It applies to
// every placement type, PickFixed included: a named cluster without the
// namespace could only fail to apply. ClusterResourcePlacements are not
// filtered. (A cluster that holds the placement and loses the namespace is
// removed by the decision itself, see schedule.Decide.)
type NamespaceAffinity struct{}

// Name implements framework.Plugin.
func (NamespaceAffinity) Name() string { return "NamespaceAffinity" }

// Filterer implements framework.FilterPlugin.
func (NamespaceAffinity) Filterer(c *framework.Cycle) framework.Filterer {
	ns := c.Policy.Namespace
	if ns == "" {
		return nil
	}
	return framework.FilterFunc(func(m *framework.Member) framework.Reason { return m.NamespaceReason(ns) })
}
