// Package service is the skeleton every Flotilla service runs on: the Options each
// service's Config embeds (one flag set, validated once), Main for its command, Open for
// a NATS connection with the JetStream topology in place, a migrated PostgreSQL pool and
// the service's metrics, and Run, which starts the service's loops, the outbox relay and
// the health endpoint (with /metrics) together and stops them together.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/migrations"
	"github.com/flotilla-dev/flotilla/platform/health"
	"github.com/flotilla-dev/flotilla/platform/metrics"
	"github.com/flotilla-dev/flotilla/platform/natsconn"
	"github.com/flotilla-dev/flotilla/platform/outbox"
	"github.com/flotilla-dev/flotilla/platform/retention"
)

// Env is a connected service environment.
type Env struct {
	Name      string
	Source    string
	NC        *nats.Conn
	JS        jetstream.JetStream
	Publisher *bus.Publisher
	Pool      *pgxpool.Pool // nil for a member service
	Log       *slog.Logger
	// Metrics registers the service's metrics; each gets the label
	// service=<name>. BusMetrics count what happens to its events: the
	// Publisher and the outbox relay report to it, and Observed consumers.
	Metrics    prometheus.Registerer
	BusMetrics *metrics.Bus
	registry   *prometheus.Registry
	opts       Options
	retain     []retention.Rule // see Retain

	mu     sync.Mutex
	paused map[string]error // consumer -> why it is paused
}

