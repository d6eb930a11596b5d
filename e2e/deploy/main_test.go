package deploy

import (
	"os"
	"testing"

	"github.com/flotilla-dev/flotilla/harness/postgres"
)

// The permission matrix runs the hub services on a real PostgreSQL, shared by the package.
func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }
