package events_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestContractImportsNoService keeps the contract a leaf: services depend on
// events, never the other way round, and the contract does not pull in
// client-go (only apimachinery's types).
func TestContractImportsNoService(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case strings.HasPrefix(pkg, "github.com/flotilla-dev/flotilla/services/"):
			t.Errorf("the events module imports service package %s", pkg)
		case strings.HasPrefix(pkg, "k8s.io/client-go/"):
			t.Errorf("the events module imports %s; the contract needs only apimachinery", pkg)
		}
	}
}
