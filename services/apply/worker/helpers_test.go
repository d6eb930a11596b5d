package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/services/apply/internal/applytest"
	"github.com/flotilla-dev/flotilla/services/apply/worker"
)

// Real member clusters for the package: member-1 and member-2.
var members *kube.Env

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	env, err := kube.Start(ctx, kube.Options{N: 2})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	members = env
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// timeout bounds waits for the worker and controllers on a busy machine; a
// wait asks the member's API server again every step.
const (
	timeout = 60 * time.Second
	step    = 50 * time.Millisecond
)

// fleet is a bus with the topology in place and a recorder of what the apply
// workers publish.
type fleet struct {
	t  *testing.T
	nc *nats.Conn
	js jetstream.JetStream

	mu        sync.Mutex
	reports   []*events.WorkReported
	takeovers []*events.TakeoversDecided
	beats     []*events.MemberHeartbeat
	changed   chan struct{}
}

func newFleet(t *testing.T) *fleet {
	t.Helper()
	_, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, nc: nc, js: js, changed: make(chan struct{}, 1)}
	for _, subj := range []string{"flotilla.workstatus.>", "flotilla.member.>"} {
		sub, err := nc.Subscribe(subj, f.record)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	return f
}

func (f *fleet) record(msg *nats.Msg) {
	ev, err := bus.Decode(msg)
	if err != nil {
		f.t.Errorf("undecodable message on %s: %v", msg.Subject, err)
		return
	}
	if err := events.Validate(ev); err != nil {
		f.t.Errorf("invalid event on %s: %v", msg.Subject, err)
		return
	}
	f.mu.Lock()
	switch ev.Type() {
	case events.TypeWorkReported:
		r, _ := events.DecodeAs[events.WorkReported](ev)
		f.reports = append(f.reports, r)
	case events.TypeTakeoversDecided:
		d, _ := events.DecodeAs[events.TakeoversDecided](ev)
		f.takeovers = append(f.takeovers, d)
	case events.TypeMemberHeartbeat:
		hb, _ := events.DecodeAs[events.MemberHeartbeat](ev)
		f.beats = append(f.beats, hb)
	}
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// mark is the position of the next report, for waitReportAfter.
func (f *fleet) mark() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reports)
}

// waitReport waits for a report of placement on cluster that satisfies ok
// and returns it.
func (f *fleet) waitReport(cluster, placement, what string, ok func(*events.WorkReported) bool) *events.WorkReported {
	f.t.Helper()
	return f.waitReportAfter(0, cluster, placement, what, ok)
}

// waitReportAfter is waitReport for reports published after mark.
func (f *fleet) waitReportAfter(mark int, cluster, placement, what string, ok func(*events.WorkReported) bool) *events.WorkReported {
	f.t.Helper()
	deadline := time.After(timeout)
	seen := mark
	for {
		f.mu.Lock()
		for ; seen < len(f.reports); seen++ {
			r := f.reports[seen]
			if r.Cluster == cluster && r.Placement == placement && ok(r) {
				f.mu.Unlock()
				return r
			}
		}
		last := ""
		if len(f.reports) > 0 {
			last = dump(f.reports[len(f.reports)-1])
		}
		f.mu.Unlock()
		select {
		case <-f.changed:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			f.t.Fatalf("no report of %s on %s: %s; last report: %s", placement, cluster, what, last)
		}
	}
}

func (f *fleet) waitHeartbeat(cluster, what string, ok func(*events.MemberHeartbeat) bool) *events.MemberHeartbeat {
	f.t.Helper()
	deadline := time.After(timeout)
	for {
		f.mu.Lock()
		for _, hb := range f.beats {
			if hb.Name == cluster && ok(hb) {
				f.mu.Unlock()
				return hb
			}
		}
		f.mu.Unlock()
		select {
		case <-f.changed:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			f.t.Fatalf("no heartbeat of %s: %s", cluster, what)
		}
	}
}

func (f *fleet) publish(subject, typ string, payload any) {
	f.t.Helper()
	ev, err := events.New(typ, "test", subject, "", payload)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := bus.NewPublisher(f.js).Publish(f.t.Context(), subject, ev); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) desire(w *events.WorkDesired) {
	f.t.Helper()
	subject, err := events.WorkSubject(w.Cluster, w.Placement)
	if err != nil {
		f.t.Fatal(err)
	}
	f.publish(subject, events.TypeWorkDesired, w)
}

func (f *fleet) tombstone(cluster, placement string, strategy api.DeleteStrategy) {
	f.t.Helper()
	subject, err := events.WorkSubject(cluster, placement)
	if err != nil {
		f.t.Fatal(err)
	}
	f.publish(subject, events.TypeWorkTombstoned, &events.WorkTombstoned{
		Cluster: cluster, Placement: placement, DeleteStrategy: strategy, Reason: "test"})
}

// start runs a worker for cluster until the test ends or stop is called.
func (f *fleet) start(cluster string, tune func(*worker.Config)) (stop func()) {
	f.t.Helper()
	cfg := worker.Config{Cluster: cluster, REST: members.RESTConfig(cluster), JetStream: f.js, HeartbeatPeriod: time.Second}
	if tune != nil {
		tune(&cfg)
	}
	w, err := worker.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				f.t.Errorf("worker %s: %v", cluster, err)
			}
		})
	}
	f.t.Cleanup(stop)
	return stop
}

// name derives a DNS label from the test's name, so tests do not collide.
func name(t testing.TB, suffix string) string { return applytest.Name(t, suffix) }

func work(t testing.TB, cluster, placement string, strategy api.ApplyStrategy, manifests ...string) *events.WorkDesired {
	t.Helper()
	return applytest.Work(t, cluster, placement, strategy, manifests...)
}

func client(t testing.TB, cluster string) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(members.RESTConfig(cluster))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	namespaces  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	configMaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	nodes       = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

func get(t testing.TB, cluster string, gvr schema.GroupVersionResource, ns, n string) *unstructured.Unstructured {
	t.Helper()
	u, err := client(t, cluster).Resource(gvr).Namespace(ns).Get(context.Background(), n, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func dump(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func nsYAML(ns string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", ns)
}

func configMapYAML(ns, n, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  key: %q\n", n, ns, value)
}

func deploymentYAML(ns, n, image string) string {
	return fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, namespace: %s}
spec:
  replicas: 0
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      containers: [{name: app, image: %[3]q}]
`, n, ns, image)
}

func result(r *events.WorkReported, kind, n string) (events.ManifestResult, bool) {
	for _, m := range r.Manifests {
		if m.Resource.Kind == kind && m.Resource.Name == n {
			return m, true
		}
	}
	return events.ManifestResult{}, false
}
