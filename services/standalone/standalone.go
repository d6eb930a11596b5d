// Package standalone runs all of Flotilla in one process, for the quick start: an embedded
// NATS server with JetStream, PostgreSQL (a local server it starts itself, or one named by a
// URL), the scheduler, rollout and status services, and an apply worker per member cluster,
// for members given as kubeconfig files and for local member clusters (kube-apiserver, etcd
// and kube-controller-manager processes) it starts itself. Everything that must survive lives
// in one data directory, so running again on it resumes where the last run stopped.
package standalone

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/kube"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/platform/natsconn"
	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/apply/worker"
	"github.com/flotilla-dev/flotilla/services/rollout"
	"github.com/flotilla-dev/flotilla/services/scheduler"
	"github.com/flotilla-dev/flotilla/services/status"
)

// Defaults of Config.
const (
	DefaultDataDir = ".flotilla"
	// DefaultNATSListen is also where fleetctl looks for NATS by default.
	DefaultNATSListen = "127.0.0.1:4222"
	// DefaultMetricsListen is where /metrics, /healthz and /readyz are served by default:
	// the port every service serves them on (service.DefaultHealthAddr).
	DefaultMetricsListen = "127.0.0.1:8081"
)

// DatabaseName is the database a local PostgreSQL keeps Flotilla's tables in.
const DatabaseName = "flotilla"

// Config configures Run.
type Config struct {
	// DataDir holds everything that survives a restart: nats/ (JetStream's store),
	// postgres/ (a local PostgreSQL's cluster), kube/ (local members' etcd data, certificates
	// and tokens), members/<name>.kubeconfig, memberclusters/<name>.yaml and flotilla.log.
	// Default DefaultDataDir.
	DataDir string
	// NATSListen is the host:port the NATS server listens on; port 0 picks a free port.
	// Default DefaultNATSListen.
	NATSListen string
	// MetricsListen is the host:port of the Prometheus metrics of every service (/metrics),
	// and of /healthz and /readyz; port 0 picks a free port. Default DefaultMetricsListen.
	MetricsListen string
	// DatabaseURL names a PostgreSQL database to use; empty starts a local server in
	// DataDir/postgres and stops it on exit.
	DatabaseURL string
	// KubeconfigDir holds one kubeconfig per member cluster, named <member>.kubeconfig (or
	// .yaml, .yml, .conf): an apply worker runs for each.
	KubeconfigDir string
	// LocalMembers starts this many member clusters, member-1 ... member-N, here.
	LocalMembers int
	// KubeBinDir holds etcd, kube-apiserver, kube-controller-manager (and kubectl, for the
	// hints printed); default $FLOTILLA_KUBE_BIN_DIR, then the cache make kube-bins fills.
	KubeBinDir string
	// Example applies the quick-start example (ExamplesDir/quickstart) once everything runs,
	// and prints its placement's status as it converges.
	Example bool
	// ExamplesDir holds the examples; default deploy/examples in the current directory or
	// the nearest parent that has one.
	ExamplesDir string
	// Out receives the progress and the summary for the person running it; default os.Stdout.
	Out io.Writer
	// Logger receives the services' logs; default a text log in DataDir/flotilla.log at
	// LogLevel.
	Logger   *slog.Logger
	LogLevel slog.Level
	// SimulatedNodes gives each local member a node that reports its pods running and ready,
	// though no container runs (the members have no kubelet), so that Deployments become
	// available (see kube.SimulatedNode).
	SimulatedNodes bool
	// GCPercent is the Go collector's target (runtime/debug.SetGCPercent) while Run runs:
	// every service shares one heap here, whose live part is small, so Go's default of 100
	// collects many times a second while a placement rolls out. Zero means DefaultGCPercent,
	// unless the GOGC environment variable is set, which then wins; negative keeps Go's.
	GCPercent int
	// HeartbeatPeriod is how often apply workers publish their member's heartbeat; default
	// the worker's (60s).
	HeartbeatPeriod time.Duration
	// Topology tunes the JetStream streams and consumers.
	Topology bus.TopologyOptions
	// NATSTLS makes NATS accept TCP clients over TLS only, with a client certificate: a CA,
	// the server's certificate and one for clients (fleetctl) are made in DataDir/tls the
	// first time. The services inside the process connect in process.
	NATSTLS bool
	// EncryptionKeyFile holds the keys the rollout seals Secrets with in PostgreSQL; default
	// DataDir/encryption-keys, made with a new key when missing.
	EncryptionKeyFile string
	// Hub starts a local hub cluster (a kube-apiserver) and hubsync: kubectl and GitOps tools
	// use it as Fleet's hub, with the kubeconfig written to DataDir/hub.kubeconfig. The
	// members join there, as MemberCluster objects.
	Hub bool
	// Ready, when set, is called once every service runs and the members are registered (and,
	// with Example, once the example has been applied; it need not have converged).
	Ready func(Endpoints)
}

