package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/e2e/bench/fleet/sim"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
)

// placementName and namespace are the benchmark's placement and the namespace it places.
const (
	placementName = "fleet-bench"
	namespace     = "fleet-bench"
)

// bench runs the measured steps against the hub and the simulated fleet.
type bench struct {
	opts      options
	fleet     *sim.Fleet
	nc        *nats.Conn
	js        jetstream.JetStream
	query     *query.Client
	progress  io.Writer
	m         *measurement
	fleetDone <-chan struct{} // closed when the fleet stopped
	fleetErr  func() error    // why, once fleetDone is closed
	// cpuProfile, when set, receives a CPU profile from the placement to the end of the wait.
	cpuProfile string
}

// measure makes the members join, places the workload and waits for it to be available,
// noting when each step ended in b.m.
func (b *bench) measure(ctx context.Context) error {
	start := time.Now()
	if err := b.join(ctx, start); err != nil {
		return err
	}
	if !b.opts.hub {
		return b.idle(ctx)
	}
	if err := b.hubTakesJoins(ctx, start); err != nil {
		return err
	}

	want := b.opts.pick
	if want == 0 {
		want = b.opts.members
	}
	scheduled, err := b.firstMessage(bus.SubjectsScheduling[:len(bus.SubjectsScheduling)-1] + placementName)
	if err != nil {
		return err
	}
	if b.cpuProfile != "" {
		stop, err := startCPUProfile(b.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	applyAt := time.Now()
	if err := b.place(ctx, want); err != nil {
		return err
	}
	if err := b.waitAvailable(ctx, applyAt, want, scheduled); err != nil {
		return err
	}
	if b.opts.preview {
		if err := b.timePreview(ctx); err != nil {
			return err
		}
	}
	return b.idle(ctx)
}

// join waits for every simulated member to join and send a heartbeat.
func (b *bench) join(ctx context.Context, start time.Time) error {
	fmt.Fprintf(b.progress, "%d simulated members joining (%s consumers)\n", b.opts.members, b.opts.consumers)
	if err := b.wait(ctx, "the members to join", func() bool {
		select {
		case <-b.fleet.Joined():
			return true
		default:
			return false
		}
	}, b.joinProgress); err != nil {
		return err
	}
	b.m.joinsPublished = time.Since(start)
	fmt.Fprintf(b.progress, "every member joined and sent a heartbeat in %s\n", b.m.joinsPublished.Round(time.Millisecond))
	return nil
}

// hubTakesJoins waits for the hub to take the joins in.
func (b *bench) hubTakesJoins(ctx context.Context, start time.Time) error {
	// The hub has taken the joins in when the scheduler and the status service have
	// consumed everything the fleet published up to now; one query then checks.
	seq := b.fleet.Stats().LastSeq
	if err := b.wait(ctx, "the scheduler and the status service to take in the joins", func() bool {
		return b.caughtUp(ctx, seq, bus.ConsumerScheduler, bus.ConsumerStatus)
	}, func() string { return b.consumerProgress(ctx, seq) }); err != nil {
		return err
	}
	b.m.hubJoined = time.Since(start)
	joined := 0
	if err := b.waitEvery(ctx, "the status service to list every member joined and healthy", 5*time.Second, func() bool {
		joined = b.joinedMembers(ctx)
		return joined == b.opts.members
	}, func() string { return fmt.Sprintf("%d of %d joined and healthy", joined, b.opts.members) }); err != nil {
		return err
	}
	fmt.Fprintf(b.progress, "the hub took in every join and first heartbeat %s after the first join\n", b.m.hubJoined.Round(time.Millisecond))
	return nil
}

// place applies the benchmark's placement, on want clusters, with fleetctl.
func (b *bench) place(ctx context.Context, want int) error {
	if err := b.fleetctl(ctx, placementYAML(b.opts.pick, b.opts.objects)); err != nil {
		return err
	}
	b.m.placed = true
	fmt.Fprintf(b.progress, "placement %s applied with fleetctl (%s on %d clusters, %d objects)\n",
		placementName, policyName(b.opts.pick), want, b.opts.objects)
	return nil
}

// waitAvailable waits for the placement applied at applyAt to be applied and available on
// want clusters, noting when it was scheduled (scheduled: when the first decision was seen),
// applied and available, and when the fleet's first work and last report came.
func (b *bench) waitAvailable(ctx context.Context, applyAt time.Time, want int, scheduled func() time.Time) error {
	m := b.m
	// The placement's status is read when the status service has consumed a report it has
	// not read the status after yet (a status of thousands of clusters is megabytes: polling
	// it would load the status service more than the fleet does), and every 30 s besides.
	var (
		crp        *api.ClusterResourcePlacement
		queriedSeq uint64
		lastQuery  = time.Now()
	)
	poll := func() bool {
		now := time.Since(applyAt)
		if m.scheduled == 0 {
			if at := scheduled(); !at.IsZero() {
				m.scheduled = at.Sub(applyAt)
			}
		}
		st := b.fleet.Stats()
		fresh := st.LastReportSeq > queriedSeq && b.caughtUp(ctx, st.LastReportSeq, bus.ConsumerStatus)
		if !fresh && time.Since(lastQuery) < 30*time.Second {
			return false
		}
		queriedSeq, lastQuery = st.LastReportSeq, time.Now()
		qctx, cancel := context.WithTimeout(ctx, time.Minute)
		p, err := b.query.Placement(qctx, placementName)
		cancel()
		if err != nil {
			fmt.Fprintf(b.progress, "  placement query: %v\n", err)
			return false
		}
		crp = p
		if m.applied == 0 && placementCondition(crp, api.ClusterResourcePlacementAppliedConditionType) &&
			perCluster(crp, api.PerClusterAppliedConditionType) == want {
			m.applied = now
		}
		if m.available == 0 && placementCondition(crp, api.ClusterResourcePlacementAvailableConditionType) &&
			perCluster(crp, api.PerClusterAvailableConditionType) == want {
			m.available = now
		}
		return m.available != 0
	}
	status := func() string {
		st := b.fleet.Stats()
		s := fmt.Sprintf("%d reports published; status consumer %s", st.Reports, b.consumerProgress(ctx, st.LastReportSeq))
		if crp != nil {
			s += "; last status read: " + summarize(crp, want)
		}
		return s
	}
	err := b.wait(ctx, "the placement to be applied and available everywhere", poll, status)
	if crp != nil {
		m.lastStatus = summarize(crp, want)
	}
	st := b.fleet.Stats()
	if !st.FirstWork.IsZero() {
		m.firstWork = st.FirstWork.Sub(applyAt)
		m.lastReport = st.LastReport.Sub(applyAt)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(b.progress, "applied everywhere after %s, available after %s\n", m.applied.Round(time.Millisecond), m.available.Round(time.Millisecond))
	return nil
}

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// caughtUp reports whether the durable consumers on the EVENTS stream have acknowledged
// every message up to seq.
func (b *bench) caughtUp(ctx context.Context, seq uint64, consumers ...string) bool {
	for _, name := range consumers {
		info, err := b.consumerInfo(ctx, name)
		// seq is stored (its publish was acknowledged): with nothing pending the consumer
		// has taken it, or it is not in the consumer's filter.
		if err != nil || info.AckFloor.Stream < seq && info.NumPending+uint64(info.NumAckPending) > 0 {
			return false
		}
	}
	return true
}

func (b *bench) consumerInfo(ctx context.Context, name string) (*jetstream.ConsumerInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := b.js.Consumer(ctx, bus.StreamEvents, name)
	if err != nil {
		return nil, err
	}
	return c.CachedInfo(), nil
}

// consumerProgress says how far the hub services' consumers are behind seq.
func (b *bench) consumerProgress(ctx context.Context, seq uint64) string {
	ctx = context.WithoutCancel(ctx) // also for the error that says the wait ended
	var parts []string
	for _, name := range []string{bus.ConsumerScheduler, bus.ConsumerRollout, bus.ConsumerStatus} {
		info, err := b.consumerInfo(ctx, name)
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		// A filtered consumer's ack floor stops at the last message it takes: with nothing
		// pending it is not behind, whatever seq is.
		pending := info.NumPending + uint64(info.NumAckPending)
		behind := int64(seq) - int64(info.AckFloor.Stream)
		if pending == 0 || behind < 0 {
			behind = 0
		}
		parts = append(parts, fmt.Sprintf("%s %d behind (%d pending)", name, behind, pending))
	}
	return strings.Join(parts, ", ")
}

// firstMessage notes when the first message on subject arrives.
func (b *bench) firstMessage(subject string) (func() time.Time, error) {
	var (
		mu sync.Mutex
		at time.Time
	)
	sub, err := b.nc.Subscribe(subject, func(*nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if at.IsZero() {
			at = time.Now()
		}
	})
	if err != nil {
		return nil, err
	}
	if err := b.nc.Flush(); err != nil {
		return nil, err
	}
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if !at.IsZero() {
			_ = sub.Unsubscribe()
		}
		return at
	}, nil
}

func (b *bench) idle(ctx context.Context) error {
	if b.opts.idle <= 0 {
		return nil
	}
	fmt.Fprintf(b.progress, "idling %s\n", b.opts.idle)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-b.fleetDone:
		return fmt.Errorf("the simulated fleet stopped: %v", b.fleetErr())
	case <-time.After(b.opts.idle):
		return nil
	}
}

func (b *bench) joinProgress() string {
	st := b.fleet.Stats()
	return fmt.Sprintf("%d of %d joined", st.Joined, b.opts.members)
}

// wait polls done every 100 ms; see waitEvery.
func (b *bench) wait(ctx context.Context, what string, done func() bool, progress func() string) error {
	return b.waitEvery(ctx, what, 100*time.Millisecond, done, progress)
}

// waitEvery calls done every interval until it returns true, printing progress every 10 s;
// it fails after the timeout, or when the fleet stops.
func (b *bench) waitEvery(ctx context.Context, what string, interval time.Duration, done func() bool, progress func() string) error {
	ctx, cancel := context.WithTimeout(ctx, b.opts.timeout)
	defer cancel()
	started, said := time.Now(), time.Now()
	for !done() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w after %s (%s)", what, ctx.Err(), time.Since(started).Round(time.Second), progress())
		case <-b.fleetDone:
			return fmt.Errorf("waiting for %s: the simulated fleet stopped: %v", what, b.fleetErr())
		case <-time.After(interval):
		}
		if time.Since(said) >= 10*time.Second {
			said = time.Now()
			fmt.Fprintf(b.progress, "  %s: %s\n", time.Since(started).Round(time.Second), progress())
		}
	}
	return nil
}

