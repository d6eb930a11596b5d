package compose_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// stack is the compose stack every test of the package shares: starting it costs a minute.
type stack struct {
	root    string   // the repository
	env     []string // COMPOSE_PROJECT_NAME, FLOTILLA_TLS_DIR, ports
	project string
	tmp     string
}

var (
	theStack *stack
	// noEngine is why the suite is skipped ("" when a Docker engine answers).
	noEngine string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		noEngine = fmt.Sprintf("no Docker engine answers (docker info: %v: %s)", err, bytes.TrimSpace(out))
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "\n*** e2e/compose: CI=true but %s.\n*** The compose suite must run in CI: give the job a Docker engine.\n\n", noEngine)
			return 1
		}
		return m.Run() // every test skips, saying why
	}
	s, err := up()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e/compose: %v\n", err)
		if s != nil {
			s.logs()
			s.down()
		}
		return 1
	}
	theStack = s
	// Interrupted (Ctrl-C, go test's timeout kills differently), the stack still goes.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		fmt.Fprintln(os.Stderr, "e2e/compose: interrupted; removing the stack")
		s.down()
		os.Exit(1)
	}()
	code := m.Run()
	if code != 0 {
		s.logs()
	}
	if os.Getenv("FLOTILLA_COMPOSE_KEEP") == "1" {
		fmt.Fprintf(os.Stderr, "e2e/compose: FLOTILLA_COMPOSE_KEEP=1: the stack %s stays up\n", s.project)
		return code
	}
	s.down()
	return code
}

// up starts a stack of its own (project name, TLS files, no host ports taken) and waits until
// every service is healthy and both members joined.
func up() (*stack, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "flotilla-compose-")
	if err != nil {
		return nil, err
	}
	s := &stack{root: root, project: fmt.Sprintf("flotilla-e2e-%d", os.Getpid()), tmp: tmp}
	tls := filepath.Join(tmp, "tls")
	s.env = append(os.Environ(),
		"COMPOSE_PROJECT_NAME="+s.project,
		"FLOTILLA_TLS_DIR="+tls,
		// Host ports 0: Docker picks free ones, so a stack already running here is no obstacle.
		"FLOTILLA_NATS_PORT=0", "FLOTILLA_NATS_MONITOR_PORT=0", "FLOTILLA_POSTGRES_PORT=0",
		// The repository's .env stays the developer's stack's.
		"FLOTILLA_COMPOSE_DOTENV=0")
	if out, err := s.cmd("bash", "deploy/tls.sh", "--readable", tls, "member-1", "member-2").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("deploy/tls.sh: %v: %s", err, out)
	}
	begin := time.Now()
	c := s.cmd("bash", "hack/compose.sh", "up")
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	if err := c.Run(); err != nil {
		return s, fmt.Errorf("hack/compose.sh up: %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e/compose: stack %s healthy, members joined, in %s\n", s.project, time.Since(begin).Round(time.Second))
	// The images are built: later ups (down and up again) skip hack/images.sh.
	s.env = append(s.env, "FLOTILLA_IMAGES_BUILT=1")
	return s, nil
}

func (s *stack) cmd(name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.Dir, c.Env = s.root, s.env
	return c
}

// compose runs a docker compose command on the stack's files (through hack/compose.sh).
func (s *stack) compose(t testing.TB, stdin string, args ...string) (string, error) {
	t.Helper()
	c := s.cmd("bash", append([]string{"hack/compose.sh"}, args...)...)
	c.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return out.String(), fmt.Errorf("docker compose %s: %v: %s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String(), nil
}

func (s *stack) mustCompose(t testing.TB, args ...string) string {
	t.Helper()
	out, err := s.compose(t, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fleetctl runs fleetctl in its container, as a user of the stack would.
func (s *stack) fleetctl(t testing.TB, stdin string, args ...string) (string, error) {
	t.Helper()
	return s.compose(t, stdin, append([]string{"--profile", "tools", "run", "--rm", "-T", "fleetctl"}, args...)...)
}

func (s *stack) apply(t testing.TB, manifests string) {
	t.Helper()
	if out, err := s.fleetctl(t, manifests, "apply", "-f", "-"); err != nil {
		t.Fatalf("fleetctl apply: %v\n%s", err, out)
	}
}

func (s *stack) deleteAtEnd(t testing.TB, crp string) {
	t.Cleanup(func() {
		if out, err := s.fleetctl(t, "", "delete", "crp", crp); err != nil {
			t.Logf("fleetctl delete crp %s: %v\n%s", crp, err, out)
		}
	})
}

func (s *stack) crp(t testing.TB, name string) (*api.ClusterResourcePlacement, error) {
	out, err := s.fleetctl(t, "", "get", "crp", name, "-o", "json")
	if err != nil {
		return nil, err
	}
	var crp api.ClusterResourcePlacement
	if err := json.Unmarshal([]byte(out), &crp); err != nil {
		return nil, fmt.Errorf("fleetctl get crp %s -o json: %w: %s", name, err, out)
	}
	return &crp, nil
}

// waitAvailable waits until the placement reports its current generation available on every
// member.
func (s *stack) waitAvailable(t testing.TB, name string, members ...string) {
	t.Helper()
	poll.Every(t, 2*time.Second, 5*time.Minute, name+" available on "+strings.Join(members, ", "), func() error {
		crp, err := s.crp(t, name)
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(crp.Status.Conditions, string(api.ClusterResourcePlacementAvailableConditionType)); c == nil ||
			c.Status != "True" || c.ObservedGeneration != crp.Generation {
			return fmt.Errorf("ClusterResourcePlacementAvailable is %+v (generation %d)", c, crp.Generation)
		}
		for _, m := range members {
			st := placementStatus(crp, m)
			if st == nil {
				return fmt.Errorf("no placement status for %s", m)
			}
			if c := meta.FindStatusCondition(st.Conditions, string(api.PerClusterAvailableConditionType)); c == nil || c.Status != "True" {
				return fmt.Errorf("%s: Available is %+v", m, c)
			}
		}
		return nil
	})
}

// logs prints the last lines of every container's log, for a failure's reader.
func (s *stack) logs() {
	c := s.cmd("bash", "hack/compose.sh", "logs", "--no-color", "--tail", "40")
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	_ = c.Run()
}

// down removes the stack, its volumes and its TLS files.
func (s *stack) down() {
	c := s.cmd("bash", "hack/compose.sh", "--profile", "tools", "down", "-v", "--remove-orphans", "--timeout", "5")
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	if err := c.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e/compose: down: %v\n", err)
	}
	os.RemoveAll(s.tmp)
}

// stackFor returns the shared stack, or skips the test where no Docker engine answers (outside
// CI: there TestMain fails instead).
func stackFor(t *testing.T) *stack {
	t.Helper()
	if noEngine != "" {
		t.Skipf("the compose suite needs a Docker engine: %s", noEngine)
	}
	return theStack
}

func placementStatus(crp *api.ClusterResourcePlacement, member string) *api.ResourcePlacementStatus {
	for i := range crp.Status.PlacementStatuses {
		if crp.Status.PlacementStatuses[i].ClusterName == member {
			return &crp.Status.PlacementStatuses[i]
		}
	}
	return nil
}
