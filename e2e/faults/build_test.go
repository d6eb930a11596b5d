package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The services' main packages, built as compose's images build them, and the NATS server.
const (
	modulePath = "github.com/flotilla-dev/flotilla/"
	natsServer = "github.com/nats-io/nats-server/v2"
)

var serviceMains = []string{
	"services/scheduler/cmd/scheduler",
	"services/rollout/cmd/rollout",
	"services/status/cmd/status",
	"services/apply/cmd/apply",
	"services/standalone/cmd/flotilla-standalone",
}

// built holds the binaries, built once per test binary run into a temporary directory that
// TestMain removes.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// binaries builds the services (with the race detector when the test binary has it, so that
// a data race a fault provokes in a service is reported) and nats-server, once, and returns
// their directory.
func binaries(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "flotilla-faults-bin-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		args := []string{"build", "-o", dir + string(filepath.Separator)}
		if raceEnabled {
			args = append(args, "-race")
		}
		for _, m := range serviceMains {
			args = append(args, modulePath+m)
		}
		if built.err = goBuild(args...); built.err != nil {
			return
		}
		// The server is not ours: no race detector, which would only slow it down.
		built.err = goBuild("build", "-o", filepath.Join(dir, "nats-server"), natsServer)
	})
	if built.err != nil {
		t.Fatalf("build the services: %v", built.err)
	}
	return built.dir
}

func goBuild(args ...string) error {
	cmd := exec.Command("go", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