// joinedMembers counts the simulated members the status service lists joined and healthy.
func (b *bench) joinedMembers(ctx context.Context) int {
	qctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ms, err := b.query.Members(qctx, sim.SimulatedLabel+"=true")
	if err != nil {
		fmt.Fprintf(b.progress, "  members query: %v\n", err)
		return 0
	}
	n := 0
	for _, mc := range ms {
		if condition(mc.Status.Conditions, string(api.ConditionTypeMemberClusterJoined)) &&
			condition(mc.Status.Conditions, string(api.ConditionTypeMemberClusterHealthy)) {
			n++
		}
	}
	return n
}

// fleetctl runs `fleetctl apply -f -` on doc in this process, as a user's fleetctl would.
func (b *bench) fleetctl(ctx context.Context, doc string) error {
	var out bytes.Buffer
	err := cli.Run(ctx, []string{"--nats", b.nc.ConnectedUrl(), "apply", "-f", "-"}, cli.Options{
		In: strings.NewReader(doc), Out: &out, Err: &out, Getenv: func(string) string { return "" },
	})
	if err != nil {
		return fmt.Errorf("fleetctl apply: %w\n%s", err, out.String())
	}
	return nil
}

func policyName(pick int) string {
	if pick == 0 {
		return "PickAll"
	}
	return fmt.Sprintf("PickN %d", pick)
}

