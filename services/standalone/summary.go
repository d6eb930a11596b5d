package standalone

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// printSummary says what runs where and how to use it.
func (r *runner) printSummary() {
	p := r.out
	p.printf("\nFlotilla is running. Press Ctrl-C to stop; the state stays in %s and the next run resumes from it.\n\n", r.rel(r.cfg.DataDir))
	p.printf("  NATS         %s%s\n", r.natsURL, r.natsNote())
	p.printf("  PostgreSQL   %s\n", redactURL(r.dbURL))
	p.printf("  Metrics      %s   (every service's; curl it, or scrape it with Prometheus)\n", r.metricsURL)
	if r.logf != nil {
		p.printf("  Logs         %s\n", r.rel(r.logPath()))
	}
	if r.cfg.Hub {
		p.printf("  Hub          %s   (kubectl, Argo CD or Flux use it as Fleet's hub)\n", r.rel(r.hubKubeconfig()))
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
	if r.cfg.Hub {
		kubectl := r.kubectlCommand() + " --kubeconfig " + r.rel(r.hubKubeconfig())
		p.printf("    %s get memberclusters\n", kubectl)
		if dir, err := r.examplesDir(); err == nil {
			p.printf("    %s apply -f %s   (seed 000 on the hub, as on upstream Fleet)\n", kubectl, r.rel(filepath.Join(dir, "000-takeover-never.yaml")))
		}
		p.printf("    %s get crp\n", kubectl)
		p.printf("    %s wait crp/web-2-crp --for=condition=ClusterResourcePlacementAvailable\n", kubectl)
	}
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
		p.printf("    psql '%s' -c 'table takeover_history'\n", redactURL(r.dbURL))
	}
	p.printf("\n")
}

// natsNote reminds that fleetctl needs --nats when NATS is not where it looks by default,
// and the TLS files when NATS requires them.
func (r *runner) natsNote() string {
	if r.tls != nil {
		return fmt.Sprintf("\n               (for fleetctl: export FLOTILLA_NATS_URL=%s FLOTILLA_NATS_CA=%s FLOTILLA_NATS_CERT=%s FLOTILLA_NATS_KEY=%s)",
			r.natsURL, r.rel(r.tls.CA), r.rel(r.tls.Cert), r.rel(r.tls.Key))
	}
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
