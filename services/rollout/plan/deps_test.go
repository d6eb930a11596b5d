package plan_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The rollout's logic (selection, snapshot content, rolling-update
// arithmetic) is pure: no database, bus or Kubernetes client, so it is
// tested without servers and can be reused by tools.
func TestLogicPackagesStayPure(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list imports with")
	}
	const mod = "github.com/flotilla-dev/flotilla/services/rollout/"
	out, err := exec.Command(gobin, "list", "-deps", mod+"plan", mod+"selection", mod+"snapshot").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list found only %v; the guard would pass vacuously", deps)
	}
	for _, dep := range deps {
		for _, banned := range []string{"github.com/jackc/", "github.com/nats-io/", "k8s.io/client-go", "github.com/flotilla-dev/flotilla/events/bus"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("the rollout logic imports %s", dep)
			}
		}
	}
}
