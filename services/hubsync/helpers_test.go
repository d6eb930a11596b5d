package hubsync_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/services/apply/worker"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
	"github.com/flotilla-dev/flotilla/services/hubsync"
	"github.com/flotilla-dev/flotilla/services/hubsync/crds"
	"github.com/flotilla-dev/flotilla/services/rollout"
	"github.com/flotilla-dev/flotilla/services/scheduler"
	"github.com/flotilla-dev/flotilla/services/status"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

// patience bounds each wait for the fleet; generous, as the machine may be busy.
const (
	patience = 3 * time.Minute
	step     = 200 * time.Millisecond
)

// fixture is a hub (a real kube-apiserver), two real members with apply workers, the hub
// services in process on a real NATS and PostgreSQL, and hubsync replicas.
type fixture struct {
	t    *testing.T
	env  *servicetest.Env
	kube *kube.Env
	hub  dynamic.Interface
	// hubKube is the hub's typed client.
	hubKube kubernetes.Interface
	members []string
	q       *query.Client

	mu     sync.Mutex
	passes map[string][]hubsync.Pass // by replica identity
	stops  map[string]func()
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if testing.Short() {
		t.Skip("starts three kube-apiservers")
	}
	env := servicetest.New(t)
	k := kube.StartTWith(t, kube.Options{Members: []string{"hub", "member-1", "member-2"}})
	hubREST := k.RESTConfig("hub")
	f := &fixture{t: t, env: env, kube: k, members: []string{"member-1", "member-2"},
		hub: dynamic.NewForConfigOrDie(hubREST), hubKube: kubernetes.NewForConfigOrDie(hubREST),
		q: query.New(env.NC), passes: map[string][]hubsync.Pass{}, stops: map[string]func(){}}
	opts := env.Options()
	env.Run("scheduler", func(ctx context.Context) error { return scheduler.Run(ctx, scheduler.Config{Options: opts}) })
	env.Run("rollout", func(ctx context.Context) error { return rollout.Run(ctx, rollout.Config{Options: opts}) })
	env.Run("status", func(ctx context.Context) error { return status.Run(ctx, status.Config{Options: opts}) })
	return f
}

// startHubsync runs a hubsync replica until the returned stop or the test's end.
func (f *fixture) startHubsync(identity string) (stop func()) {
	opts := f.env.Options()
	opts.HealthAddr = ""
	cfg := hubsync.Config{Options: opts, REST: f.kube.RESTConfig("hub"), Identity: identity,
		WebhookListen: "127.0.0.1:0",
		AfterPass: func(p hubsync.Pass) {
			f.mu.Lock()
			f.passes[identity] = append(f.passes[identity], p)
			f.mu.Unlock()
		}}
	stop = f.env.Run("hubsync "+identity, func(ctx context.Context) error { return hubsync.Run(ctx, cfg) })
	f.mu.Lock()
	f.stops[identity] = stop
	f.mu.Unlock()
	return stop
}

// passCount is how many passes a replica completed.
func (f *fixture) passCount(identity string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.passes[identity])
}

// waitForPass waits until the replica completes a pass after the first n, and returns that
// pass (number n+1).
func (f *fixture) waitForPass(identity string, n int) hubsync.Pass {
	f.t.Helper()
	var p hubsync.Pass
	poll.Every(f.t, step, patience, identity+" to complete a pass", func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.passes[identity]) <= n {
			return fmt.Errorf("%d pass(es) so far", len(f.passes[identity]))
		}
		p = f.passes[identity][n]
		return nil
	})
	return p
}

// startWorkers runs the members' apply workers.
func (f *fixture) startWorkers() {
	var ms []worker.Member
	for _, m := range f.members {
		ms = append(ms, worker.Member{Name: m, REST: f.kube.RESTConfig(m)})
	}
	f.env.Run("apply workers", func(ctx context.Context) error {
		return worker.RunMembers(ctx, f.env.JS, ms, worker.Config{HeartbeatPeriod: 5 * time.Second, Logger: f.env.Logger()})
	})
}