// Endpoints says where a running standalone process can be reached.
type Endpoints struct {
	// NATSURL is the NATS server's client URL.
	NATSURL string
	// MetricsURL serves the Prometheus metrics of every service.
	MetricsURL string
	// DatabaseURL is the PostgreSQL database the services use.
	DatabaseURL string
	// DataDir is the absolute data directory.
	DataDir string
	// Members are the member clusters apply workers run for.
	Members []Member
	// TLS, when NATS requires it, holds what a client connects with: the CA and the client
	// certificate and key (fleetctl's --nats-ca, --nats-cert and --nats-key).
	TLS *ClientTLS
	// HubKubeconfig, with Config.Hub, is the kubeconfig of the local hub cluster.
	HubKubeconfig string
}

// ClientTLS are the files a NATS client presents and verifies the server with.
type ClientTLS struct {
	CA, Cert, Key string
}

// Member is a member cluster an apply worker runs for.
type Member struct {
	Name string
	// Kubeconfig is the path of its kubeconfig file.
	Kubeconfig string
	// Local: the cluster runs here, started by Run.
	Local bool
	// Labels are those it is registered with when it joins the fleet.
	Labels map[string]string
}

// prepare validates cfg and fills in the defaults.
func (c Config) prepare() (Config, error) {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	dir, err := filepath.Abs(c.DataDir)
	if err != nil {
		return c, fmt.Errorf("data dir: %w", err)
	}
	c.DataDir = dir
	if c.NATSListen == "" {
		c.NATSListen = DefaultNATSListen
	}
	if _, _, err := splitHostPort(c.NATSListen); err != nil {
		return c, fmt.Errorf("--nats-listen %q: %w", c.NATSListen, err)
	}
	if c.MetricsListen == "" {
		c.MetricsListen = DefaultMetricsListen
	}
	if _, _, err := splitHostPort(c.MetricsListen); err != nil {
		return c, fmt.Errorf("--metrics-listen %q: %w", c.MetricsListen, err)
	}
	if c.LocalMembers < 0 {
		return c, fmt.Errorf("--local-members must not be negative, got %d", c.LocalMembers)
	}
	if c.LocalMembers == 0 && c.KubeconfigDir == "" {
		return c, errors.New("no member clusters: give --local-members N to start N here, or --kubeconfig-dir with a <member>.kubeconfig per cluster")
	}
	if c.Example && c.LocalMembers == 0 {
		return c, errors.New("--example needs --local-members: it puts a pre-existing workload on member-1 before placing the example")
	}
	if c.Out == nil {
		c.Out = os.Stdout
	}
	return c, nil
}

func splitHostPort(hostport string) (string, int, error) {
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number from 0 to 65535", p)
	}
	return host, port, nil
}

// standaloneInbox is the inbox prefix of the standalone's own connections (see
// bus.InboxPrefix); the services it runs have theirs.
const standaloneInbox = bus.InboxRoot + ".standalone"

// runner is one run: what it started, in order, so it can stop it in reverse.
type runner struct {
	cfg  Config
	out  *progress
	log  *slog.Logger
	logf *os.File // the default log file, closed last

	nats    *natsserver.Server
	natsURL string
	tls     *ClientTLS       // set when NATS requires TLS
	keyFile string           // the rollout's encryption keys
	pg      *postgres.Server // nil with an external database
	dbURL   string
	kube    *kube.Env // nil without local members or hub
	members []Member
	workers []worker.Member
	kubectl string // path of kubectl, for hints; "" when unknown

	// metrics is the one registry every service's metrics go to, served at metricsURL.
	metrics    *prometheus.Registry
	metricsLn  net.Listener
	metricsURL string
	running    atomic.Bool // the services answer: /readyz says ok
}

// Run runs everything until ctx ends, then stops it all cleanly and returns nil; or returns
// the error that stopped a part. It prints its progress and a summary to cfg.Out.
func Run(ctx context.Context, cfg Config) error {
	cfg, err := cfg.prepare()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	r := &runner{cfg: cfg, out: newProgress(cfg.Out), log: cfg.Logger}
	defer r.stop()
	if r.log == nil {
		if err := r.openLog(); err != nil {
			return err
		}
	}
	defer setGCPercent(cfg.GCPercent)()
	r.out.printf("Flotilla standalone: every service in one process, state in %s\n", cfg.DataDir)
	if err := r.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while starting
		}
		return err
	}
	return r.serve(ctx)
}

// DefaultGCPercent is Config.GCPercent's default. In the latency benchmark (go run
// ./e2e/bench/latency, 3 local members on 2 cores) it took the process's CPU in a new
// placement's window from 170 to 110 ms and the placement's p50 to Applied from 346 to
// 209 ms, for a peak of 428 MiB instead of 272 (the members' simulated nodes and the
// benchmark's observers included).
const DefaultGCPercent = 400

