package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/e2e/bench/fleet/sim"
	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
)

// groupLabel tells the suite's two fleets apart: the first (-members) and the one that
// joins for PickAll over -big-members.
const groupLabel = "fleet-bench/group"

// suite runs KubeFleet's scale scenarios (Performance and Scalability Report Q1 2026)
// against the hub, each service its own process, and prints one table beside KubeFleet's
// figures.
type suite struct {
	o        options
	dir      string
	progress io.Writer
	log      *slog.Logger

	pg       *postgres.Server
	dbURL    string
	nats     *proc
	services map[string]*proc
	nc       *nats.Conn // the observers' connection
	js       jetstream.JetStream
	q        *query.Client
	b        *bench // the waits and queries of the single run, on the first fleet
	watch    *statusWatch

	fleets []*runningFleet
	rows   []row
	notes  []string // why the scenarios that failed did
	// placements counts the placements created, all of which should be Available.
	placements []string
}

type runningFleet struct {
	fleet *sim.Fleet
	stop  context.CancelFunc
	done  chan struct{}
	err   error
}

// row is a line of the table: what was measured, our figure, KubeFleet's and the goal.
type row struct {
	scenario, ours, kubefleet, ratio, goal string
}

func runSuite(ctx context.Context, o options, out, progress io.Writer) (err error) {
	ws, err := openWorkspace(o, progress)
	if err != nil {
		return err
	}
	defer func() { ws.close(err) }()
	s := &suite{o: o, dir: ws.dir, progress: progress, services: map[string]*proc{}, log: ws.log}
	began := time.Now()
	defer s.stop()
	if err := s.start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(progress, "hub up in %s (build included)\n", time.Since(began).Round(time.Millisecond))
	runErr := s.scenarios(ctx)
	s.finalRows(ctx)
	s.print(out, time.Since(began))
	if runErr != nil {
		fmt.Fprintf(progress, "\nthe services' logs are in %s (-keep keeps them)\n", ws.dir)
	}
	return runErr
}

// start builds and starts nats-server, PostgreSQL and the hub services, and connects.
func (s *suite) start(ctx context.Context) error {
	bins := filepath.Join(s.dir, "bin")
	fmt.Fprintln(s.progress, "building nats-server and the hub services")
	if err := buildBinaries(ctx, bins); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	monitor, err := freePort()
	if err != nil {
		return err
	}
	natsURL := "nats://127.0.0.1:" + strconv.Itoa(port)
	s.nats = &proc{
		name: "nats-server", bin: filepath.Join(bins, "nats-server"), logPath: filepath.Join(s.dir, "nats-server.log"),
		args: []string{"-js", "-sd", filepath.Join(s.dir, "nats"), "-a", "127.0.0.1", "-p", strconv.Itoa(port),
			"-n", "flotilla-fleet", "-m", strconv.Itoa(monitor)},
		env:      s.o.memoryLimits.env("nats-server"),
		readyURL: fmt.Sprintf("http://127.0.0.1:%d/healthz?js-enabled-only=true", monitor),
	}
	if err := s.nats.start(); err != nil {
		return err
	}
	if err := s.nats.waitReady(ctx, time.Minute); err != nil {
		return err
	}
	if s.nc, err = nats.Connect(natsURL, nats.Name("fleet-bench"), nats.MaxReconnects(-1)); err != nil {
		return err
	}
	if s.js, err = jetstream.New(s.nc); err != nil {
		return err
	}
	if err := bus.EnsureTopology(ctx, s.js, bus.TopologyOptions{}); err != nil {
		return fmt.Errorf("declare the JetStream topology: %w", err)
	}
	if s.pg, err = postgres.Start(ctx, postgres.Options{DataDir: filepath.Join(s.dir, "postgres"), Log: io.Discard}); err != nil {
		return err
	}
	if s.dbURL, err = s.pg.EnsureDatabase(ctx, "flotilla"); err != nil {
		return err
	}
	for _, name := range hubServiceNames {
		p, err := newProc(name, filepath.Join(bins, name), s.dir, "--nats", natsURL, "--database-url", s.dbURL, "--log-level", s.o.logLevel)
		if err != nil {
			return err
		}
		p.env = s.o.memoryLimits.env(name)
		if err := p.start(); err != nil {
			return err
		}
		s.services[name] = p
	}
	for _, name := range hubServiceNames {
		if err := s.services[name].waitReady(ctx, 2*time.Minute); err != nil {
			return err
		}
	}
	s.q = query.New(s.nc)
	if s.watch, err = watchStatus(s.nc); err != nil {
		return err
	}
	fmt.Fprintf(s.progress, "nats-server at %s, PostgreSQL %s, %s: each its own process\n", natsURL, s.pg.Version(), strings.Join(hubServiceNames, ", "))
	return nil
}