// placementYAML is the benchmark's namespace, its objects (a Deployment, a Service and
// ConfigMaps, objects in all with the Namespace) and a placement of it: PickAll, or PickN
// spread evenly over the zones and preferring production members.
func placementYAML(pick, objects int) string {
	return placementSpec{name: placementName, namespace: namespace, pick: pick, objects: objects}.yaml()
}

// placementSpec is a namespace of objects and a placement of it.
type placementSpec struct {
	name, namespace string
	// pick is PickN's numberOfClusters; 0 is PickAll.
	pick int
	// objects counts the Namespace, a Deployment, a Service and ConfigMaps for the rest;
	// 2 or fewer is the Namespace and one ConfigMap.
	objects int
	// only, when set, is a label (key=value) a cluster must have to be picked.
	only string
	// version is in the ConfigMaps' data: a new one changes every object but the others.
	version string
	// failoverAfter and failbackAfter, when set, are the placement's failover annotations.
	failoverAfter, failbackAfter string
}

func (p placementSpec) yaml() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", p.namespace)
	configMaps := 1
	if p.objects > 2 {
		configMaps = p.objects - 3
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: %[1]s
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx:1.27
---
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: %[1]s
spec:
  selector: {app: web}
  ports:
    - port: 80
`, p.namespace)
	}
	for i := range configMaps {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: config-%d\n  namespace: %s\ndata:\n  key: value-%d%s\n", i+1, p.namespace, i+1, p.version)
	}
	policy := "  policy:\n    placementType: PickAll\n"
	if p.pick > 0 {
		policy = fmt.Sprintf(`  policy:
    placementType: PickN
    numberOfClusters: %d
    affinity:
      clusterAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 20
            preference:
              labelSelector:
                matchLabels: {%s: production}
    topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: %s
        whenUnsatisfiable: DoNotSchedule
`, p.pick, sim.EnvironmentLabel, sim.ZoneLabel)
	} else if key, value, ok := strings.Cut(p.only, "="); ok {
		policy += fmt.Sprintf(`    affinity:
      clusterAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          clusterSelectorTerms:
            - labelSelector:
                matchLabels: {%s: %s}
`, key, value)
	}
	fmt.Fprintf(&b, `---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: %s
%sspec:
  resourceSelectors:
    - group: ""
      version: v1
      kind: Namespace
      name: %s
%s`, p.name, failoverAnnotations(p.failoverAfter, p.failbackAfter), p.namespace, policy)
	return b.String()
}

// placementCondition: the placement-level condition is True for the placement's generation.
func placementCondition(crp *api.ClusterResourcePlacement, t api.ClusterResourcePlacementConditionType) bool {
	for _, c := range crp.Status.Conditions {
		if c.Type == string(t) {
			return c.Status == metav1.ConditionTrue && c.ObservedGeneration >= crp.Generation
		}
	}
	return false
}

// perCluster counts the clusters whose condition t is True.
func perCluster(crp *api.ClusterResourcePlacement, t api.PerClusterPlacementConditionType) int {
	n := 0
	for _, ps := range crp.Status.PlacementStatuses {
		if condition(ps.Conditions, string(t)) {
			n++
		}
	}
	return n
}

func condition(conds []metav1.Condition, t string) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// summarize is one line of a placement's status.
func summarize(crp *api.ClusterResourcePlacement, want int) string {
	var parts []string
	for _, c := range crp.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s", strings.TrimPrefix(c.Type, "ClusterResourcePlacement"), c.Status))
	}
	return fmt.Sprintf("%d of %d cluster(s) in status, %d applied, %d available: %s", len(crp.Status.PlacementStatuses), want,
		perCluster(crp, api.PerClusterAppliedConditionType), perCluster(crp, api.PerClusterAvailableConditionType), strings.Join(parts, " "))
}
