package standalone

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events/api"
)

var (
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	replicaSetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
)

// printSummary says what runs where and how to use it.
func (r *runner) printSummary() {
	p := r.out
	p.printf("\nFlotilla is running. Press Ctrl-C to stop; the state stays in %s and the next run resumes from it.\n\n", r.rel(r.cfg.DataDir))
	p.printf("  NATS         %s%s\n", r.natsURL, r.natsNote())
	p.printf("  PostgreSQL   %s\n", redactURL(r.dbURL))
	if r.logf != nil {
		p.printf("  Logs         %s\n", r.rel(r.logPath()))
	}
	for i, m := range r.members {
		label := "  Members      "
		if i > 0 {
			label = "               "
		}
		region := ""
		if v := m.Labels["region"]; v != "" {
			region = "region=" + v
		}
		p.printf("%s%-10s %-15s %s\n", label, m.Name, region, r.rel(m.Kubeconfig))
	}
	fleetctl := r.fleetctlCommand()
	p.printf("\n  Try:\n")
	p.printf("    %s get members -o wide\n", fleetctl)
	p.printf("    %s get crp\n", fleetctl)
	if dir, err := r.examplesDir(); err == nil {
		p.printf("    %s apply -f %s   (the seed scenarios; see %s)\n", fleetctl,
			r.rel(filepath.Join(dir, "001-placement-policies.yaml")), r.rel(filepath.Join(dir, "README.md")))
	}
	if len(r.members) > 0 {
		p.printf("    %s --kubeconfig %s get deployments -A\n", r.kubectlCommand(), r.rel(r.members[0].Kubeconfig))
	}
	if _, err := exec.LookPath("psql"); err == nil {
		p.printf("    psql '%s' -c 'table takeover_history'\n", r.dbURL)
	}
	p.printf("\n")
}

// natsNote reminds that fleetctl needs --nats when NATS is not where it looks by default.
func (r *runner) natsNote() string {
	if r.natsURL == "nats://"+DefaultNATSListen {
		return "   (fleetctl's default)"
	}
	return fmt.Sprintf("   (for fleetctl: export FLOTILLA_NATS_URL=%s)", r.natsURL)
}

// fleetctlCommand is how the person can run fleetctl from here: the binary make run builds,
// or go run in a checkout.
func (r *runner) fleetctlCommand() string {
	if fileExists(filepath.Join("bin", "fleetctl")) {
		return "bin/fleetctl"
	}
	if fi, err := os.Stat(filepath.Join("services", "fleetctl")); err == nil && fi.IsDir() {
		return "go run ./services/fleetctl"
	}
	return "fleetctl"
}

func (r *runner) kubectlCommand() string {
	if r.kubectl != "" {
		return r.kubectl
	}
	return "kubectl"
}

// printExampleHints says what to look at once the example converged.
func (r *runner) printExampleHints(crp *api.ClusterResourcePlacement) {
	fleetctl := r.fleetctlCommand()
	var kubeconfig string
	for _, m := range r.members {
		if m.Name == existingMember {
			kubeconfig = r.rel(m.Kubeconfig)
		}
	}
	name := crp.Name
	lines := []string{
		fmt.Sprintf("%s describe crp %s", fleetctl, name),
		fmt.Sprintf("%s history crp %s", fleetctl, name),
		fmt.Sprintf("%s takeovers --placement %s", fleetctl, name),
	}
	if kubeconfig != "" {
		lines = append(lines, fmt.Sprintf("%s --kubeconfig %s -n %s get deployments,replicasets,services,configmaps",
			r.kubectlCommand(), kubeconfig, strings.Join(namespacesOf(crp), ",")))
	}
	r.out.printf("\nThe example converged. Look at it with:\n")
	for _, l := range lines {
		r.out.printf("    %s\n", l)
	}
	r.out.printf("Flotilla keeps running; press Ctrl-C to stop.\n")
}

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
