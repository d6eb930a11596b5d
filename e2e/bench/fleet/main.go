// Command fleet measures Flotilla's hub against a large fleet of simulated member clusters.
//
// It starts what the standalone process runs, without members (embedded NATS with JetStream,
// a local PostgreSQL, the scheduler, rollout and status services), then a simulated fleet
// (package sim: members that join, heartbeat, consume their work with the real apply
// worker's consumers and report with its protocol, without a Kubernetes API server), and
// places a namespace of objects on it with fleetctl. It prints how long the members took to
// join, how long the placement took to be scheduled, applied and available everywhere, the
// process's peak resident memory and CPU time, and the largest messages seen on the bus
// (a plain subscription on ">"), with what the streams hold. It stops everything it started.
//
// With -suite (make bench-scale) it runs KubeFleet's scale scenarios instead, nats-server
// and each hub service its own process (built from this tree), and prints one table beside
// KubeFleet's figures: see suite.go and doc.go.
//
//	go run ./e2e/bench/fleet -suite                      # make bench-scale
//	go run ./e2e/bench/fleet -members 1000 -pick 100     # one placement
//	go run ./e2e/bench/fleet -members 5000 -pick 0       # PickAll
//	go run ./e2e/bench/fleet -members 5000 -hub=false    # the simulated fleet alone, on NATS
//	go run ./e2e/bench/fleet -failover -heartbeat-period 5s  # the suite's failover scenario alone
//
// See doc.go for figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/e2e/bench/benchkit"
	"github.com/flotilla-dev/flotilla/e2e/bench/fleet/sim"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
)

// options are the command's flags.
type options struct {
	members        int
	pick           int
	objects        int
	joinRate       float64
	heartbeat      time.Duration
	applyDelay     sim.Delay
	availableDelay sim.Delay
	separate       bool
	preview        bool
	failureRate    float64
	seed           int64
	consumers      sim.ConsumerMode
	timeout        time.Duration
	idle           time.Duration
	hub            bool
	maxConsumers   int
	dataDir        string
	keep           bool
	logLevel       string
	cpuProfile     string
	// The suite's (-suite).
	suite        bool
	runs         int
	placements   int
	bigMembers   int
	bigTimeout   time.Duration
	burstTimeout time.Duration
	// The failover scenario's (-failover runs it alone, after the join).
	failover           bool
	failoverPlacements int
	failoverLost       int
	failoverGrace      time.Duration
	failbackAfter      time.Duration
	failoverPause      time.Duration
	// The hub processes' GOMEMLIMIT (-memory-limits).
	memoryLimits memoryLimits
}

