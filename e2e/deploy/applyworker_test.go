package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/apply/worker"
)

// TestApplyWorkerRunsWithItsOwnNATSUser runs the real apply worker for member-1 against a NATS
// server configured from the rendered overlay, connected as the NATS user its Deployment gives
// it, and a real member API server: the worker must start (its consumers), apply the work the
// control plane publishes, and report the result, all within its member's permissions.
func TestApplyWorkerRunsWithItsOwnNATSUser(t *testing.T) {
	const member = "member-1"
	r := render(t, filepath.Join(repoRoot(t), exampleOverlay))
	s := startNATS(t, r)
	// No deadline for the worker: its JetStream requests then time out after the client's
	// default, as in production, instead of waiting for the test's.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	var scheduler = r.deployments(t)[0]
	for _, d := range r.deployments(t) {
		if d.Name == "scheduler" {
			scheduler = d
		}
	}
	control := connect(t, natsURL(t, r, scheduler, s))
	cjs, err := jetstream.New(control)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureTopology(ctx, cjs, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}

	deployment, ok := r.applyWorkers(t)[member]
	if !ok {
		t.Fatalf("no apply worker for %s", member)
	}
	workerNATS := deploymentNATS(t, r, deployment, s)
	env := kube.StartTWith(t, kube.Options{Members: []string{member}, NoControllerManager: true})

	// The control plane's desired state for the member, before the worker starts: it must
	// replay it.
	var work events.WorkDesired
	golden, err := os.ReadFile(filepath.Join(repoRoot(t), "events/testdata/payloads/work.desired.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(golden, &work); err != nil {
		t.Fatal(err)
	}
	work.Cluster, work.Placement = member, "deploy-check"
	// Work too large to travel inline: the worker fetches it, by claim check, with its own
	// user's permissions.
	manifests, err := json.Marshal([]json.RawMessage{
		json.RawMessage(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"deploy-check"}}`),
		json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"large","namespace":"deploy-check"},"data":{"x":"` +
			strings.Repeat("x", events.InlineManifestsBytes) + `"}}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	prefix, err := bus.WorkBlobPrefix(member, work.Placement)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := bus.PutBlob(ctx, cjs, bus.StreamWorkBlobs, prefix, manifests)
	if err != nil {
		t.Fatal(err)
	}
	work.Manifests, work.ManifestsRef = nil, &ref
	subject, err := events.WorkSubject(member, work.Placement)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := events.New(events.TypeWorkDesired, "/flotilla/rollout", work.Placement, events.ID("deploy-check", member), work)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewPublisher(cjs).Publish(ctx, subject, ev); err != nil {
		t.Fatal(err)
	}

	status, err := events.WorkStatusSubject(member, work.Placement)
	if err != nil {
		t.Fatal(err)
	}
	reports, err := cjs.OrderedConsumer(ctx, bus.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{status}})
	if err != nil {
		t.Fatal(err)
	}

	stopped := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// As the Deployment runs it: --cluster and --kubeconfig, the URL with its user.
		stopped <- worker.Run(ctx, worker.Options{
			Options: service.Options{Role: service.Member, NATS: workerNATS,
				Logger: slog.New(slog.NewTextHandler(t.Output(), nil))},
			Cluster: member, Kubeconfig: env.Kubeconfig(member),
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})

	got := make(chan error, 1)
	go func() {
		wait, cancel := context.WithTimeout(ctx, 3*time.Minute) // a bound, not an expectation
		defer cancel()
		_, err := reports.Next(jetstream.FetchContext(wait))
		got <- err
	}()
	select {
	case err := <-stopped:
		t.Fatalf("the apply worker stopped with its own NATS user's permissions: %v", err)
	case err := <-got:
		if err != nil {
			t.Fatalf("no work report from the apply worker: %v", err)
		}
	}

	// Its heartbeats travel on the one member subject it may publish on.
	stream, err := cjs.Stream(ctx, bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, time.Minute, "a heartbeat from the worker", func() error {
		_, err := stream.GetLastMsgForSubject(ctx, must(events.HeartbeatSubject(member)))
		return err
	})

	cs, err := kubernetes.NewForConfig(env.RESTConfig(member))
	if err != nil {
		t.Fatal(err)
	}
	// The first report may be of a partial apply, retried: wait for the objects.
	poll.Until(t, time.Minute, "the work applied to "+member, func() error {
		if _, err := cs.CoreV1().Namespaces().Get(ctx, "deploy-check", metav1.GetOptions{}); err != nil {
			return fmt.Errorf("the work was not applied: %w", err)
		}
		if _, err := cs.CoreV1().ConfigMaps("deploy-check").Get(ctx, "large", metav1.GetOptions{}); err != nil {
			return fmt.Errorf("the work's manifests, fetched by claim check, were not applied: %w", err)
		}
		return nil
	})

	// A tombstone: the worker carries it out and records that on the bus, with its own
	// user's permissions, so that a restart does not carry it out again.
	tomb, err := events.New(events.TypeWorkTombstoned, "/flotilla/rollout", work.Placement, events.ID("deploy-check-tombstone", member),
		events.WorkTombstoned{Cluster: member, Placement: work.Placement, Reason: "deploy check"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewPublisher(cjs).Publish(ctx, subject, tomb); err != nil {
		t.Fatal(err)
	}
	removed, err := events.WorkRemovedSubject(member, work.Placement)
	if err != nil {
		t.Fatal(err)
	}
	records, err := cjs.OrderedConsumer(ctx, bus.StreamWork, jetstream.OrderedConsumerConfig{FilterSubjects: []string{removed}})
	if err != nil {
		t.Fatal(err)
	}
	wait, cancelWait := context.WithTimeout(ctx, 3*time.Minute) // a bound, not an expectation
	defer cancelWait()
	if _, err := records.Next(jetstream.FetchContext(wait)); err != nil {
		t.Fatalf("no record of the tombstone carried out: %v", err)
	}
}