// kubectl runs the real kubectl (from the kube binaries) against the hub, as a user would.
func (f *fixture) kubectl(stdin string, args ...string) (string, error) {
	f.t.Helper()
	bin, err := kube.BinDir()
	if err != nil {
		f.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", f.kube.Kubeconfig("hub")}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if err != nil {
		return out.String() + errOut.String(), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// apply is kubectl apply -f - on the hub, which must succeed.
func (f *fixture) apply(manifests string) {
	f.t.Helper()
	out, err := f.kubectl(manifests, "apply", "-f", "-")
	if err != nil {
		f.t.Fatalf("%v\ninput:\n%s", err, manifests)
	}
	f.t.Logf("kubectl apply:\n%s", strings.TrimSpace(out))
}

// placement is the hub's ClusterResourcePlacement.
func (f *fixture) placement(name string) (*unstructured.Unstructured, error) {
	return f.hub.Resource(crds.Placement.GVR()).Get(f.t.Context(), name, metav1.GetOptions{})
}

// subjectCounts counts the events on the input subjects hubsync publishes on (placements,
// members without heartbeats, hub objects).
func (f *fixture) subjectCounts() map[string]uint64 {
	f.t.Helper()
	stream, err := f.env.JS.Stream(f.t.Context(), bus.StreamEvents)
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, filter := range []string{bus.SubjectsPlacement, "flotilla.member.*", bus.SubjectsHub} {
		info, err := stream.Info(f.t.Context(), jetstream.WithSubjectFilter(filter))
		if err != nil {
			f.t.Fatal(err)
		}
		for s, n := range info.State.Subjects {
			out[s] = n
		}
	}
	return out
}

// memberClusters is the MemberCluster objects of the members, as a user applies them.
func (f *fixture) memberClusters() string {
	var b strings.Builder
	for i, m := range f.members {
		fmt.Fprintf(&b, `---
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata:
  name: %s
  labels:
    region: region-%d
spec:
  heartbeatPeriodSeconds: 5
  identity:
    kind: ServiceAccount
    name: fleet-member-agent-%s
    namespace: fleet-system
    apiGroup: ""
`, m, i+1, m)
	}
	return b.String()
}

// conditionOf reads a condition of an object's status.conditions.
func conditionOf(u *unstructured.Unstructured, typ string) (metav1.Condition, bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		var out metav1.Condition
		out.Type = typ
		out.Status = metav1.ConditionStatus(fmt.Sprint(m["status"]))
		out.Reason, _ = m["reason"].(string)
		out.Message, _ = m["message"].(string)
		out.ObservedGeneration, _ = m["observedGeneration"].(int64)
		return out, true
	}
	return metav1.Condition{}, false
}

// availableAt waits until the hub's placement is Available for its current generation, as
// kubectl wait --for=condition=ClusterResourcePlacementAvailable judges it.
func (f *fixture) availableAt(name string) *unstructured.Unstructured {
	f.t.Helper()
	var crp *unstructured.Unstructured
	poll.Every(f.t, step, patience, name+" to be available on the hub", func() error {
		var err error
		if crp, err = f.placement(name); err != nil {
			return err
		}
		c, ok := conditionOf(crp, string(api.ClusterResourcePlacementAvailableConditionType))
		switch {
		case !ok:
			return errors.New("no Available condition in the hub's status yet")
		case c.ObservedGeneration != crp.GetGeneration():
			return fmt.Errorf("Available is observed for generation %d, the hub's object is at %d", c.ObservedGeneration, crp.GetGeneration())
		case c.Status != metav1.ConditionTrue:
			return fmt.Errorf("Available is %s: %s", c.Status, c.Message)
		}
		return nil
	})
	return crp
}

// stopReplica stops a replica started by startHubsync.
func (f *fixture) stopReplica(identity string) {
	f.mu.Lock()
	stop := f.stops[identity]
	f.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func kubernetesFor(f *fixture, member string) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(f.kube.RESTConfig(member))
}

// fleetctl runs fleetctl against the test's bus, as a user types it.
func (f *fixture) fleetctl(stdin string, args ...string) (string, error) {
	var out bytes.Buffer
	err := cli.Run(f.t.Context(), append([]string{"--nats", f.env.NATSURL}, args...), cli.Options{
		In: strings.NewReader(stdin), Out: &out, Err: &out, Getenv: func(string) string { return "" },
	})
	return out.String(), err
}
