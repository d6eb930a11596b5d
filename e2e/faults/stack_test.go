package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
)

// memberCount is how many member clusters the stack runs, each with its apply worker.
const memberCount = 3

// heartbeatPeriod is the members' heartbeat period: short, so that the members join within
// seconds, and long enough that a busy machine does not miss three in a row.
const heartbeatPeriod = 15 * time.Second

// patience bounds every wait for the fleet: generous, since the machine may be slow and busy;
// it only stops a test that would never pass.
const patience = 15 * time.Minute

// The hub services, in the order they start.
var hubServices = []string{"scheduler", "rollout", "status"}

// stack is Flotilla run as compose runs it: every service its own process, on a NATS server
// process, a PostgreSQL and real member clusters.
type stack struct {
	dir     string // logs and data, kept when the test fails
	natsURL string
	nats    *daemon
	pg      *postgres.Server
	dbURL   string
	kube    *kube.Env
	members []string
	// services are the hub services by name, workers the apply workers by member.
	services map[string]*daemon
	workers  map[string]*daemon
	db       *pgxpool.Pool
	nc       *nats.Conn
	js       jetstream.JetStream
	clients  map[string]dynamic.Interface
}

// startStack starts everything and waits until every member has joined and is healthy.
func startStack(t *testing.T) *stack {
	t.Helper()
	bins := binaries(t)
	dir, err := os.MkdirTemp("", "flotilla-faults-")
	if err != nil {
		t.Fatal(err)
	}
	// PostgreSQL may run as another user (when the tests run as root) and writes nothing here,
	// but a person looking into a failure should be able to read everything.
	_ = os.Chmod(dir, 0o755)
	s := &stack{dir: dir, services: map[string]*daemon{}, workers: map[string]*daemon{}, clients: map[string]dynamic.Interface{}}
	t.Cleanup(func() { s.stop(t) })

	s.startPostgres(t)
	s.startNATS(t, bins)
	s.kube = kube.StartTWith(t, kube.Options{N: memberCount, Dir: dir})
	s.members = s.kube.Members()
	for _, m := range s.members {
		s.clients[m] = dynamic.NewForConfigOrDie(s.kube.RESTConfig(m))
	}
	for _, name := range hubServices {
		s.services[name] = s.startService(t, name, filepath.Join(bins, name), "--database-url", s.dbURL)
	}
	s.waitReady(t, s.services)
	s.joinMembers(t)
	for _, m := range s.members {
		s.workers[m] = s.startService(t, "apply-"+m, filepath.Join(bins, "apply"),
			"--cluster", m, "--kubeconfig", s.kube.Kubeconfig(m), "--heartbeat-period", heartbeatPeriod.String())
	}
	s.waitReady(t, s.workers)
	s.waitForMembers(t)
	return s
}

