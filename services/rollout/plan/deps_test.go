package plan_test

import (
	"testing"

	"github.com/flotilla-dev/flotilla/harness/depguard"
)

// The rollout's logic (selection, snapshot content, rolling-update
// arithmetic) is pure: no database, bus or Kubernetes client, so it is
// tested without servers and can be reused by tools.
func TestLogicPackagesStayPure(t *testing.T) {
	const mod = "github.com/flotilla-dev/flotilla/services/rollout/"
	depguard.Rule{
		Packages:  []string{mod + "plan", mod + "selection", mod + "snapshot", mod + "stage"},
		Forbidden: []string{"github.com/jackc", "github.com/nats-io", "k8s.io/client-go", "github.com/flotilla-dev/flotilla/events/bus"},
		Why:       "the rollout logic needs no database, bus or Kubernetes client",
	}.Check(t)
}
