package schedule

import (
	"os/exec"
	"strings"
	"testing"
)

// The scheduler's decision logic is pure: it never talks to a Kubernetes API
// server, so client-go (and controller-runtime) must stay out of its imports.
func TestDecisionLogicDoesNotImportClientGo(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list imports with")
	}
	const mod = "github.com/flotilla-dev/flotilla/services/scheduler/"
	out, err := exec.Command(gobin, "list", "-deps", mod+"schedule", mod+"framework", mod+"plugins").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list found only %v; the guard would pass vacuously", deps)
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "k8s.io/client-go") || strings.HasPrefix(dep, "sigs.k8s.io/controller-runtime") {
			t.Errorf("the decision logic imports %s", dep)
		}
	}
}
