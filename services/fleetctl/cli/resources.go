package cli

import (
	"fmt"
	"maps"
	"strings"

	"github.com/flotilla-dev/flotilla/events/api"
)

// resource is a kind of object fleetctl gets, describes, deletes and waits for.
type resource int

const (
	placements resource = iota + 1
	resourcePlacements
	members
	clusterOverrides
	resourceOverrides
	stagedStrategies
	stagedRuns
	approvalRequests
	evictions
	disruptionBudgets
	// The namespaced twins of the staged update kinds, for ResourcePlacements.
	nsStrategies
	nsRuns
	nsApprovals
)

// placementNames and memberNames are the spellings kubectl accepts for
// Fleet's kinds: short name, kind, plural, and each with the group or
// version.group.
var (
	placementNames = versionedSpellings([]string{"crp", "crps"}, "clusterresourceplacement", "clusterresourceplacements", api.PlacementGroupVersion.Group, api.FleetVersions)
	rpNames        = versionedSpellings([]string{"rp", "rps"}, "resourceplacement", "resourceplacements", api.PlacementGroupVersion.Group, api.FleetVersions)
	memberNames    = versionedSpellings([]string{"member", "members", "mc", "mcs"}, "membercluster", "memberclusters", api.ClusterGroupVersion.Group, api.FleetVersions)
	croNames       = versionedSpellings([]string{"cro", "cros"}, "clusterresourceoverride", "clusterresourceoverrides", api.PlacementGroupVersion.Group, api.OverrideVersions)
	roNames        = versionedSpellings([]string{"ro", "ros"}, "resourceoverride", "resourceoverrides", api.PlacementGroupVersion.Group, api.OverrideVersions)
	// Upstream's short names: csus, csur, careq.
	strategyNames = versionedSpellings([]string{"csus"}, "clusterstagedupdatestrategy", "clusterstagedupdatestrategies", api.PlacementGroupVersion.Group, api.FleetVersions)
	runNames      = versionedSpellings([]string{"csur"}, "clusterstagedupdaterun", "clusterstagedupdateruns", api.PlacementGroupVersion.Group, api.FleetVersions)
	approvalNames = versionedSpellings([]string{"careq"}, "clusterapprovalrequest", "clusterapprovalrequests", api.PlacementGroupVersion.Group, api.FleetVersions)
	// Upstream's short names of the namespaced twins: sus, sur, areq.
	nsStrategyNames = versionedSpellings([]string{"sus"}, "stagedupdatestrategy", "stagedupdatestrategies", api.PlacementGroupVersion.Group, api.FleetVersions)
	nsRunNames      = versionedSpellings([]string{"sur"}, "stagedupdaterun", "stagedupdateruns", api.PlacementGroupVersion.Group, api.FleetVersions)
	nsApprovalNames = versionedSpellings([]string{"areq"}, "approvalrequest", "approvalrequests", api.PlacementGroupVersion.Group, api.FleetVersions)
	// Upstream's short names: crpe, crpdb.
	evictionNames = versionedSpellings([]string{"crpe"}, "clusterresourceplacementeviction", "clusterresourceplacementevictions", api.PlacementGroupVersion.Group, api.FleetVersions)
	budgetNames   = versionedSpellings([]string{"crpdb"}, "clusterresourceplacementdisruptionbudget", "clusterresourceplacementdisruptionbudgets", api.PlacementGroupVersion.Group, api.FleetVersions)
)

// versionedSpellings accepts a kind in each of the versions Flotilla reads it in.
func versionedSpellings(short []string, singular, plural, group string, versions []string) map[string]bool {
	out := map[string]bool{}
	for _, v := range versions {
		maps.Copy(out, spellings(short, singular, plural, group, v))
	}
	return out
}

func spellings(short []string, singular, plural, group, version string) map[string]bool {
	out := map[string]bool{}
	for _, s := range short {
		out[s] = true
	}
	for _, n := range []string{singular, plural} {
		out[n] = true
		out[n+"."+group] = true
		out[n+"."+version+"."+group] = true
	}
	return out
}

