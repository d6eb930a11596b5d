package quickstart

import (
	"fmt"
	"strings"

	"github.com/flotilla-dev/flotilla/events/api"
)

// printHints says what to look at once the example converged.
func (e Env) printHints(crp *api.ClusterResourcePlacement) {
	fleetctl := e.FleetctlCommand
	var kubeconfig string
	if path := e.Kubeconfig(existingMember); path != "" {
		kubeconfig = e.Rel(path)
	}
	name := crp.Name
	lines := []string{
		fmt.Sprintf("%s describe crp %s", fleetctl, name),
		fmt.Sprintf("%s history crp %s", fleetctl, name),
		fmt.Sprintf("%s takeovers --placement %s", fleetctl, name),
	}
	if kubeconfig != "" {
		lines = append(lines, fmt.Sprintf("%s --kubeconfig %s -n %s get deployments,replicasets,services,configmaps",
			e.KubectlCommand, kubeconfig, strings.Join(namespacesOf(crp), ",")))
	}
	e.Printf("\nThe example converged. Look at it with:\n")
	for _, l := range lines {
		e.Printf("    %s\n", l)
	}
	e.Printf("Flotilla keeps running; press Ctrl-C to stop.\n")
}

// namespacesOf returns the first namespace the placement selected, or default.
func namespacesOf(crp *api.ClusterResourcePlacement) []string {
	var out []string
	for _, res := range crp.Status.SelectedResources {
		if res.Kind == "Namespace" && res.Group == "" {
			out = append(out, res.Name)
		}
	}
	if len(out) == 0 {
		return []string{"default"}
	}
	return out[:1]
}
