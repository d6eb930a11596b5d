package events_test

import (
	"testing"

	"github.com/flotilla-dev/flotilla/harness/depguard"
)

// TestContractImportsNoService keeps the contract a leaf: services and the
// platform depend on events, never the other way round; no other Flotilla
// module, no database driver and no client-go (only apimachinery's types).
func TestContractImportsNoService(t *testing.T) {
	depguard.Rule{
		Packages:  []string{"./..."},
		Forbidden: []string{"github.com/flotilla-dev/flotilla", "github.com/jackc/pgx", "k8s.io/client-go"},
		Allowed:   []string{"github.com/flotilla-dev/flotilla/events"},
		Why:       "the events contract is a leaf every module imports; it needs only apimachinery's types",
	}.Check(t)
}