// setGCPercent applies Config.GCPercent and returns what restores the previous setting.
func setGCPercent(pct int) (restore func()) {
	if pct < 0 || (pct == 0 && os.Getenv("GOGC") != "") {
		return func() {}
	}
	if pct == 0 {
		pct = DefaultGCPercent
	}
	prev := debug.SetGCPercent(pct)
	return func() { debug.SetGCPercent(prev) }
}

func (r *runner) openLog() error {
	path := filepath.Join(r.cfg.DataDir, "flotilla.log")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	r.logf = f
	r.log = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: r.cfg.LogLevel}))
	return nil
}

// start brings up NATS, PostgreSQL and the member clusters.
func (r *runner) start(ctx context.Context) error {
	if err := r.encryptionKeys(); err != nil {
		return err
	}
	if err := r.listenMetrics(); err != nil {
		return err
	}
	if err := r.startNATS(ctx); err != nil {
		return err
	}
	if err := r.startDatabase(ctx); err != nil {
		return err
	}
	return r.startMembers(ctx)
}

func (r *runner) startNATS(ctx context.Context) error {
	host, port, err := splitHostPort(r.cfg.NATSListen)
	if err != nil {
		return err
	}
	store := filepath.Join(r.cfg.DataDir, "nats")
	done := r.out.step(fmt.Sprintf("Starting NATS with JetStream (store in %s)", r.rel(store)))
	if port != 0 {
		// The embedded server cannot report a port it failed to bind; find out first.
		l, err := net.Listen("tcp", r.cfg.NATSListen)
		if err != nil {
			done("failed")
			return fmt.Errorf("NATS cannot listen on %s (%v): is another Flotilla running? Stop it, or pick another address with --nats-listen", r.cfg.NATSListen, err)
		}
		l.Close()
	}
	opts := natsserver.Options{StoreDir: store, Host: host, Port: port, ServerName: "flotilla"}
	if r.cfg.NATSTLS {
		if opts.TLS, r.tls, err = r.natsTLS(host); err != nil {
			done("failed")
			return err
		}
	}
	srv, err := natsserver.Start(opts)
	if err != nil {
		done("failed")
		return err
	}
	r.nats, r.natsURL = srv, srv.URL()
	// The topology first, so that apply workers can make their consumers at once.
	nc, err := srv.Connect(nats.Name("flotilla-standalone"), nats.CustomInboxPrefix(standaloneInbox))
	if err != nil {
		done("failed")
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err == nil {
		err = bus.EnsureTopology(ctx, js, r.cfg.Topology)
	}
	if err != nil {
		done("failed")
		return fmt.Errorf("declare the JetStream topology: %w", err)
	}
	done("NATS ready at " + r.natsURL)
	return nil
}

func (r *runner) startDatabase(ctx context.Context) error {
	if r.cfg.DatabaseURL != "" {
		r.dbURL = r.cfg.DatabaseURL
		r.out.printf("==> Using PostgreSQL at %s\n", redactURL(r.dbURL))
		return nil
	}
	dir, note, err := postgresDir(r.cfg.DataDir)
	if err != nil {
		return err
	}
	done := r.out.step(fmt.Sprintf("Starting PostgreSQL (data in %s)", r.rel(dir)))
	if note != "" {
		r.out.linef("%s", note)
	}
	srv, err := postgres.Start(ctx, postgres.Options{DataDir: dir, Log: r.out.writer()})
	if err != nil {
		done("failed")
		return err
	}
	r.pg = srv
	if r.dbURL, err = srv.EnsureDatabase(ctx, DatabaseName); err != nil {
		done("failed")
		return err
	}
	done("PostgreSQL ready: " + r.dbURL)
	return nil
}

// serve runs the services until ctx ends or one of them fails.
func (r *runner) serve(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	hub := service.Options{
		// In process: the server asks no TLS of the process that runs it.
		NATS:        natsconn.Settings{URL: strings.Replace(r.natsURL, "tls://", "nats://", 1)},
		NATSOptions: []nats.Option{nats.InProcessServer(r.nats.Server)},
		DatabaseURL: r.dbURL, Topology: r.cfg.Topology, Logger: r.log,
		Metrics: r.metrics,
	}
	g.Go(func() error { return r.serveMetrics(gctx) })
	done := r.out.step("Starting the scheduler, rollout and status services")
	g.Go(func() error { return scheduler.Run(gctx, scheduler.Config{Options: hub}) })
	g.Go(func() error { return rollout.Run(gctx, rollout.Config{Options: hub, EncryptionKeyFile: r.keyFile}) })
	g.Go(func() error { return status.Run(gctx, status.Config{Options: hub}) })
	if r.cfg.Hub {
		g.Go(func() error { return r.runHubsync(gctx, hub) })
	}
	// Apply workers start once their members have joined: a heartbeat from a member that has
	// not joined yet is ignored, and the next one is a heartbeat period away.
	registered := make(chan struct{})
	g.Go(func() error {
		select {
		case <-registered:
			return r.runWorkers(gctx)
		case <-gctx.Done():
			return nil
		}
	})
	if r.cfg.SimulatedNodes {
		for _, m := range r.members {
			if m.Local {
				node := kube.SimulatedNode{Name: m.Name + "-node"}
				g.Go(func() error { return node.Run(gctx, r.kube.RESTConfig(m.Name)) })
			}
		}
	}
	g.Go(func() error {
		err := r.afterStart(gctx, done, registered)
		if err != nil && gctx.Err() == nil {
			return err
		}
		return nil
	})
	err := g.Wait()
	done("stopped") // in case the services stopped before they were all up
	if err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// runWorkers runs an apply worker per member on a connection of its own.
func (r *runner) runWorkers(ctx context.Context) error {
	// Several members' workers share this connection, as `apply --kubeconfig-dir` does.
	nc, err := r.nats.Connect(nats.Name("flotilla-apply"), nats.MaxReconnects(-1), nats.CustomInboxPrefix(bus.InboxRoot+".apply"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("apply workers: %w", err)
	}
	return worker.RunMembers(ctx, js, r.workers, worker.Config{HeartbeatPeriod: r.cfg.HeartbeatPeriod, Logger: r.log,
		Metrics: prometheus.WrapRegistererWith(prometheus.Labels{"service": "apply"}, r.metrics)})
}

// afterStart waits for the services to answer, registers the members, prints the summary,
// and runs the example.
func (r *runner) afterStart(ctx context.Context, started func(string), registered chan<- struct{}) error {
	nc, err := r.nats.Connect(nats.Name("flotilla-standalone"), nats.CustomInboxPrefix(standaloneInbox))
	if err != nil {
		return err
	}
	defer nc.Close()
	q := newQueries(nc)
	if err := q.waitForStatusService(ctx); err != nil {
		return err
	}
	started("services running")
	r.running.Store(true)
	register := r.registerMembers
	if r.cfg.Hub {
		register = r.registerMembersOnHub
	}
	if err := register(ctx, q); err != nil {
		return err
	}
	close(registered)
	r.printSummary()
	if !r.cfg.Example {
		r.ready()
		return nil
	}
	if err := r.runExample(ctx, q); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		// The services keep running: the person can look into it with fleetctl.
		r.out.printf("\nThe example did not complete: %v\nFlotilla keeps running; the services' log may say more%s.\n", err, r.logHint())
		r.log.Error("example failed", "err", err)
		r.ready()
	}
	return nil
}

func (r *runner) ready() {
	if r.cfg.Ready != nil {
		r.cfg.Ready(Endpoints{NATSURL: r.natsURL, MetricsURL: r.metricsURL, DatabaseURL: r.dbURL, DataDir: r.cfg.DataDir,
			Members: slices.Clone(r.members), TLS: r.tls, HubKubeconfig: r.hubKubeconfig()})
	}
}

// stop stops what start started, in reverse order, leaving the data in place.
func (r *runner) stop() {
	if r.metricsLn != nil {
		r.metricsLn.Close() // if serving never began
	}
	if r.kube == nil && r.pg == nil && r.nats == nil {
		r.closeLog()
		return
	}
	done := r.out.step("Stopping")
	if r.kube != nil {
		if err := r.kube.Stop(); err != nil {
			r.out.linef("member clusters: %v", err)
		}
		r.out.linef("member clusters stopped")
	}
	if r.pg != nil {
		if err := r.pg.Stop(); err != nil {
			r.out.linef("PostgreSQL: %v", err)
		}
		r.out.linef("PostgreSQL stopped")
	}
	if r.nats != nil {
		r.nats.Stop()
		r.out.linef("NATS stopped")
	}
	done(fmt.Sprintf("stopped; state kept in %s (run again to resume)", r.cfg.DataDir))
	r.closeLog()
}

func (r *runner) closeLog() {
	if r.logf != nil {
		r.logf.Close()
	}
}

func (r *runner) logPath() string { return filepath.Join(r.cfg.DataDir, "flotilla.log") }

// logHint names the log file when Run writes it.
func (r *runner) logHint() string {
	if r.logf == nil {
		return ""
	}
	return " (" + r.rel(r.logPath()) + ")"
}

// rel shows path relative to the current directory when it is below it, as people type it.
func (r *runner) rel(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil || rel == ".." || len(rel) > 2 && rel[:3] == "../" {
		return path
	}
	return rel
}
