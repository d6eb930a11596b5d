package standalone

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
	"github.com/flotilla-dev/flotilla/services/standalone/quickstart"
)

// The quick start from end to end on real parts: two local member clusters, the example
// placed and converged with its pre-existing Deployment taken over without a restart; then a
// second run on the same data dir finds everything where the first left it.
func TestQuickStartRunsAndResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, NATS and two member clusters")
	}
	dataDir := reachableDataDir(t)

	first := start(t, Config{DataDir: dataDir, LocalMembers: 2, Example: true, SimulatedNodes: true})
	nc, q := connect(t, first.NATSURL)

	members := waitFor(t, "both members to join", func(ctx context.Context) ([]api.MemberCluster, error) {
		ms, err := q.Members(ctx, "")
		if err != nil {
			return nil, err
		}
		var joinedNames []string
		for i := range ms {
			if joined(&ms[i]) {
				joinedNames = append(joinedNames, ms[i].Name)
			}
		}
		if len(joinedNames) != 2 {
			return nil, fmt.Errorf("joined: %v", joinedNames)
		}
		return ms, nil
	})
	regions := map[string]string{}
	for _, m := range members {
		regions[m.Name] = m.Labels["region"]
	}
	if regions["member-1"] != "east" || regions["member-2"] != "west" {
		t.Errorf("members joined with regions %v, want member-1 east and member-2 west", regions)
	}

	crp := waitFor(t, "the example placement to be applied and available", func(ctx context.Context) (*api.ClusterResourcePlacement, error) {
		crp, err := q.Placement(ctx, "quickstart")
		if err != nil {
			return nil, err
		}
		if !quickstart.Converged(crp, true) {
			return nil, fmt.Errorf("conditions %s", summarize(crp.Status.Conditions))
		}
		return crp, nil
	})
	if got := placedOn(crp); strings.Join(got, ",") != "member-1,member-2" {
		t.Errorf("placed on %v, want member-1 and member-2 (one per region)", got)
	}
	checkMetrics(t, first.MetricsURL)

	// The pre-existing Deployment on member-1 was taken over, not replaced.
	takeovers, err := q.Takeovers(t.Context(), events.TakeoverQuery{Placement: "quickstart"})
	if err != nil {
		t.Fatal(err)
	}
	if !tookOver(takeovers, "member-1", "Deployment", "web") {
		t.Errorf("no TakenOver decision for Deployment web on member-1: %+v", takeovers)
	}
	kubeconfig := filepath.Join(dataDir, "members", "member-1.kubeconfig")
	saved, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	deploy := memberClient(t, saved)
	d, err := deploy.Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetGeneration() != 1 {
		t.Errorf("Deployment web on member-1 is at generation %d after the takeover: it was changed (restarted)", d.GetGeneration())
	}
	uid := d.GetUID()
	stored := streamMessages(t, nc)
	nc.Close()
	first.stop(t)

	// The second run: no example this time, only what the first run left.
	second := start(t, Config{DataDir: dataDir, LocalMembers: 2, SimulatedNodes: true})
	_, q = connect(t, second.NATSURL)
	again := waitFor(t, "the placement to be listed after the restart", func(ctx context.Context) (*api.ClusterResourcePlacement, error) {
		list, err := q.Placements(ctx, "")
		if err != nil {
			return nil, err
		}
		for i := range list {
			if list[i].Name == "quickstart" {
				return &list[i], nil
			}
		}
		return nil, errors.New("not listed")
	})
	if again.Generation != crp.Generation || !quickstart.Converged(again, true) {
		t.Errorf("after the restart the placement is at generation %d with conditions %s; before: generation %d, converged",
			again.Generation, summarize(again.Status.Conditions), crp.Generation)
	}
	nc2, _ := connect(t, second.NATSURL)
	for _, name := range []string{"member-1", "member-2"} {
		m, err := q.Member(t.Context(), name)
		if err != nil || !joined(m) {
			t.Errorf("%s is not in the fleet after the restart: %v", name, err)
		}
		// A member the fleet knows is not joined again: that would undo labels the user
		// changed since.
		if n := joins(t, nc2, name); n != 1 {
			t.Errorf("%s joined %d times over two runs, want once", name, n)
		}
	}
	if takeovers, err := q.Takeovers(t.Context(), events.TakeoverQuery{Placement: "quickstart"}); err != nil || !tookOver(takeovers, "member-1", "Deployment", "web") {
		t.Errorf("the takeover history did not survive the restart: %+v, %v", takeovers, err)
	}
	// The kubeconfig saved before the restart still reaches member-1, whose etcd kept its data.
	d, err = memberClient(t, saved).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the kubeconfig from the first run no longer works: %v", err)
	}
	if d.GetUID() != uid || d.GetGeneration() != 1 {
		t.Errorf("Deployment web on member-1 is not the same object after the restart: uid %s generation %d, was %s generation 1",
			d.GetUID(), d.GetGeneration(), uid)
	}
	if now := streamMessages(t, nc2); now < stored {
		t.Errorf("the EVENTS stream holds %d messages after the restart, %d before", now, stored)
	}
	second.stop(t)
}