func parseResource(arg string) (resource, error) {
	s := strings.ToLower(arg)
	switch {
	case placementNames[s]:
		return placements, nil
	case rpNames[s]:
		return resourcePlacements, nil
	case memberNames[s]:
		return members, nil
	case croNames[s]:
		return clusterOverrides, nil
	case roNames[s]:
		return resourceOverrides, nil
	case strategyNames[s]:
		return stagedStrategies, nil
	case runNames[s]:
		return stagedRuns, nil
	case approvalNames[s]:
		return approvalRequests, nil
	case evictionNames[s]:
		return evictions, nil
	case budgetNames[s]:
		return disruptionBudgets, nil
	case nsStrategyNames[s]:
		return nsStrategies, nil
	case nsRunNames[s]:
		return nsRuns, nil
	case nsApprovalNames[s]:
		return nsApprovals, nil
	}
	return 0, fmt.Errorf("the resource type %q is not known to fleetctl; use %s", arg, resourceTypes)
}

// resourceTypes lists the resource types fleetctl knows, for messages.
const resourceTypes = "clusterresourceplacements (crp), resourceplacements (rp), memberclusters (members), clusterresourceoverrides (cro), resourceoverrides (ro), " +
	"clusterstagedupdatestrategies (csus), clusterstagedupdateruns (csur), clusterapprovalrequests (careq), " +
	"stagedupdatestrategies (sus), stagedupdateruns (sur), approvalrequests (areq), " +
	"clusterresourceplacementevictions (crpe) or clusterresourceplacementdisruptionbudgets (crpdb)"

// display names a resource's objects as kubectl does: "clusterresourceplacement.placement.kubernetes-fleet.io".
func (r resource) display() string {
	switch r {
	case resourcePlacements:
		return "resourceplacement." + api.PlacementGroupVersion.Group
	case members:
		return "membercluster." + api.ClusterGroupVersion.Group
	case clusterOverrides:
		return "clusterresourceoverride." + api.PlacementGroupVersion.Group
	case resourceOverrides:
		return "resourceoverride." + api.PlacementGroupVersion.Group
	case stagedStrategies:
		return "clusterstagedupdatestrategy." + api.PlacementGroupVersion.Group
	case stagedRuns:
		return "clusterstagedupdaterun." + api.PlacementGroupVersion.Group
	case approvalRequests:
		return "clusterapprovalrequest." + api.PlacementGroupVersion.Group
	case evictions:
		return "clusterresourceplacementeviction." + api.PlacementGroupVersion.Group
	case disruptionBudgets:
		return "clusterresourceplacementdisruptionbudget." + api.PlacementGroupVersion.Group
	case nsStrategies:
		return "stagedupdatestrategy." + api.PlacementGroupVersion.Group
	case nsRuns:
		return "stagedupdaterun." + api.PlacementGroupVersion.Group
	case nsApprovals:
		return "approvalrequest." + api.PlacementGroupVersion.Group
	}
	return "clusterresourceplacement." + api.PlacementGroupVersion.Group
}

// parseTarget reads "TYPE [NAME...]" or "TYPE/NAME...", as kubectl does.
func parseTarget(args []string) (resource, []string, error) {
	if len(args) == 0 {
		return 0, nil, fmt.Errorf("you must specify the type of resource: %s", resourceTypes)
	}
	if !strings.Contains(args[0], "/") {
		r, err := parseResource(args[0])
		if err != nil {
			return 0, nil, err
		}
		for _, n := range args[1:] {
			if strings.Contains(n, "/") {
				return 0, nil, fmt.Errorf("there is no need to specify a resource type as a separate argument when passing arguments in resource/name form (e.g. 'fleetctl get crp/web' instead of 'fleetctl get crp crp/web')")
			}
		}
		return r, args[1:], nil
	}
	var r resource
	var names []string
	for _, arg := range args {
		typ, name, ok := strings.Cut(arg, "/")
		if !ok || name == "" {
			return 0, nil, fmt.Errorf("arguments in resource/name form must have a single resource and name, not %q", arg)
		}
		rr, err := parseResource(typ)
		if err != nil {
			return 0, nil, err
		}
		if r != 0 && rr != r {
			return 0, nil, fmt.Errorf("arguments in resource/name form must all be of one type here")
		}
		r = rr
		names = append(names, name)
	}
	return r, names, nil
}

// namespaced reports whether r's objects live in a namespace (-n, -A).
func (r resource) namespaced() bool {
	switch r {
	case resourcePlacements, resourceOverrides, nsStrategies, nsRuns, nsApprovals:
		return true
	}
	return false
}