// Open connects the service called name to NATS and, for a hub service, declares the
// JetStream topology and connects to PostgreSQL and migrates it. A server that is not up
// yet (refused, unreachable, starting) is waited for, with a log line saying which, until
// ctx ends; other errors (a bad password, a database that does not exist) are returned at
// once. Errors say what to do about an unreachable server and never show a password.
func Open(ctx context.Context, name string, opts Options) (*Env, error) {
	if name == "" {
		return nil, errors.New("open service: a name is required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("service", name)
	nc, err := connectNATS(ctx, name, opts, log)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("open JetStream: %w", err)
	}
	env := &Env{
		Name: name, Source: "/flotilla/" + name,
		NC: nc, JS: js, Log: log, opts: opts,
		paused: map[string]error{},
	}
	env.openMetrics()
	env.Publisher = bus.NewPublisher(js, bus.WithObserver(env.BusMetrics))
	if opts.Role != Hub {
		// Members and connectors keep no database and leave the streams to the hub.
		return env, nil
	}
	err = bus.Await(ctx, log, "NATS JetStream at "+opts.NATS.Redacted()+" to declare the streams", func(ctx context.Context) error {
		return bus.EnsureTopology(ctx, js, opts.Topology)
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("declare JetStream topology (is JetStream enabled on %s?): %w", opts.NATS.Redacted(), err)
	}
	pool, err := openDatabase(ctx, name, opts, log)
	if err != nil {
		nc.Close()
		return nil, err
	}
	env.Pool = pool
	// One outbox serves every hub service of the database: its gauges carry no
	// service label, and a second service on the registry shares them.
	metrics.Register(env.registry, metrics.NewOutboxBacklog(pool))
	// The outbox quarantines what the server would refuse, or what is over
	// the configured limit if that is smaller.
	limit := nc.MaxPayload()
	if opts.OutboxMaxBytes > 0 && opts.OutboxMaxBytes < limit {
		limit = opts.OutboxMaxBytes
	}
	outbox.SetMaxBytes(limit)
	return env, nil
}

// connectNATS connects to NATS, waiting for a server that is not up yet.
func connectNATS(ctx context.Context, name string, opts Options, log *slog.Logger) (*nats.Conn, error) {
	// Replies come back under the service's own inbox prefix (see bus.InboxPrefix); an
	// apply worker passes its member's in NATSOptions, which come later and win.
	inbox, err := bus.InboxPrefix(name)
	if err != nil {
		return nil, fmt.Errorf("open service: %w", err)
	}
	natsOpts := append([]nats.Option{
		nats.CustomInboxPrefix(inbox),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from NATS; reconnecting", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted()) }),
	}, opts.NATSOptions...)
	var nc *nats.Conn
	err = bus.Await(ctx, log, "NATS at "+opts.NATS.Redacted()+" to accept connections", func(context.Context) (err error) {
		nc, err = opts.NATS.Connect("flotilla-"+name, natsOpts...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w (is the server running? set --nats or %s)", err, natsconn.EnvURL)
	}
	return nc, nil
}

// openDatabase connects to PostgreSQL, waiting for a server that is not up yet, with the
// statement timeout on every connection, and migrates the database.
func openDatabase(ctx context.Context, name string, opts Options, log *slog.Logger) (*pgxpool.Pool, error) {
	if opts.DatabaseURL == "" {
		return nil, fmt.Errorf("%s: a database URL is required (--database-url or %s)", name, EnvDatabaseURL)
	}
	cfg, err := pgxpool.ParseConfig(opts.DatabaseURL)
	if err != nil {
		// pgx's parse errors do not show the password.
		return nil, fmt.Errorf("connect to PostgreSQL: %w (check --database-url or %s)", err, EnvDatabaseURL)
	}
	timeout := opts.StatementTimeout
	if timeout == 0 {
		timeout = DefaultStatementTimeout
	}
	if _, set := cfg.ConnConfig.RuntimeParams["statement_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(timeout.Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w (check --database-url or %s)", err, EnvDatabaseURL)
	}
	where := fmt.Sprintf("PostgreSQL at %s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	if err := bus.Await(ctx, log, where+" to accept connections", pool.Ping); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL: %w (check --database-url or %s)", err, EnvDatabaseURL)
	}
	if err := bus.Await(ctx, log, where+" to migrate the database", func(ctx context.Context) error { return migrate(ctx, pool) }); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// migrate migrates the database on a connection without the statement timeout: a migration
// may rightly take longer, and waits for replicas migrating at the same time.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: acquire connection: %w", err)
	}
	defer c.Release()
	if _, err := c.Exec(ctx, "set statement_timeout = 0"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := migrations.Migrate(ctx, c.Conn()); err != nil {
		return err
	}
	if _, err := c.Exec(ctx, "reset statement_timeout"); err != nil {
		// Do not hand the pool a connection without its timeout.
		_ = c.Conn().Close(ctx)
		return nil
	}
	return nil
}

// ConsumeOptions are the options of a service's consumer called name: its logger, the
// retry pacing and handler timeout of the service's options, and, for a hub service, a
// probe of PostgreSQL, so that the consumer pauses while the database is out of reach
// instead of failing its events; readiness reports the pause. extra come last.
func (e *Env) ConsumeOptions(name string, extra ...bus.Option) []bus.Option {
	timeout := e.opts.HandlerTimeout
	if timeout == 0 {
		timeout = DefaultHandlerTimeout
	}
	opts := []bus.Option{
		bus.WithLogger(e.Log),
		bus.WithHandlerTimeout(timeout),
		bus.WithPauseHook(func(reason error) { e.setPaused(name, reason) }),
	}
	if e.opts.RetryBase > 0 || e.opts.RetryMax > 0 {
		base, ceiling := e.opts.RetryBase, e.opts.RetryMax
		if base == 0 {
			base = 250 * time.Millisecond
		}
		if ceiling < base {
			ceiling = max(base, 30*time.Second)
		}
		opts = append(opts, bus.WithRetryDelay(base, ceiling))
	}
	if e.Pool != nil {
		opts = append(opts, bus.WithProbe(func(ctx context.Context) error {
			if err := e.Pool.Ping(ctx); err != nil {
				return fmt.Errorf("PostgreSQL: %w", err)
			}
			return nil
		}))
	}
	return append(opts, extra...)
}

func (e *Env) setPaused(consumer string, reason error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if reason == nil {
		delete(e.paused, consumer)
	} else {
		e.paused[consumer] = reason
	}
}

// Paused says which consumers are paused and why; nil when none is.
func (e *Env) Paused() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for c, reason := range e.paused {
		errs = append(errs, fmt.Errorf("consumer %s: %w", c, reason))
	}
	return errors.Join(errs...)
}

// Close closes the connections.
func (e *Env) Close() {
	if e.Pool != nil {
		e.Pool.Close()
	}
	e.NC.Close()
}

// Runnable is one of a service's loops; it blocks until ctx ends and returns
// nil then, or returns an error when it cannot go on.
type Runnable func(ctx context.Context) error

// Run runs the loops, the outbox relay (with a database) and the health
// endpoint until ctx ends or one of them fails, then stops them all.
func (e *Env) Run(ctx context.Context, loops ...Runnable) error {
	g, ctx := errgroup.WithContext(ctx)
	if e.Pool != nil {
		relay := &outbox.Relay{Pool: e.Pool, JS: e.JS, Logger: e.Log, Source: e.Source, Published: e.BusMetrics.Published}
		g.Go(func() error { return relay.Run(ctx) })
		// The inbox, published outbox rows and the tables Retain added are
		// pruned by age.
		g.Go(func() error { return e.pruner().Run(ctx) })
		// Hub services (those with a database) may read every stream, so they
		// also dead-letter messages whose deliveries ran out in a crash.
		g.Go(func() error { return bus.RescueMaxDeliveries(ctx, e.JS, e.Log) })
	}
	if e.opts.HealthAddr != "" {
		g.Go(func() error { return e.serveHealth(ctx) })
	}
	for _, loop := range loops {
		g.Go(func() error { return loop(ctx) })
	}
	e.Log.Info("service running")
	err := g.Wait()
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", e.Name, err)
	}
	return nil
}

