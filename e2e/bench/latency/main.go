// Command latency measures how long Flotilla takes to place objects on member clusters,
// beside what kubectl and a bare client-go loop take to put the same objects there.
//
// It starts the standalone stack (embedded NATS, a local PostgreSQL, the scheduler, rollout
// and status services and an apply worker per member) with three real local members
// (kube-apiserver + etcd + kube-controller-manager, with simulated nodes so Deployments
// become available), then for each run:
//
//  1. fleetctl apply of a new namespace with 20 objects (ConfigMaps, ServiceAccounts, Roles,
//     RoleBindings, Services, Deployments) and a PickAll placement of it, timed until the
//     status service reports ClusterResourcePlacementApplied=True for the placement's
//     generation on every member (queried, and in a status event) and until watches on the
//     members have seen every object;
//  2. fleetctl apply of one edited ConfigMap, timed until watches see it on every member and
//     the status reports Applied for the new resource snapshot on every member;
//  3. the same two changes, in a namespace of their own, with kubectl apply --server-side to
//     each member in turn, and with server-side applies from client-go to all members and
//     objects at once (the physical limit).
//
// It prints p50/p90/min/max of each over the runs (a warm-up run is not counted), the ratios
// to the baselines, where Flotilla's time goes, from the events it sees on the bus, and
// which processes used the machine's CPU during a new placement and during client-go's. See
// doc.go for what the figures say. It stops everything it started before it exits.
//
//	go run ./e2e/bench/latency            # or: make bench
//	go run ./e2e/bench/latency -runs 5 -max-unavailable 100%
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
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/e2e/bench/benchkit"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
	"github.com/flotilla-dev/flotilla/services/standalone"
)

// options are the command's flags.
type options struct {
	runs, warmup   int
	members        int
	poll, settle   time.Duration
	timeout        time.Duration
	maxUnavailable string
	dataDir        string
	keep           bool
	logLevel       string
	trace          bool
	idle           int
	cpuProfile     string
	windowProfiles string
	requests       bool
}

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 20, "measured runs")
	flag.IntVar(&o.warmup, "warmup", 1, "runs before the measured ones, not counted (warm caches, first connections)")
	flag.IntVar(&o.members, "members", 3, "local member clusters")
	flag.DurationVar(&o.poll, "poll", 50*time.Millisecond, "how often to query the status service between status events")
	flag.DurationVar(&o.settle, "settle", 500*time.Millisecond, "pause before each new placement, after it is available before its hub change, and between Flotilla, kubectl and client-go")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Minute, "bound on each measured change")
	flag.StringVar(&o.maxUnavailable, "max-unavailable", "", "strategy.rollingUpdate.maxUnavailable of the placements (default Fleet's 25%)")
	flag.StringVar(&o.dataDir, "data-dir", "", "standalone's data dir (default a fresh temporary one, removed at the end)")
	flag.BoolVar(&o.keep, "keep", false, "keep the data dir (logs, manifests) at the end")
	flag.StringVar(&o.logLevel, "log-level", "info", "level of the services' log (in <data-dir>/flotilla.log)")
	flag.BoolVar(&o.trace, "trace", false, "print every event of each measured change, with its offset, to stderr")
	flag.IntVar(&o.idle, "idle-placements", 0, "small placements to put in place before the measured runs (a fleet that already holds work)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (the whole Flotilla stack runs in it) to this file")
	flag.BoolVar(&o.requests, "requests", false, "count the members' API requests and watch events in each new placement, by verb and resource (reads each API server's /metrics just before and after it, which costs them CPU then)")
	flag.StringVar(&o.windowProfiles, "window-profiles", "", "write a CPU profile of this process during each measured new placement only, as DIR/new-NN.prof (go tool pprof merges DIR/*.prof)")
	flag.Parse()
	if o.runs < 1 || o.warmup < 0 || o.members < 1 {
		fmt.Fprintln(os.Stderr, "latency: -runs and -members must be at least 1, -warmup at least 0")
		os.Exit(2)
	}
	if o.cpuProfile != "" && o.windowProfiles != "" {
		fmt.Fprintln(os.Stderr, "latency: -cpuprofile and -window-profiles exclude each other (one CPU profile at a time)")
		os.Exit(2)
	}
	if o.windowProfiles != "" {
		if err := os.MkdirAll(o.windowProfiles, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "latency: -window-profiles: %v\n", err)
			os.Exit(2)
		}
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "latency: -cpuprofile: %v\n", err)
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o, os.Stdout, os.Stderr)
	stop()
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "latency: %v\n", err)
		os.Exit(1)
	}
}

// bench is the running benchmark: the stack's endpoints and the observers.
type bench struct {
	natsURL      string
	query        *query.Client
	tracer       *tracer
	observer     *observer
	members      []*member
	kubectl      string
	kubectlCache string
	workDir      string
	poll, settle time.Duration
	timeout      time.Duration
	traceOut     io.Writer // nil: no per-event trace
	progress     io.Writer
	// windowProfiles, when set, is the directory of a CPU profile per measured new placement.
	windowProfiles string
	// requests: count the members' API requests in each new placement's window.
	requests bool
}

