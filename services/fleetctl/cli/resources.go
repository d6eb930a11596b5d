package cli

import (
	"fmt"
	"strings"

	"github.com/flotilla-dev/flotilla/events/api"
)

// resource is a kind of object fleetctl gets, describes, deletes and waits for.
type resource int

const (
	placements resource = iota + 1
	members
)

// placementNames and memberNames are the spellings kubectl accepts for
// Fleet's kinds: short name, kind, plural, and each with the group or
// version.group.
var (
	placementNames = spellings([]string{"crp", "crps"}, "clusterresourceplacement", "clusterresourceplacements", api.PlacementGroupVersion.Group, api.PlacementGroupVersion.Version)
	memberNames    = spellings([]string{"member", "members", "mc", "mcs"}, "membercluster", "memberclusters", api.ClusterGroupVersion.Group, api.ClusterGroupVersion.Version)
)

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
	case memberNames[s]:
		return members, nil
	}
	return 0, fmt.Errorf("the resource type %q is not known to fleetctl; use clusterresourceplacements (crp) or memberclusters (members)", arg)
}

// display names a resource's objects as kubectl does: "clusterresourceplacement.placement.kubernetes-fleet.io".
func (r resource) display() string {
	if r == members {
		return "membercluster." + api.ClusterGroupVersion.Group
	}
	return "clusterresourceplacement." + api.PlacementGroupVersion.Group
}

// parseTarget reads "TYPE [NAME...]" or "TYPE/NAME...", as kubectl does.
func parseTarget(args []string) (resource, []string, error) {
	if len(args) == 0 {
		return 0, nil, fmt.Errorf("you must specify the type of resource: clusterresourceplacements (crp) or memberclusters (members)")
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