func (e *Env) serveHealth(ctx context.Context) error {
	return health.Serve(ctx, e.opts.HealthAddr, health.Endpoints{Ready: e.Ready, Metrics: e.registry, Log: e.Log})
}

// Ready reports why the service cannot do its work now, or nil: NATS is not connected,
// PostgreSQL does not answer, or a consumer is paused waiting for one of them.
func (e *Env) Ready(ctx context.Context) error {
	if e.NC.Status() != nats.CONNECTED {
		return errors.New("not connected to NATS")
	}
	if err := e.Paused(); err != nil {
		return err
	}
	if e.Pool != nil {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := e.Pool.Ping(ctx); err != nil {
			return fmt.Errorf("PostgreSQL: %w", err)
		}
	}
	return nil
}

// openMetrics sets up the service's registry: the one its options give, else
// one of its own with the Go runtime's and the process's metrics.
func (e *Env) openMetrics() {
	e.registry = e.opts.Metrics
	if e.registry == nil {
		e.registry = prometheus.NewRegistry()
		e.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	e.Metrics = prometheus.WrapRegistererWith(prometheus.Labels{"service": e.Name}, e.registry)
	e.BusMetrics = metrics.NewBus(e.Metrics)
}

// Observed is the bus option that counts what happens to the deliveries of a
// durable consumer (BusMetrics), and it serves the consumer's lag.
func (e *Env) Observed(stream, consumer string) bus.Option {
	metrics.Register(e.Metrics, metrics.NewConsumerLag(e.JS, stream, consumer))
	e.BusMetrics.Watch(consumer)
	return bus.WithObserver(e.BusMetrics)
}

// Gatherer is what the service's /metrics serves.
func (e *Env) Gatherer() prometheus.Gatherer { return e.registry }

// Stopped is a service Run's last word on err: nil when ctx ended, since a
// service asked to stop while still starting (or connecting, or migrating)
// has not failed; err otherwise.
func Stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Migrate applies the migrations to the database and returns, for --migrate-only (a
// one-shot step before the services start).
func Migrate(ctx context.Context, databaseURL string) error {
	if databaseURL == "" {
		return fmt.Errorf("migrate: a database URL is required (--database-url or %s)", EnvDatabaseURL)
	}
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer pool.Close()
	return bus.Await(ctx, slog.Default(), "PostgreSQL to migrate the database", func(ctx context.Context) error {
		return migrations.MigratePool(ctx, pool)
	})
}