func (s *suite) stop() {
	for _, f := range s.fleets {
		f.stop()
		<-f.done
	}
	for _, name := range slices.Backward(hubServiceNames) {
		if p := s.services[name]; p != nil {
			p.stop()
		}
	}
	if s.nc != nil {
		s.nc.Close()
	}
	if s.pg != nil {
		_ = s.pg.Stop()
	}
	if s.nats != nil {
		s.nats.stop()
	}
}

// startFleet starts n simulated members named <prefix>-<i>, labelled with their group.
func (s *suite) startFleet(ctx context.Context, prefix string, n int) (*runningFleet, error) {
	// The members share one connection, as the standalone's apply workers do.
	nc, err := nats.Connect(s.nc.ConnectedUrl(), nats.Name("fleet-sim-"+prefix), nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	o := s.o
	fleet, err := sim.New(sim.Options{
		JetStream: js, Members: n, Prefix: prefix, JoinRate: o.joinRate, HeartbeatPeriod: o.heartbeat,
		Labels: func(i int) map[string]string {
			l := sim.DefaultSpread.Labels(i)
			l[groupLabel] = prefix
			return l
		},
		ApplyDelay: o.applyDelay, SeparateAvailability: o.separate, AvailableDelay: o.availableDelay,
		FailureRate: o.failureRate, Seed: o.seed, Consumers: o.consumers, Logger: s.log,
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	fctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	rf := &runningFleet{fleet: fleet, stop: stop, done: make(chan struct{})}
	go func() {
		rf.err = fleet.Run(fctx)
		nc.Close()
		close(rf.done)
	}()
	s.fleets = append(s.fleets, rf)
	return rf, nil
}

// scenarios runs the scenarios one after the other, adding rows to the table.
func (s *suite) scenarios(ctx context.Context) error {
	o := s.o
	first, err := s.startFleet(ctx, "sim", o.members)
	if err != nil {
		return err
	}
	m := &measurement{opts: o}
	s.b = &bench{opts: o, fleet: first.fleet, nc: s.nc, js: s.js, query: s.q, progress: s.progress, m: m,
		fleetDone: first.done, fleetErr: func() error { return first.err }}

	// Join.
	start := time.Now()
	if err := s.b.join(ctx, start); err != nil {
		return err
	}
	if err := s.b.hubTakesJoins(ctx, start); err != nil {
		return err
	}
	s.add(row{scenario: fmt.Sprintf("join %s clusters (taken in by the hub)", count(o.members)), ours: dur(m.hubJoined), kubefleet: "-", goal: "-"})
	s.add(row{scenario: "  hub memory after the join (RSS, all services)", ours: bytesString(s.hubRSS()), kubefleet: "-", goal: "-"})

	// One placement, PickN of the fleet, o.runs times.
	pickN := func(label string) error {
		var runs []time.Duration
		for i := range o.runs {
			name := fmt.Sprintf("%s-%02d", label, i+1)
			d, err := s.placeAndWait(ctx, placementSpec{name: name, namespace: name, pick: o.pick, objects: o.objects}, o.pick)
			if err != nil {
				return err
			}
			runs = append(runs, d)
		}
		p50, p90 := percentile(runs, 50), percentile(runs, 90)
		kf := 20 * time.Second
		scenario := fmt.Sprintf("PickN %d of %s to Applied+Available, p50 / p90 of %d", o.pick, count(o.members), o.runs)
		if label != "pickn" {
			kf = 21 * time.Second
			scenario = fmt.Sprintf("  the same with %s placements present", count(len(s.placements)-o.runs))
		}
		s.add(row{scenario: scenario, ours: dur(p50) + " / " + dur(p90), kubefleet: "p90 " + dur(kf), ratio: ratio(kf, p90), goal: under(p90, time.Second)})
		return nil
	}
	// The scenarios after the join: one that fails (a wait that timed out, say) is a row
	// saying so, and the next one runs, unless the run was interrupted or the fleet stopped.
	try := func(what string, scenario func() error) error {
		err := scenario()
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-first.done:
			return err
		default:
		}
		s.add(row{scenario: what, ours: "NOT reached (see below)", kubefleet: "-", goal: "-"})
		s.notes = append(s.notes, what+": "+err.Error())
		return nil
	}
	steps := []struct {
		what string
		run  func() error
	}{
		{fmt.Sprintf("PickN %d of %s, %d runs", o.pick, count(o.members), o.runs), func() error { return pickN("pickn") }},
		{fmt.Sprintf("%s placements, PickN %d each", count(o.placements), o.pick), func() error { return s.manyPlacements(ctx) }},
		{fmt.Sprintf("PickN %d with the placements present, %d runs", o.pick, o.runs), func() error { return pickN("pickn-present") }},
		{fmt.Sprintf("a hub change to a placement on %s clusters", count(o.members)), func() error { return s.hubChange(ctx) }},
	}
	failover := struct {
		what string
		run  func() error
	}{fmt.Sprintf("failover of %d members under PickN %d", o.failoverLost, o.pick), func() error { return s.failoverScenario(ctx) }}
	if o.failover {
		steps = steps[:0]
	}
	steps = append(steps, failover)
	for _, name := range hubServiceNames {
		if o.failover {
			break
		}
		steps = append(steps, struct {
			what string
			run  func() error
		}{"restart of " + name, func() error { return s.restart(ctx, name) }})
	}
	if o.bigMembers > o.members && !o.failover {
		steps = append(steps, struct {
			what string
			run  func() error
		}{fmt.Sprintf("PickAll over %s", count(o.bigMembers)), func() error { return s.pickAllBig(ctx) }})
	}
	for _, step := range steps {
		if err := try(step.what, step.run); err != nil {
			return err
		}
	}
	return nil
}

// placeAndWait applies p and waits for it to be Applied and Available on want clusters,
// returning how long that took from the apply.
func (s *suite) placeAndWait(ctx context.Context, p placementSpec, want int) (time.Duration, error) {
	at := time.Now()
	if err := s.b.fleetctl(ctx, p.yaml()); err != nil {
		return 0, err
	}
	s.placements = append(s.placements, p.name)
	return s.waitPlacement(ctx, p.name, want, at, "", 50*time.Millisecond)
}

// waitPlacement polls the placement's status every interval until it is Applied and
// Available on want clusters for its generation and, when oldIndex is set, at a resource
// snapshot other than oldIndex on every cluster.
func (s *suite) waitPlacement(ctx context.Context, name string, want int, from time.Time, oldIndex string, interval time.Duration) (time.Duration, error) {
	var last string
	err := s.b.waitEvery(ctx, "placement "+name+" to be Applied and Available", interval, func() bool {
		qctx, cancel := context.WithTimeout(ctx, time.Minute)
		crp, err := s.q.Placement(qctx, name)
		cancel()
		if err != nil {
			last = err.Error()
			return false
		}
		last = summarize(crp, want)
		return placementDone(crp, want, oldIndex)
	}, func() string { return last })
	if err != nil {
		return 0, err
	}
	return time.Since(from), nil
}

func placementDone(crp *api.ClusterResourcePlacement, want int, oldIndex string) bool {
	if !placementCondition(crp, api.ClusterResourcePlacementAppliedConditionType) ||
		!placementCondition(crp, api.ClusterResourcePlacementAvailableConditionType) ||
		perCluster(crp, api.PerClusterAvailableConditionType) != want || perCluster(crp, api.PerClusterAppliedConditionType) != want {
		return false
	}
	if oldIndex == "" {
		return true
	}
	if crp.Status.ObservedResourceIndex == oldIndex {
		return false
	}
	for _, ps := range crp.Status.PlacementStatuses {
		if ps.ObservedResourceIndex != crp.Status.ObservedResourceIndex {
			return false
		}
	}
	return true
}

// manyPlacements creates o.placements placements, PickN o.pick each, of a namespace and a
// ConfigMap each, 100 to a fleetctl apply, and waits until every one is Available.
func (s *suite) manyPlacements(ctx context.Context) error {
	o := s.o
	if o.placements == 0 {
		return nil
	}
	fmt.Fprintf(s.progress, "creating %d placements, PickN %d each (at most %s)\n", o.placements, o.pick, o.burstTimeout)
	// One bound over the whole burst, -burst-timeout.
	ctx, cancel := context.WithTimeout(ctx, o.burstTimeout)
	defer cancel()
	bounded := *s.b
	bounded.opts.timeout = o.burstTimeout
	b := &bounded
	before, cpuBefore := s.consumerSeqs(ctx), s.cpuUsed()
	hubCPUBefore, dbBefore := s.hubCPU(), s.databaseSizeOrZero(ctx)
	reportsBefore := b.fleet.Stats().Reports
	at := time.Now()
	var names []string
	for i := 0; i < o.placements; i += 100 {
		var doc strings.Builder
		for j := i; j < min(i+100, o.placements); j++ {
			name := fmt.Sprintf("bg-%04d", j+1)
			names = append(names, name)
			if doc.Len() > 0 {
				doc.WriteString("---\n")
			}
			doc.WriteString(placementSpec{name: name, namespace: name, pick: o.pick, objects: 2}.yaml())
		}
		if err := b.fleetctl(ctx, doc.String()); err != nil {
			return err
		}
	}
	applied := time.Since(at)
	s.placements = append(s.placements, names...)
	fmt.Fprintf(s.progress, "%d placements applied with fleetctl in %s\n", o.placements, applied.Round(time.Millisecond))
	want := o.placements * o.pick
	reportsWanted := want
	if o.separate {
		reportsWanted *= 2
	}
	if err := b.waitEvery(ctx, "every member to report on its placements", time.Second, func() bool {
		return b.fleet.Stats().Reports-reportsBefore >= reportsWanted
	}, func() string {
		return fmt.Sprintf("%d of %d reports; %s", b.fleet.Stats().Reports-reportsBefore, reportsWanted, b.consumerProgress(ctx, b.fleet.Stats().LastSeq))
	}); err != nil {
		return err
	}
	reported := time.Since(at)
	seq := b.fleet.Stats().LastSeq
	if err := b.waitEvery(ctx, "the hub to take in every report", time.Second, func() bool {
		return b.caughtUp(ctx, seq, bus.ConsumerScheduler, bus.ConsumerRollout, bus.ConsumerStatus)
	}, func() string { return b.consumerProgress(ctx, seq) }); err != nil {
		return err
	}
	available, notYet := 0, 0
	if err := b.waitEvery(ctx, "every placement to be Available", 5*time.Second, func() bool {
		available, notYet = s.countAvailable("bg-")
		return available == o.placements
	}, func() string {
		return fmt.Sprintf("%d of %d placements Available (%d not)", available, o.placements, notYet)
	}); err != nil {
		return err
	}
	took := time.Since(at)
	after, cpuAfter := s.consumerSeqs(ctx), s.cpuUsed()
	s.add(row{scenario: fmt.Sprintf("%s placements, PickN %d each (%s bindings), to Available", count(o.placements), o.pick, count(want)),
		ours: fmt.Sprintf("%s (%.0f placements/s)", dur(took), float64(o.placements)/took.Seconds()), kubefleet: "-", goal: "-"})
	s.add(row{scenario: "  applied with fleetctl / last member report", ours: dur(applied) + " / " + dur(reported), kubefleet: "-", goal: "-"})
	s.add(s.costRow(ctx, fmt.Sprintf("  cost of a placement on %d clusters, to Available: hub CPU (nats-server included) / PostgreSQL growth", o.pick),
		o.placements, hubCPUBefore, dbBefore))
	for _, name := range []string{bus.ConsumerScheduler, bus.ConsumerRollout, bus.ConsumerStatus} {
		n := after[name] - before[name]
		s.add(row{scenario: "  events/s through the " + name + " consumer in that burst (its CPU time)",
			ours: fmt.Sprintf("%.0f (%d events, CPU %s)", float64(n)/took.Seconds(), n, dur(cpuAfter[name]-cpuBefore[name])), kubefleet: "-", goal: "-"})
	}
	return nil
}

// cpuUsed is the CPU time each service has used so far, by consumer name (each
// service's consumer is named after it).
func (s *suite) cpuUsed() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, name := range hubServiceNames {
		out[name] = s.services[name].cpuUsed()
	}
	return out
}

// consumerSeqs is how many deliveries each hub consumer has acknowledged.
func (s *suite) consumerSeqs(ctx context.Context) map[string]uint64 {
	out := map[string]uint64{}
	for _, name := range []string{bus.ConsumerScheduler, bus.ConsumerRollout, bus.ConsumerStatus} {
		if info, err := s.b.consumerInfo(ctx, name); err == nil {
			out[name] = info.AckFloor.Consumer
		}
	}
	return out
}

// countAvailable counts the placements named with prefix that are Available, and the
// others the status service has published a status of.
func (s *suite) countAvailable(prefix string) (available, not int) {
	return s.watch.available(prefix)
}

// hubChange places a namespace on every member of the first fleet (PickAll), then
// changes its objects on the hub and waits for the change to be Applied and Available on
// every member.
func (s *suite) hubChange(ctx context.Context) error {
	o := s.o
	p := placementSpec{name: "wide", namespace: "wide", objects: o.objects, only: groupLabel + "=sim", version: "-v1"}
	fmt.Fprintf(s.progress, "placement %s: PickAll over the %d members of the first fleet\n", p.name, o.members)
	took, err := s.placeAndWaitEvery(ctx, p, o.members, time.Second)
	if err != nil {
		return err
	}
	s.add(row{scenario: fmt.Sprintf("PickAll over %s to Applied+Available", count(o.members)), ours: dur(took), kubefleet: "-", goal: "-"})
	crp, err := s.q.Placement(ctx, p.name)
	if err != nil {
		return err
	}
	p.version = "-v2"
	at := time.Now()
	if err := s.b.fleetctl(ctx, p.yaml()); err != nil {
		return err
	}
	took, err = s.waitPlacement(ctx, p.name, o.members, at, crp.Status.ObservedResourceIndex, time.Second)
	if err != nil {
		return err
	}
	s.add(row{scenario: fmt.Sprintf("a hub change to a placement on %s clusters, to Available", count(o.members)), ours: dur(took), kubefleet: "-", goal: "-"})
	return nil
}

func (s *suite) placeAndWaitEvery(ctx context.Context, p placementSpec, want int, interval time.Duration) (time.Duration, error) {
	at := time.Now()
	if err := s.b.fleetctl(ctx, p.yaml()); err != nil {
		return 0, err
	}
	s.placements = append(s.placements, p.name)
	return s.waitPlacement(ctx, p.name, want, at, "", interval)
}

// restart stops the service, applies a new placement while it is down, starts it and
// measures from the start: until it is ready, until the new placement is Available, and
// until its consumer has caught up and every placement is Available.
func (s *suite) restart(ctx context.Context, name string) error {
	o := s.o
	p := s.services[name]
	fmt.Fprintf(s.progress, "restarting %s with %d placements present\n", name, len(s.placements))
	// Reconciled again: those Available before the restart, and the new one.
	availableBefore, _ := s.countAvailable("")
	p.stop()
	np := placementSpec{name: "after-" + name, namespace: "after-" + name, pick: o.pick, objects: o.objects}
	if err := s.b.fleetctl(ctx, np.yaml()); err != nil {
		return err
	}
	s.placements = append(s.placements, np.name)
	at := time.Now()
	if err := p.start(); err != nil {
		return err
	}
	if err := p.waitReady(ctx, o.timeout); err != nil {
		return err
	}
	ready := time.Since(at)
	served, err := s.waitPlacement(ctx, np.name, o.pick, at, "", 50*time.Millisecond)
	if err != nil {
		return err
	}
	consumer := map[string]string{"scheduler": bus.ConsumerScheduler, "rollout": bus.ConsumerRollout, "status": bus.ConsumerStatus}[name]
	info, err := s.b.consumerInfo(ctx, consumer)
	if err != nil {
		return err
	}
	seq := info.Delivered.Stream + info.NumPending
	available, notYet := 0, 0
	want := availableBefore + 1
	if err := s.b.waitEvery(ctx, "every placement to be reconciled after the restart", time.Second, func() bool {
		if !s.b.caughtUp(ctx, seq, consumer) {
			return false
		}
		available, notYet = s.countAvailable("")
		return available >= want
	}, func() string {
		return fmt.Sprintf("%s; %d placements Available (%d before the restart, with the new one), %d not", s.b.consumerProgress(ctx, seq), available, want, notYet)
	}); err != nil {
		return err
	}
	all := time.Since(at)
	kf := 11*time.Minute + 15*time.Second
	s.add(row{scenario: fmt.Sprintf("restart of %s, %s placements: ready / new placement Available", name, count(len(s.placements))),
		ours: dur(ready) + " / " + dur(served), kubefleet: "-", goal: under(served, 10*time.Second)})
	s.add(row{scenario: "  until every placement is reconciled", ours: dur(all), kubefleet: "hub agent re-sync p90 " + dur(kf), ratio: ratio(kf, all), goal: under(all, 10*time.Second)})
	return nil
}

// pickAllBig joins a second fleet to make -big-members and places a namespace on all of
// them, bounded by -big-timeout.
func (s *suite) pickAllBig(ctx context.Context) error {
	o := s.o
	n := o.bigMembers - o.members
	fmt.Fprintf(s.progress, "%d more members joining\n", n)
	hubCPUBefore, dbBefore := s.hubCPU(), s.databaseSizeOrZero(ctx)
	at := time.Now()
	big, err := s.startFleet(ctx, "big", n)
	if err != nil {
		return err
	}
	if err := s.b.waitEvery(ctx, "the second fleet to join", 100*time.Millisecond, func() bool {
		select {
		case <-big.fleet.Joined():
			return true
		case <-big.done:
			return true
		default:
			return false
		}
	}, func() string { return fmt.Sprintf("%d of %d joined", big.fleet.Stats().Joined, n) }); err != nil {
		return err
	}
	if big.err != nil {
		return fmt.Errorf("the second fleet: %w", big.err)
	}
	seq := big.fleet.Stats().LastSeq
	if err := s.b.waitEvery(ctx, "the hub to take in the second fleet", 100*time.Millisecond, func() bool {
		return s.b.caughtUp(ctx, seq, bus.ConsumerScheduler, bus.ConsumerStatus)
	}, func() string { return s.b.consumerProgress(ctx, seq) }); err != nil {
		return err
	}
	joined := time.Since(at)
	s.add(row{scenario: fmt.Sprintf("join %s more clusters (taken in by the hub)", count(n)), ours: dur(joined), kubefleet: "-", goal: "-"})
	s.add(s.costRow(ctx, "  cost of a cluster joining (first heartbeat included): hub CPU / PostgreSQL growth", n, hubCPUBefore, dbBefore))
	p := placementSpec{name: "all", namespace: "all", objects: o.objects}
	bo := *s.b
	bo.opts.timeout = o.bigTimeout
	b := &bo
	at = time.Now()
	if err := b.fleetctl(ctx, p.yaml()); err != nil {
		return err
	}
	var last string
	err = b.waitEvery(ctx, "PickAll over every member", 5*time.Second, func() bool {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		crp, err := s.q.Placement(qctx, p.name)
		cancel()
		if err != nil {
			last = err.Error()
			return false
		}
		last = summarize(crp, o.bigMembers)
		return placementDone(crp, o.bigMembers, "")
	}, func() string { return last })
	scenario := fmt.Sprintf("PickAll over %s to Applied+Available", count(o.bigMembers))
	if errors.Is(err, context.DeadlineExceeded) {
		s.add(row{scenario: scenario, ours: "over " + dur(o.bigTimeout), kubefleet: "-", goal: "-"})
		s.add(row{scenario: "  status then: " + last})
		return nil
	}
	if err != nil {
		return err
	}
	s.add(row{scenario: scenario, ours: dur(time.Since(at)), kubefleet: "-", goal: "-"})
	return nil
}

// finalRows adds the memory and storage figures.
func (s *suite) finalRows(ctx context.Context) {
	var total int64
	for _, p := range append([]*proc{s.nats}, s.servicesInOrder()...) {
		if p == nil {
			continue
		}
		peak := p.peak()
		total += peak
		scenario := "peak RSS / CPU time of " + p.name
		if limit, ok := s.o.memoryLimits[p.name]; ok {
			scenario += " (GOMEMLIMIT " + limit + ")"
		}
		s.add(row{scenario: scenario, ours: bytesString(peak) + " / " + dur(p.cpuUsed()), kubefleet: "-", goal: "-"})
	}
	s.add(row{scenario: "peak RSS, all services together (nats-server included)", ours: bytesString(total),
		kubefleet: "hub agent 16-24 GB", ratio: ratio(16<<30, total), goal: underBytes(total, 1<<30)})
	s.add(row{scenario: "peak RSS of the simulated fleet (this process)", ours: bytesString(procStatus("VmHWM")), kubefleet: "-", goal: "-"})
	if size, err := s.databaseSize(ctx); err == nil {
		s.add(row{scenario: "PostgreSQL database size", ours: bytesString(size), kubefleet: "-", goal: "-"})
	} else {
		s.add(row{scenario: "PostgreSQL database size", ours: err.Error()})
	}
}

// hubCPU is the CPU time nats-server and the hub services have used so far.
func (s *suite) hubCPU() time.Duration {
	var total time.Duration
	for _, p := range append([]*proc{s.nats}, s.servicesInOrder()...) {
		total += p.cpuUsed()
	}
	return total
}

// costRow is what each of n things (placements, clusters) cost the hub since hubCPU
// and databaseSize gave cpuBefore and dbBefore: CPU time and PostgreSQL's growth.
func (s *suite) costRow(ctx context.Context, scenario string, n int, cpuBefore time.Duration, dbBefore int64) row {
	cpu := (s.hubCPU() - cpuBefore) / time.Duration(n)
	db := "-"
	if after := s.databaseSizeOrZero(ctx); after > 0 && dbBefore > 0 {
		db = bytesString((after - dbBefore) / int64(n))
	}
	return row{scenario: scenario, ours: cpu.Round(10*time.Microsecond).String() + " / " + db, kubefleet: "-", goal: "-"}
}

// databaseSizeOrZero is databaseSize, 0 when it cannot be read (the row then says -).
func (s *suite) databaseSizeOrZero(ctx context.Context) int64 {
	size, _ := s.databaseSize(ctx)
	return size
}

func (s *suite) servicesInOrder() []*proc {
	var out []*proc
	for _, name := range hubServiceNames {
		out = append(out, s.services[name])
	}
	return out
}

func (s *suite) hubRSS() int64 {
	var total int64
	for _, p := range append([]*proc{s.nats}, s.servicesInOrder()...) {
		total += p.peak()
	}
	return total
}

func (s *suite) databaseSize(ctx context.Context) (int64, error) {
	if s.dbURL == "" {
		return 0, errors.New("no database")
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var size int64
	err = conn.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&size)
	return size, err
}

func (s *suite) add(r row) {
	s.rows = append(s.rows, r)
	fmt.Fprintf(s.progress, "  %s: %s\n", strings.TrimSpace(r.scenario), r.ours)
}

func (s *suite) print(out io.Writer, took time.Duration) {
	o := s.o
	fmt.Fprintf(out, "\nFlotilla beside KubeFleet (Performance and Scalability Report Q1 2026: 1,000 members, hub agent on 2 x 16-core VMs)\n")
	fmt.Fprintf(out, "this run: %d simulated members (%s consumers), heartbeat %s, apply delay %s, each service its own process on this machine (%d cores, shared; load average %s at the end), GOMEMLIMIT %s, %s in all\n\n",
		o.members, o.consumers, o.heartbeat, o.applyDelay, runtime.NumCPU(), loadAverage(), &o.memoryLimits, took.Round(time.Second))
	w := [5]int{len("scenario"), len("Flotilla"), len("KubeFleet"), len("KubeFleet/Flotilla"), len("goal")}
	for _, r := range s.rows {
		for i, c := range []string{r.scenario, r.ours, r.kubefleet, r.ratio, r.goal} {
			w[i] = max(w[i], len(c))
		}
	}
	line := func(c ...string) {
		fmt.Fprintf(out, "%-*s  %-*s  %-*s  %-*s  %s\n", w[0], c[0], w[1], c[1], w[2], c[2], w[3], c[3], c[4])
	}
	line("scenario", "Flotilla", "KubeFleet", "KubeFleet/Flotilla", "goal")
	line(strings.Repeat("-", w[0]), strings.Repeat("-", w[1]), strings.Repeat("-", w[2]), strings.Repeat("-", w[3]), strings.Repeat("-", w[4]))
	for _, r := range s.rows {
		if r.ratio == "" && r.kubefleet == "-" {
			r.ratio = "-"
		}
		line(r.scenario, r.ours, r.kubefleet, r.ratio, r.goal)
	}
	if len(s.notes) > 0 {
		fmt.Fprintln(out, "\nscenarios not reached:")
		for _, n := range s.notes {
			fmt.Fprintf(out, "  %s\n", n)
		}
	}
}

// loadAverage is the machine's 1, 5 and 15 minute load averages (/proc/loadavg).
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	// The nearest rank.
	i := (p*len(s) + 99) / 100
	return s[max(i-1, 0)]
}

