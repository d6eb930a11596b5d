package scenarios

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-dev/flotilla/services/standalone"
)

// memberCount is how many local member clusters the stack starts: enough for PickN to leave
// one out and for two members to share a region (member-1 and member-4 are both east).
const memberCount = 4

// heartbeatPeriod is short so that a member that joins again is eligible within seconds, and
// long enough that a busy machine does not miss three in a row (a member is then not
// eligible for new placements).
const heartbeatPeriod = 20 * time.Second

// startTimeout bounds starting the stack: four members on a busy two-core machine are slow.
const startTimeout = 15 * time.Minute

var (
	stackOnce sync.Once
	theStack  *stack
	stackErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if theStack != nil {
		if err := theStack.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stopping the Flotilla stack: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
		if code == 0 {
			os.RemoveAll(theStack.dataDir)
		} else {
			fmt.Fprintf(os.Stderr, "the Flotilla stack's data dir is kept for a look: %s (services' log: %s)\n", theStack.dataDir, theStack.logPath)
		}
	}
	os.Exit(code)
}

// stack is one standalone Flotilla with its local members and hub cluster (--hub), shared by the
// tests of the binary. The members joined on the hub, as MemberCluster objects: tests change
// them there, with kubectl, as a user of a hub does.
type stack struct {
	standalone.Endpoints
	dataDir string
	logPath string
	outPath string
	kube    map[string]kubernetes.Interface
	cancel  context.CancelFunc
	errc    chan error
}

// fleetFor returns the shared stack, starting it for the first test that asks; a test in
// -short mode is skipped.
func fleetFor(t *testing.T) *stack {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Flotilla with four member clusters")
	}
	stackOnce.Do(func() { theStack, stackErr = startStack() })
	if stackErr != nil {
		t.Fatalf("start Flotilla: %v", stackErr)
	}
	theStack.waitForMembers(t)
	return theStack
}

func startStack() (*stack, error) {
	// PostgreSQL runs as the postgres user when the tests run as root: the data dir must be
	// reachable by it, which a directory under a 0700 temp parent is not.
	dir, err := os.MkdirTemp("", "flotilla-e2e-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	s := &stack{dataDir: dir, logPath: filepath.Join(dir, "services.log"), outPath: filepath.Join(dir, "standalone.out"),
		kube: map[string]kubernetes.Interface{}, errc: make(chan error, 1)}
	logf, err := os.Create(s.logPath)
	if err != nil {
		return nil, err
	}
	out, err := os.Create(s.outPath)
	if err != nil {
		logf.Close()
		return nil, err
	}
	ready := make(chan standalone.Endpoints, 1)
	cfg := standalone.Config{
		DataDir:         dir,
		NATSListen:      "127.0.0.1:0",
		MetricsListen:   "127.0.0.1:0",
		LocalMembers:    memberCount,
		Hub:             true,
		KubeBinDir:      os.Getenv("FLOTILLA_KUBE_BIN_DIR"),
		SimulatedNodes:  true,
		HeartbeatPeriod: heartbeatPeriod,
		Out:             out,
		Logger:          slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Ready:           func(e standalone.Endpoints) { ready <- e },
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		err := standalone.Run(ctx, cfg)
		logf.Close()
		out.Close()
		s.errc <- err
	}()
	select {
	case s.Endpoints = <-ready:
	case err := <-s.errc:
		cancel()
		s.errc <- err
		return nil, fmt.Errorf("standalone stopped before it was ready: %v\n%s", err, tail(s.outPath, 40))
	case <-time.After(startTimeout):
		cancel()
		return nil, fmt.Errorf("standalone was not ready after %s\n%s", startTimeout, tail(s.outPath, 40))
	}
	for _, m := range s.Members {
		rc, err := clientcmd.BuildConfigFromFlags("", m.Kubeconfig)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("member %s: %w", m.Name, err)
		}
		c, err := kubernetes.NewForConfig(rc)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("member %s: %w", m.Name, err)
		}
		s.kube[m.Name] = c
	}
	return s, nil
}

// stop ends the stack as Ctrl-C ends standalone.
func (s *stack) stop() error {
	s.cancel()
	select {
	case err := <-s.errc:
		return err
	case <-time.After(5 * time.Minute):
		return errors.New("standalone did not stop within 5 minutes")
	}
}

// tail returns the last n lines of a file, for failure messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