func main() {
	o := options{applyDelay: sim.Uniform(50*time.Millisecond, 500*time.Millisecond), availableDelay: sim.Uniform(time.Second, 5*time.Second)}
	flag.IntVar(&o.members, "members", 1000, "simulated member clusters")
	flag.IntVar(&o.pick, "pick", 100, "clusters the placement picks (PickN); 0 places on every member (PickAll)")
	flag.IntVar(&o.objects, "objects", 10, "objects placed: a namespace with a Deployment, a Service and ConfigMaps for the rest")
	flag.Float64Var(&o.joinRate, "join-rate", 0, "member joins per second; 0: as fast as the bus takes them")
	flag.DurationVar(&o.heartbeat, "heartbeat-period", 60*time.Second, "each member's heartbeat period")
	flag.Var(&o.applyDelay, "apply-delay", `how long a member takes to apply: "200ms", uniform "50ms-500ms" or exponential "exp:200ms"`)
	flag.BoolVar(&o.preview, "preview", false, "once the placement is available, time fleetctl apply --dry-run=server of it with changed objects (every member answers)")
	flag.BoolVar(&o.separate, "separate-availability", false, "report Applied first and Available in a second report, -available-delay later")
	flag.Var(&o.availableDelay, "available-delay", "with -separate-availability: how long after the apply the objects become available")
	flag.Float64Var(&o.failureRate, "failure-rate", 0, "chance that an apply fails (retried with the worker's backoff)")
	flag.Int64Var(&o.seed, "seed", 1, "seed of the simulated delays and failures")
	flag.Var(&o.consumers, "consumers", "per-member: each member its real durable consumer; shared: one consumer for all (not the real protocol)")
	flag.DurationVar(&o.timeout, "timeout", 15*time.Minute, "bound on each wait (members joined, placement applied, available)")
	flag.DurationVar(&o.idle, "idle", 0, "keep the fleet running this long after the placement is available, before measuring (steady-state heartbeats)")
	flag.BoolVar(&o.hub, "hub", true, "run the hub services and place a placement; false: the simulated fleet on NATS alone (its own cost)")
	flag.IntVar(&o.maxConsumers, "nats-max-consumers", 0, "the NATS server's default_max_consumers per stream (0: the server's default, 1,000, which is the standalone's)")
	flag.StringVar(&o.dataDir, "data-dir", "", "data dir (NATS, PostgreSQL, the services' log; default a fresh temporary one, removed at the end)")
	flag.BoolVar(&o.keep, "keep", false, "keep the data dir at the end")
	flag.StringVar(&o.logLevel, "log-level", "warn", "level of the services' and simulator's log (<data-dir>/flotilla.log)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole process (hub services, NATS, fleet) from the placement on to this file")
	flag.BoolVar(&o.suite, "suite", false, "run KubeFleet's scale scenarios, each hub service its own process, and print one table beside KubeFleet's figures")
	flag.IntVar(&o.runs, "runs", 10, "with -suite: runs of the single PickN placement, alone and with -placements present")
	flag.IntVar(&o.placements, "placements", 1000, "with -suite: placements present (PickN -pick each) for the second round of runs and the restarts")
	flag.IntVar(&o.bigMembers, "big-members", 5000, "with -suite: members in all for the PickAll placement at the end (more join); at most -members skips it")
	flag.DurationVar(&o.burstTimeout, "burst-timeout", 18*time.Minute, "with -suite: how long to wait for the -placements placements to be Available")
	flag.DurationVar(&o.bigTimeout, "big-timeout", 3*time.Minute, "with -suite: how long to wait for PickAll over -big-members")
	_ = o.memoryLimits.Set(defaultMemoryLimits)
	flag.Var(&o.memoryLimits, "memory-limits", `with -suite: GOMEMLIMIT of the hub processes, "name=limit,..." (names: nats-server, scheduler, rollout, status), or "none"`)
	flag.BoolVar(&o.failover, "failover", false, "with -suite: run the failover scenario alone after the join (use a short -heartbeat-period, say 5s)")
	flag.IntVar(&o.failoverPlacements, "failover-placements", 3, "with -suite: PickN -pick placements that fail over (one more fails back too)")
	flag.IntVar(&o.failoverLost, "failover-lost", 10, "with -suite: members lost in the failover scenario (half silent, half with their API server unreachable), those the most placements are on")
	flag.DurationVar(&o.failoverGrace, "failover-grace", 20*time.Second, "with -suite: the failover placements' flotilla.dev/failover-after")
	flag.DurationVar(&o.failbackAfter, "failback-after", 30*time.Second, "with -suite: the failback placement's flotilla.dev/failback-after")
	flag.DurationVar(&o.failoverPause, "failover-pause", 0, "with -suite: at the end of the failover scenario, pause the scheduler (SIGSTOP) this long, no member down, and count the members then found lost; 0 skips it")
	flag.Parse()
	if o.members < 1 || o.pick < 0 || o.objects < 3 {
		fmt.Fprintln(os.Stderr, "fleet: -members must be at least 1, -pick at least 0, -objects at least 3")
		os.Exit(2)
	}
	if o.failover {
		o.suite = true
	}
	if o.suite && (o.failoverLost < 2 || o.failoverPlacements < 1 || o.failoverGrace < time.Second || o.failbackAfter < time.Second) {
		fmt.Fprintln(os.Stderr, "fleet: -failover-lost must be at least 2, -failover-placements at least 1, -failover-grace and -failback-after at least 1s")
		os.Exit(2)
	}
	if o.suite && (o.pick < 1 || o.pick > o.members || o.runs < 1 || o.placements < 0) {
		fmt.Fprintln(os.Stderr, "fleet: with -suite, -pick must be between 1 and -members, -runs at least 1, -placements at least 0")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	runner := run
	if o.suite {
		runner = runSuite
	}
	err := runner(ctx, o, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fleet: %v\n", err)
		os.Exit(1)
	}
}

// workspace is a run's data directory and the log written in it.
type workspace struct {
	dir  string
	log  *slog.Logger
	logf *os.File
	done func(error)
}

// openWorkspace makes (or reuses, -data-dir) the run's data directory and opens its log at
// -log-level; close removes the directory unless -keep or the run failed.
func openWorkspace(o options, progress io.Writer) (*workspace, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	dataDir, cleanUp, err := benchkit.DataDir(o.dataDir, "flotilla-fleet-", o.keep, progress)
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dataDir, benchkit.LogFile))
	if err != nil {
		cleanUp(err)
		return nil, err
	}
	return &workspace{dir: dataDir, logf: logf, done: cleanUp,
		log: slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: level}))}, nil
}