// placedOn lists the clusters the placement has a status for.
func placedOn(crp *api.ClusterResourcePlacement) []string {
	var out []string
	for _, ps := range crp.Status.PlacementStatuses {
		out = append(out, ps.ClusterName)
	}
	return out
}

func examplesDir(t *testing.T) string {
	t.Helper()
	dir, err := quickstart.FindExamplesDir(".")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// running is a Run in progress.
type running struct {
	Endpoints
	cancel context.CancelFunc
	errc   chan error
}

// start runs Run with cfg on a free NATS port and returns once it is ready.
func start(t *testing.T, cfg Config) *running {
	t.Helper()
	cfg.NATSListen = "127.0.0.1:0"
	cfg.MetricsListen = "127.0.0.1:0"
	cfg.ExamplesDir = examplesDir(t)
	cfg.Out = &testWriter{t: t}
	logPath := filepath.Join(cfg.DataDir, "test.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ready := make(chan Endpoints, 1)
	cfg.Ready = func(e Endpoints) { ready <- e }

	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- Run(ctx, cfg) }()
	t.Cleanup(func() {
		r.stop(t)
		logf.Close()
		if t.Failed() {
			t.Logf("last lines of the services' log %s:\n%s", logPath, tail(logPath, 60))
		}
	})
	select {
	case r.Endpoints = <-ready:
		return r
	case err := <-r.errc:
		r.errc <- err
		t.Fatalf("Run ended before it was ready: %v", err)
	case <-time.After(10 * time.Minute):
		t.Fatal("Run was not ready after 10 minutes")
	}
	return nil
}

// stop ends the run as Ctrl-C does and checks that it stopped cleanly.
func (r *running) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	if err := <-r.errc; err != nil {
		t.Errorf("Run after Ctrl-C: %v", err)
	}
}

func connect(t *testing.T, url string) (*nats.Conn, *query.Client) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc, query.New(nc)
}

// waitFor polls check until it succeeds. The bound is generous (a busy machine is slow): it
// only stops a test whose setup is broken.
func waitFor[T any](t *testing.T, what string, check func(context.Context) (T, error)) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	for {
		v, err := check(ctx)
		if err == nil {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func summarize(conds []metav1.Condition) string {
	var parts []string
	for _, c := range conds {
		parts = append(parts, fmt.Sprintf("%s=%s(%s)", strings.TrimPrefix(c.Type, "ClusterResourcePlacement"), c.Status, c.Reason))
	}
	return strings.Join(parts, " ")
}

func tookOver(records []events.TakeoverRecord, cluster, kind, name string) bool {
	for _, r := range records {
		if r.Cluster == cluster && r.Resource.Kind == kind && r.Resource.Name == name && r.Outcome == "TakenOver" {
			return true
		}
	}
	return false
}

// memberClient reaches the quickstart Deployments of a member through a kubeconfig's content.
func memberClient(t *testing.T, kubeconfig []byte) dynamic.ResourceInterface {
	t.Helper()
	rc, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	return c.Resource(deployments).Namespace("quickstart")
}

func streamMessages(t *testing.T, nc *nats.Conn) uint64 {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// joins counts the MemberJoined events of member in the EVENTS stream.
func joins(t *testing.T, nc *nats.Conn, member string) int {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := events.MemberSubject(member)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(t.Context(), bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	total := info.State.Subjects[subject]
	c, err := js.OrderedConsumer(t.Context(), bus.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for read := uint64(0); read < total; {
		batch, err := c.Fetch(int(min(total-read, 500)), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			if ev, err := bus.DecodeJetStream(msg); err == nil && ev.Type() == events.TypeMemberJoined {
				n++
			}
		}
		if got == 0 {
			t.Fatalf("read %d of the %d messages on %s", read, total, subject)
		}
		read += uint64(got)
	}
	return n
}

// reachableDataDir is a temporary data dir that PostgreSQL's user can reach when the tests
// run as root (a t.TempDir() is not: its parents are 0700).
func reachableDataDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/tmp", "flotilla-standalone-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

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

// testWriter logs what Run prints, a line at a time, until the test ends.
type testWriter struct {
	t   *testing.T
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err == io.EOF {
			w.buf.WriteString(line)
			return len(p), nil
		}
		w.t.Log(strings.TrimRight(line, "\n"))
	}
}