func (s *stack) startPostgres(t *testing.T) {
	t.Helper()
	pg, err := postgres.Start(t.Context(), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.pg = pg
	if s.dbURL, err = pg.EnsureDatabase(t.Context(), "flotilla"); err != nil {
		t.Fatal(err)
	}
	if s.db, err = pgxpool.New(context.Background(), s.dbURL); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL %s on 127.0.0.1:%d", pg.Version(), pg.Port())
}

// startNATS runs nats-server as its own process with JetStream in the stack's directory; a
// restart is a real stop and start, on the same port with the same store.
func (s *stack) startNATS(t *testing.T, bins string) {
	t.Helper()
	ports := freePorts(t, 2)
	s.natsURL = "nats://127.0.0.1:" + strconv.Itoa(ports[0])
	s.nats = &daemon{
		name: "nats-server", bin: filepath.Join(bins, "nats-server"),
		args: []string{"-js", "-sd", filepath.Join(s.dir, "nats"), "-a", "127.0.0.1", "-p", strconv.Itoa(ports[0]),
			"-n", "flotilla", "-m", strconv.Itoa(ports[1])},
		env:        cleanEnv(),
		logPath:    filepath.Join(s.dir, "nats-server.log"),
		readyURL:   fmt.Sprintf("http://127.0.0.1:%d/healthz?js-enabled-only=true", ports[1]),
		stopSignal: syscall.SIGTERM,
	}
	if err := s.nats.start(); err != nil {
		t.Fatal(err)
	}
	s.waitReady(t, map[string]*daemon{"nats": s.nats})
	s.connect(t)
	t.Logf("nats-server process at %s (JetStream in %s)", s.natsURL, filepath.Join(s.dir, "nats"))
}

// connect connects the test to NATS, for reading the streams; the connection outlives
// restarts of the server.
func (s *stack) connect(t *testing.T) {
	t.Helper()
	nc, err := nats.Connect(s.natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	s.nc = nc
	if s.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
}

// startService starts a service's binary with the shared flags and extra.
func (s *stack) startService(t *testing.T, name, bin string, extra ...string) *daemon {
	t.Helper()
	health := freePorts(t, 1)[0]
	args := append([]string{"--nats", s.natsURL, "--health-addr", "127.0.0.1:" + strconv.Itoa(health), "--log-format", "text", "--log-level", "debug"}, extra...)
	d := &daemon{
		name: name, bin: bin, args: args, env: cleanEnv(),
		logPath:  filepath.Join(s.dir, name+".log"),
		readyURL: fmt.Sprintf("http://127.0.0.1:%d/readyz", health),
	}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	return d
}

func (s *stack) waitReady(t *testing.T, ds map[string]*daemon) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	for _, d := range ds {
		if err := d.WaitReady(ctx); err != nil {
			t.Fatalf("%v; last lines of %s:\n%s", err, d.logPath, tail(d.logPath, 30))
		}
	}
}

// joinMembers makes the members join, as `fleetctl apply -f` of their MemberClusters.
func (s *stack) joinMembers(t *testing.T) {
	t.Helper()
	var b strings.Builder
	for i, m := range s.members {
		fmt.Fprintf(&b, `---
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata:
  name: %s
  labels:
    fault-suite: "true"
    index: "%d"
spec:
  heartbeatPeriodSeconds: %d
`, m, i+1, int(heartbeatPeriod.Seconds()))
	}
	s.apply(t, b.String())
}

// waitForMembers waits until every member is joined and healthy, as fleetctl shows them.
func (s *stack) waitForMembers(t *testing.T) {
	t.Helper()
	poll.Every(t, time.Second, patience, "every member to be joined and healthy", func() error {
		out, errOut, err := s.fleetctl(t.Context(), "", "get", "members", "-o", "json")
		if err != nil {
			return fmt.Errorf("fleetctl get members: %v %s", err, errOut)
		}
		var list struct {
			Items []api.MemberCluster `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			return fmt.Errorf("fleetctl get members -o json: %v\n%s", err, out)
		}
		ready := map[string]bool{}
		for _, m := range list.Items {
			ready[m.Name] = meta.IsStatusConditionTrue(m.Status.Conditions, string(api.ConditionTypeMemberClusterJoined)) &&
				meta.IsStatusConditionTrue(m.Status.Conditions, string(api.ConditionTypeMemberClusterHealthy))
		}
		for _, m := range s.members {
			if !ready[m] {
				return fmt.Errorf("%s is not joined and healthy", m)
			}
		}
		return nil
	})
}

// fleetctl runs fleetctl against the stack, as a user types it.
func (s *stack) fleetctl(ctx context.Context, stdin string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = cli.Run(ctx, append([]string{"--nats", s.natsURL}, args...), cli.Options{
		In: strings.NewReader(stdin), Out: &out, Err: &errOut,
		Getenv: func(string) string { return "" }, // this stack only, whatever the environment says
	})
	return out.String(), errOut.String(), err
}

// apply runs `fleetctl apply -f -` with manifests on standard input, retrying while the bus or
// the status service does not answer (a fault may just have ended).
func (s *stack) apply(t *testing.T, manifests string) {
	t.Helper()
	poll.Every(t, time.Second, patience, "fleetctl apply", func() error {
		out, errOut, err := s.fleetctl(t.Context(), manifests, "apply", "-f", "-")
		if err != nil {
			return fmt.Errorf("%v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
		}
		return nil
	})
}

// crashes are the exits of any process that the test did not cause.
func (s *stack) crashes() []string {
	var out []string
	for _, d := range s.daemons() {
		out = append(out, d.Crashes()...)
	}
	return out
}

func (s *stack) daemons() []*daemon {
	ds := []*daemon{s.nats}
	for _, name := range slices.Sorted(maps.Keys(s.services)) {
		ds = append(ds, s.services[name])
	}
	for _, m := range slices.Sorted(maps.Keys(s.workers)) {
		ds = append(ds, s.workers[m])
	}
	var out []*daemon
	for _, d := range ds {
		if d != nil {
			out = append(out, d)
		}
	}
	return out
}

// stop stops everything; the directory is kept, and named, when the test failed.
func (s *stack) stop(t *testing.T) {
	var wg sync.WaitGroup
	for _, d := range s.daemons() {
		if d != s.nats {
			wg.Go(d.Stop)
		}
	}
	wg.Wait()
	if s.nc != nil {
		s.nc.Close()
	}
	if s.nats != nil {
		s.nats.Stop()
	}
	if s.db != nil {
		s.db.Close()
	}
	if s.pg != nil {
		if err := s.pg.Stop(); err != nil {
			t.Log(err)
		}
	}
	if t.Failed() || os.Getenv(EnvKeep) != "" {
		t.Logf("the stack's logs and data are kept for a look: %s", s.dir)
		return
	}
	os.RemoveAll(s.dir)
}

// cleanEnv is the test's environment without the settings that would point a service
// elsewhere than this stack.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "FLOTILLA_") || strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "KUBECONFIG=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