func (w *workspace) close(err error) {
	w.logf.Close()
	w.done(err)
}

func run(ctx context.Context, o options, out, progress io.Writer) (err error) {
	ws, err := openWorkspace(o, progress)
	if err != nil {
		return err
	}
	defer func() { ws.close(err) }()
	dataDir, log := ws.dir, ws.log

	began := time.Now()
	h, err := startHub(ctx, dataDir, o.hub, o.maxConsumers, log, progress)
	if err != nil {
		return err
	}
	defer func() {
		if serr := h.stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-h.exitedEarly():
			fmt.Fprintln(progress, "the hub services stopped")
			cancel()
		case <-ctx.Done():
		}
	}()

	// The members share one connection, as the standalone's apply workers do; the
	// observers have their own.
	membersNC, err := nats.Connect(h.nats.URL(), nats.Name("fleet-sim"), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer membersNC.Close()
	nc, err := nats.Connect(h.nats.URL(), nats.Name("fleet-bench"))
	if err != nil {
		return err
	}
	defer nc.Close()
	w, err := watchWire(nc)
	if err != nil {
		return err
	}
	defer w.stop()
	js, err := jetstream.New(membersNC)
	if err != nil {
		return err
	}
	fleet, err := sim.New(sim.Options{
		JetStream: js, Members: o.members, JoinRate: o.joinRate, HeartbeatPeriod: o.heartbeat,
		ApplyDelay: o.applyDelay, SeparateAvailability: o.separate, AvailableDelay: o.availableDelay,
		FailureRate: o.failureRate, Seed: o.seed, Consumers: o.consumers, Logger: log,
	})
	if err != nil {
		return err
	}
	fleetCtx, stopFleet := context.WithCancel(ctx)
	fleetDone := make(chan struct{})
	var fleetErr error
	go func() {
		fleetErr = fleet.Run(fleetCtx)
		close(fleetDone)
	}()
	defer func() {
		stopFleet()
		<-fleetDone
		if fleetErr != nil {
			err = errors.Join(err, fleetErr)
		}
	}()

	m := &measurement{opts: o, began: began, setUp: time.Since(began)}
	b := &bench{opts: o, cpuProfile: o.cpuProfile, fleet: fleet, nc: nc, js: js, query: query.New(nc), progress: progress, m: m,
		fleetDone: fleetDone, fleetErr: func() error { return fleetErr }}
	runErr := b.measure(ctx)
	m.collect(ctx, fleet, js, w, nc.MaxPayload())
	if o.hub {
		m.consumers = b.consumerProgress(ctx, m.stats.LastSeq)
	}
	m.print(out, w)
	if runErr != nil {
		fmt.Fprintf(progress, "\nthe services' log: %s\n", filepath.Join(dataDir, benchkit.LogFile))
	}
	return runErr
}