func dur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// ratio is theirs over ours, "20x" when ours is 20 times smaller.
func ratio[T ~int64](theirs, ours T) string {
	if ours <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fx", float64(theirs)/float64(ours))
}

func under(d, goal time.Duration) string {
	verdict := "met"
	if d >= goal {
		verdict = "NOT met"
	}
	return fmt.Sprintf("< %s: %s", dur(goal), verdict)
}

func underBytes(n, goal int64) string {
	verdict := "met"
	if n >= goal {
		verdict = "NOT met"
	}
	return fmt.Sprintf("< %s: %s", bytesString(goal), verdict)
}

// count writes n with thousands separators.
func count(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// statusWatch follows the status service's placementstatus.changed events on the bus (a
// plain subscription): each piece carries the placement-wide conditions, so it knows which
// placements are Available without asking for statuses of thousands of clusters.
type statusWatch struct {
	sub *nats.Subscription

	mu         sync.Mutex
	placements map[string]watched
}

type watched struct {
	revision  int64
	available bool
}

func watchStatus(nc *nats.Conn) (*statusWatch, error) {
	w := &statusWatch{placements: map[string]watched{}}
	sub, err := nc.Subscribe("flotilla.status.>", w.observe)
	if err != nil {
		return nil, fmt.Errorf("watch the placements' status: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, err
	}
	w.sub = sub
	return w, nc.Flush()
}

func (w *statusWatch) observe(msg *nats.Msg) {
	if msg.Header.Get("ce-type") != events.TypePlacementStatusChangedV2 {
		return
	}
	var ch events.PlacementStatusChangedV2
	if err := json.Unmarshal(msg.Data, &ch); err != nil {
		return
	}
	available := false
	for _, c := range ch.Conditions {
		if c.Type == string(api.ClusterResourcePlacementAvailableConditionType) {
			available = c.Status == metav1.ConditionTrue && c.ObservedGeneration >= ch.Generation
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.placements[ch.Placement]; ok && old.revision > ch.Revision {
		return
	}
	w.placements[ch.Placement] = watched{revision: ch.Revision, available: available && !ch.Deleted}
}

// available counts the placements named with prefix that are Available, and the others
// seen.
func (w *statusWatch) available(prefix string) (available, not int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, p := range w.placements {
		switch {
		case !strings.HasPrefix(name, prefix):
		case p.available:
			available++
		default:
			not++
		}
	}
	return available, not
}
