package schedule

import (
	"testing"

	"github.com/flotilla-dev/flotilla/harness/depguard"
)

// The scheduler's decision logic is pure: it never talks to a Kubernetes API
// server, so client-go (and controller-runtime) must stay out of its imports.
func TestDecisionLogicDoesNotImportClientGo(t *testing.T) {
	const mod = "github.com/flotilla-dev/flotilla/services/scheduler/"
	depguard.Rule{
		Packages:  []string{mod + "schedule", mod + "framework", mod + "plugins"},
		Forbidden: []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime"},
		Why:       "the decision logic never talks to a Kubernetes API server",
	}.Check(t)
}
