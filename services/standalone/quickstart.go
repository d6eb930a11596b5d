package standalone

import (
	"context"
	"os"

	"k8s.io/client-go/rest"

	"github.com/flotilla-dev/flotilla/services/standalone/quickstart"
)

// runExample runs the quick-start demo (package quickstart) on this run's fleet.
func (r *runner) runExample(ctx context.Context, q *queries) error {
	dir, err := r.examplesDir()
	if err != nil {
		return err
	}
	return quickstart.Run(ctx, quickstart.Env{
		ExamplesDir:     dir,
		LocalMembers:    memberNames(r.members, true),
		RESTConfig:      r.restConfig,
		Kubeconfig:      r.kubeconfig,
		Fleetctl:        r.fleetctl,
		Status:          q.client,
		Available:       r.cfg.SimulatedNodes,
		Applied:         r.ready,
		Log:             r.log,
		Step:            r.out.step,
		Linef:           r.out.linef,
		Printf:          r.out.printf,
		Rel:             r.rel,
		FleetctlCommand: r.fleetctlCommand(),
		KubectlCommand:  r.kubectlCommand(),
	})
}

// examplesDir is Config.ExamplesDir, or else deploy/examples here or in the nearest parent
// that has it.
func (r *runner) examplesDir() (string, error) {
	if r.cfg.ExamplesDir != "" {
		return r.cfg.ExamplesDir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return quickstart.FindExamplesDir(wd)
}

// restConfig reaches a local member; nil for any other.
func (r *runner) restConfig(member string) *rest.Config {
	if r.kube == nil {
		return nil
	}
	return r.kube.RESTConfig(member)
}

// kubeconfig is the path of member's kubeconfig file, "" when it is not a member.
func (r *runner) kubeconfig(member string) string {
	path := ""
	for _, m := range r.members {
		if m.Name == member {
			path = m.Kubeconfig
		}
	}
	return path
}
