package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/e2e/bench/fleet/sim"
	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
	"github.com/flotilla-dev/flotilla/services/standalone"
)

// parityObjects are placed on real and on simulated members alike: kinds available at once,
// a Deployment (available once its pods run: the standalone's simulated nodes run them) and
// a Service (available once it has a cluster IP).
const parityObjects = `
apiVersion: v1
kind: Namespace
metadata:
  name: parity
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: parity
data:
  greeting: hello
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: web
  namespace: parity
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: parity
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      serviceAccountName: web
      containers:
        - name: web
          image: nginx:1.27
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: parity
spec:
  selector: {app: web}
  ports:
    - port: 80
`

// parityPlacement places the objects on the members whose flotilla.dev/simulated label is
// (In) or is not (NotIn) "true": the same policy for both fleets, one operator apart.
func parityPlacement(name, operator string) string {
	return fmt.Sprintf(`
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: %s
spec:
  resourceSelectors:
    - group: ""
      version: v1
      kind: Namespace
      name: parity
  policy:
    placementType: PickAll
    affinity:
      clusterAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          clusterSelectorTerms:
            - labelSelector:
                matchExpressions:
                  - {key: %s, operator: %s, values: ["true"]}
`, name, sim.SimulatedLabel, operator)
}

// The simulator speaks the real apply worker's protocol: the same placement reaches the
// same status (conditions, per-cluster Applied and Available, selected resources) on two
// simulated members as on two real members with real apply workers, both fleets under one
// standalone hub; the members' last reports say the same, and so do their answers to the
// placement's deletion.
func TestSimulatedMembersMatchRealOnes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the standalone stack with two member clusters")
	}
	ep := startStandalone(t, 2)
	nc, err := nats.Connect(ep.NATSURL, nats.Name("parity-test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	reports := watchReports(t, nc)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := sim.New(sim.Options{JetStream: js, Members: 2, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	runFleet(t, fleet)
	q := query.New(nc)
	poll.Every(t, 200*time.Millisecond, 2*time.Minute, "four members joined and healthy", func() error {
		ms, err := q.Members(t.Context(), "")
		if err != nil {
			return err
		}
		var ok []string
		for _, m := range ms {
			if meta.IsStatusConditionTrue(m.Status.Conditions, string(api.ConditionTypeMemberClusterJoined)) &&
				meta.IsStatusConditionTrue(m.Status.Conditions, string(api.ConditionTypeMemberClusterHealthy)) {
				ok = append(ok, m.Name)
			}
		}
		if len(ok) != 4 {
			return fmt.Errorf("joined and healthy: %v", ok)
		}
		return nil
	})

	fleetctl(t, ep.NATSURL, parityObjects+"---"+parityPlacement("on-real", "NotIn")+"---"+parityPlacement("on-sim", "In"), "apply", "-f", "-")
	real, simulated := []string{"member-1", "member-2"}, fleet.Names()
	for name, clusters := range map[string][]string{"on-real": real, "on-sim": simulated} {
		poll.Every(t, 250*time.Millisecond, 3*time.Minute, name+" applied and available on "+strings.Join(clusters, ", "), func() error {
			crp, err := q.Placement(t.Context(), name)
			if err != nil {
				return err
			}
			if err := availableOn(crp, clusters); err != nil {
				status, _ := json.Marshal(crp.Status)
				return fmt.Errorf("%w; status %s", err, status)
			}
			return nil
		})
	}

	wantStatus := placementStatus(t, ep.NATSURL, "on-real", real)
	gotStatus := placementStatus(t, ep.NATSURL, "on-sim", simulated)
	if gotStatus != wantStatus {
		t.Errorf("placement status with simulated members:\n%s\nwith real members:\n%s", gotStatus, wantStatus)
	}
	for i := range real {
		want := reports.last(t, real[i], "on-real", "the last report", notDeleted)
		got := reports.last(t, simulated[i], "on-sim", "the last report", notDeleted)
		if g, w := normalReport(t, got), normalReport(t, want); g != w {
			t.Errorf("last report of simulated %s:\n%s\nof real %s:\n%s", simulated[i], g, real[i], w)
		}
	}

	fleetctl(t, ep.NATSURL, "", "delete", "crp", "on-real", "on-sim")
	for i := range real {
		want := reports.last(t, real[i], "on-real", "the answer to the tombstone", deleted)
		got := reports.last(t, simulated[i], "on-sim", "the answer to the tombstone", deleted)
		if g, w := normalReport(t, got), normalReport(t, want); g != w {
			t.Errorf("tombstone answer of simulated %s:\n%s\nof real %s:\n%s", simulated[i], g, real[i], w)
		}
	}
}

// startStandalone runs the standalone stack with n local members (and their real apply
// workers) until the test ends.
func startStandalone(t *testing.T, members int) standalone.Endpoints {
	t.Helper()
	// PostgreSQL runs as the postgres user when the tests run as root: its data dir must be
	// reachable by it, which a t.TempDir() (under a 0700 parent) is not.
	dir, err := os.MkdirTemp("", "flotilla-parity-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "services.log"))
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan standalone.Endpoints, 1)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		done <- standalone.Run(ctx, standalone.Config{
			DataDir: dir, NATSListen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", LocalMembers: members,
			KubeBinDir: os.Getenv("FLOTILLA_KUBE_BIN_DIR"), SimulatedNodes: true,
			Out: logf, Logger: slog.New(slog.NewTextHandler(logf, nil)),
			Ready: func(e standalone.Endpoints) { ready <- e },
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("standalone: %v", err)
		}
		logf.Close()
		if t.Failed() {
			t.Logf("the standalone's data dir is kept: %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	select {
	case ep := <-ready:
		return ep
	case err := <-done:
		done <- err
		t.Fatalf("standalone stopped before it was ready: %v (log in %s)", err, dir)
	case <-time.After(10 * time.Minute):
		t.Fatalf("standalone not ready after 10 minutes (log in %s)", dir)
	}
	return standalone.Endpoints{}
}

func runFleet(t *testing.T, f *sim.Fleet) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("simulated fleet: %v", err)
		}
	})
}