func run(ctx context.Context, o options, out, progress io.Writer) (err error) {
	binDir, err := kube.BinDir()
	if err != nil {
		return err
	}
	kubectl := filepath.Join(binDir, "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		return fmt.Errorf("kubectl for the baseline: %w (make kube-bins builds it)", err)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	dataDir, cleanUp, err := benchkit.DataDir(o.dataDir, "flotilla-bench-", o.keep, progress)
	if err != nil {
		return err
	}
	defer func() { cleanUp(err) }()

	st := startStack(ctx, standalone.Config{
		DataDir:        dataDir,
		NATSListen:     "127.0.0.1:0",
		MetricsListen:  "127.0.0.1:0",
		LocalMembers:   o.members,
		KubeBinDir:     binDir,
		SimulatedNodes: true,
		Out:            progress,
		LogLevel:       level,
	})
	defer func() {
		if serr := st.stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("the standalone stack: %w", serr))
		}
	}()
	ep, err := st.waitReady(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := st.endOnFailure(ctx)
	defer cancel()

	b, closeBench, err := newBench(ctx, ep, o, kubectl, dataDir, progress)
	if err != nil {
		return err
	}
	defer closeBench()
	if err := b.waitMembers(ctx, o.members); err != nil {
		return err
	}

	strategy := "Fleet's default rollout strategy (maxUnavailable 25%: one member at a time on updates)"
	if o.maxUnavailable != "" {
		strategy = "rollingUpdate.maxUnavailable " + o.maxUnavailable
	}
	if o.idle > 0 {
		if err := b.placeIdle(ctx, o.idle); err != nil {
			return err
		}
		strategy += fmt.Sprintf(", %d idle placements in place", o.idle)
	}
	return b.runAll(ctx, o, strategy, out)
}

// runAll makes the warm-up and the measured runs and prints the results; a
// failed run still prints those measured before it.
func (b *bench) runAll(ctx context.Context, o options, strategy string, out io.Writer) error {
	fmt.Fprintf(b.progress, "\nbenchmark: %d warm-up and %d measured run(s), %s\n", o.warmup, o.runs, strategy)
	var res results
	for i := range o.warmup + o.runs {
		label := fmt.Sprintf("%02d", i-o.warmup+1)
		if i < o.warmup {
			label = fmt.Sprintf("w%d", i+1)
		}
		f, k, c, err := b.runOnce(ctx, label, o.maxUnavailable)
		if err != nil {
			if len(res.flotilla) > 0 {
				res.print(out, o.members, strategy)
			}
			return fmt.Errorf("run %s: %w", label, err)
		}
		fmt.Fprintln(b.progress, runLine(label, f, k, c))
		if i >= o.warmup {
			res.flotilla = append(res.flotilla, f)
			res.kubectl = append(res.kubectl, k)
			res.clientG = append(res.clientG, c)
		}
	}
	res.print(out, o.members, strategy)
	return nil
}

// runOnce makes the same changes with Flotilla, kubectl and client-go. Each
// starts after the settle pause: the members' controllers are still creating
// the ReplicaSets and pods of the previous one's Deployments when it returns,
// and whichever came next would pay for that.
func (b *bench) runOnce(ctx context.Context, label, maxUnavailable string) (f placementRun, k, c baselineRun, err error) {
	time.Sleep(b.settle)
	if f, err = b.runFlotilla(ctx, label, maxUnavailable); err != nil {
		return f, k, c, err
	}
	time.Sleep(b.settle)
	if k, err = b.runKubectl(ctx, label); err != nil {
		return f, k, c, err
	}
	time.Sleep(b.settle)
	c, err = b.runClientGo(ctx, label)
	return f, k, c, err
}

func newBench(ctx context.Context, ep standalone.Endpoints, o options, kubectl, dataDir string, progress io.Writer) (*bench, func(), error) {
	nc, err := nats.Connect(ep.NATSURL, nats.Name("flotilla-bench"))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %w", ep.NATSURL, err)
	}
	tr, err := startTracer(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	closeAll := func() {
		tr.stop()
		nc.Close()
	}
	b := &bench{
		natsURL: ep.NATSURL, query: query.New(nc), tracer: tr,
		kubectl: kubectl, kubectlCache: filepath.Join(dataDir, "kubectl-cache"), workDir: filepath.Join(dataDir, "bench"),
		poll: o.poll, settle: o.settle, timeout: o.timeout, progress: progress, windowProfiles: o.windowProfiles,
		requests: o.requests,
	}
	for _, m := range ep.Members {
		mm, err := newMember(m.Name, m.Kubeconfig)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		b.members = append(b.members, mm)
	}
	if o.trace {
		b.traceOut = os.Stderr
	}
	if b.observer, err = observe(ctx, b.members); err != nil {
		closeAll()
		return nil, nil, err
	}
	return b, closeAll, nil
}

// waitMembers waits until n members have joined the fleet.
func (b *bench) waitMembers(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	for {
		ms, err := b.query.Members(ctx, "")
		joined := 0
		for _, m := range ms {
			for _, c := range m.Status.Conditions {
				if c.Type == string(api.ConditionTypeMemberClusterJoined) && c.Status == "True" {
					joined++
				}
			}
		}
		if err == nil && joined == n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d members to join (%d joined, %v): %w", n, joined, err, ctx.Err())
		case <-time.After(b.poll):
		}
	}
}