// fleetctl runs fleetctl in this process with stdin and returns its output.
func fleetctl(t *testing.T, natsURL, stdin string, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	err := cli.Run(t.Context(), append([]string{"--nats", natsURL}, args...),
		cli.Options{In: strings.NewReader(stdin), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatalf("fleetctl %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// availableOn: the placement is applied and available, for its generation, on exactly
// the clusters.
func availableOn(crp *api.ClusterResourcePlacement, clusters []string) error {
	for _, t := range []api.ClusterResourcePlacementConditionType{
		api.ClusterResourcePlacementAppliedConditionType, api.ClusterResourcePlacementAvailableConditionType,
	} {
		c := meta.FindStatusCondition(crp.Status.Conditions, string(t))
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != crp.Generation {
			return fmt.Errorf("%s is %+v", t, c)
		}
	}
	var got []string
	for _, ps := range crp.Status.PlacementStatuses {
		got = append(got, ps.ClusterName)
	}
	slices.Sort(got)
	if !slices.Equal(got, clusters) {
		return fmt.Errorf("placed on %v", got)
	}
	return nil
}

// placementStatus is the placement's status from `fleetctl get crp -o json`, with the
// placement's and the clusters' names replaced by placeholders (in the order given) and
// the times left out, as indented JSON.
func placementStatus(t *testing.T, natsURL, name string, clusters []string) string {
	t.Helper()
	var crp map[string]any
	if err := json.Unmarshal([]byte(fleetctl(t, natsURL, "", "get", "crp", name, "-o", "json")), &crp); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{name: "<placement>"}
	for i, c := range clusters {
		names[c] = fmt.Sprintf("<cluster-%d>", i+1)
	}
	return normalJSON(t, crp["status"], names)
}

var (
	timeFields = map[string]bool{"lastTransitionTime": true, "observedAt": true, "observationTime": true, "firstDriftedAt": true, "firstDiffedAt": true}
	ipAddress  = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`)
)

// normalJSON writes v as indented JSON without times, with names replaced in every string
// and IP addresses (a Service's cluster IP) masked.
func normalJSON(t *testing.T, v any, names map[string]string) string {
	t.Helper()
	var walk func(any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				if !timeFields[k] {
					out[k] = walk(e)
				}
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = walk(e)
			}
			return out
		case string:
			for from, to := range names {
				x = regexp.MustCompile(`\b`+regexp.QuoteMeta(from)+`\b`).ReplaceAllString(x, to)
			}
			return ipAddress.ReplaceAllString(x, "<ip>")
		}
		return v
	}
	b, err := json.MarshalIndent(walk(v), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// normalReport is a report as normalJSON writes it, with its cluster and placement
// replaced.
func normalReport(t *testing.T, r events.WorkReported) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return normalJSON(t, v, map[string]string{r.Cluster: "<cluster>", r.Placement: "<placement>"})
}

// reports keeps every WorkReported published, by cluster and placement.
type reports struct {
	mu sync.Mutex
	by map[string][]events.WorkReported
}

func watchReports(t *testing.T, nc *nats.Conn) *reports {
	t.Helper()
	r := &reports{by: map[string][]events.WorkReported{}}
	sub, err := nc.Subscribe(bus.SubjectsWorkStatus, func(msg *nats.Msg) {
		ev, err := bus.Decode(msg)
		if err != nil {
			t.Errorf("decode %s: %v", msg.Subject, err)
			return
		}
		p, err := events.DecodeAs[events.WorkReported](ev)
		if err != nil {
			t.Errorf("decode %s: %v", msg.Subject, err)
			return
		}
		r.mu.Lock()
		r.by[p.Cluster+"/"+p.Placement] = append(r.by[p.Cluster+"/"+p.Placement], *p)
		r.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return r
}

var (
	deleted    = func(r events.WorkReported) bool { return r.Deleted }
	notDeleted = func(r events.WorkReported) bool { return !r.Deleted }
)

// last waits for the last report of cluster and placement to satisfy ok, and returns it.
func (r *reports) last(t *testing.T, cluster, placement, what string, ok func(events.WorkReported) bool) events.WorkReported {
	t.Helper()
	var got events.WorkReported
	poll.Until(t, time.Minute, fmt.Sprintf("%s of %s on %s", what, placement, cluster), func() error {
		r.mu.Lock()
		defer r.mu.Unlock()
		rs := r.by[cluster+"/"+placement]
		if len(rs) == 0 {
			return errors.New("no report")
		}
		got = rs[len(rs)-1]
		if !ok(got) {
			return fmt.Errorf("the last is %+v", got)
		}
		return nil
	})
	return got
}
