// Package service holds what every Flotilla service runs on: a NATS
// connection with the JetStream topology in place, a migrated PostgreSQL pool,
// the outbox relay, and a runner that starts the service's loops together and
// stops them together.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/migrations"
	"github.com/flotilla-dev/flotilla/platform/health"
	"github.com/flotilla-dev/flotilla/platform/outbox"
)

// Options configure the connections of a service.
type Options struct {
	// Name names the service in logs, in the NATS connection and as the
	// source of the events it emits (/flotilla/<name>).
	Name string
	// NATSURL is the NATS server, e.g. nats://127.0.0.1:4222.
	NATSURL string
	// NATSOptions are extra connection options (credentials, TLS, or
	// nats.InProcessServer for the single-process mode).
	NATSOptions []nats.Option
	// DatabaseURL is the PostgreSQL connection string; empty for a service
	// that keeps no database (apply workers).
	DatabaseURL string
	// Topology tunes the streams and consumers.
	Topology bus.TopologyOptions
	// HealthAddr, when set, serves /healthz and /readyz there.
	HealthAddr string
	Logger     *slog.Logger
}

// Env is a connected service environment.
type Env struct {
	Name      string
	Source    string
	NC        *nats.Conn
	JS        jetstream.JetStream
	Publisher *bus.Publisher
	Pool      *pgxpool.Pool // nil without a database
	Log       *slog.Logger
	opts      Options
}

// Open connects to NATS and PostgreSQL, declares the JetStream topology and
// migrates the database. Errors say what to do about an unreachable server.
func Open(ctx context.Context, opts Options) (*Env, error) {
	if opts.Name == "" {
		return nil, errors.New("open service: a name is required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("service", opts.Name)
	natsOpts := append([]nats.Option{
		nats.Name("flotilla-" + opts.Name),
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from NATS; reconnecting", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted()) }),
	}, opts.NATSOptions...)
	nc, err := nats.Connect(opts.NATSURL, natsOpts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w (is the server running? set --nats or FLOTILLA_NATS_URL)", opts.NATSURL, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("open JetStream: %w", err)
	}
	if err := bus.EnsureTopology(ctx, js, opts.Topology); err != nil {
		nc.Close()
		return nil, fmt.Errorf("declare JetStream topology (is JetStream enabled on %s?): %w", opts.NATSURL, err)
	}
	env := &Env{
		Name: opts.Name, Source: "/flotilla/" + opts.Name,
		NC: nc, JS: js, Publisher: bus.NewPublisher(js), Log: log, opts: opts,
	}
	if opts.DatabaseURL != "" {
		pool, err := pgxpool.New(ctx, opts.DatabaseURL)
		if err == nil {
			err = pool.Ping(ctx)
		}
		if err != nil {
			nc.Close()
			if pool != nil {
				pool.Close()
			}
			return nil, fmt.Errorf("connect to PostgreSQL: %w (check --database-url or DATABASE_URL)", err)
		}
		if err := migrations.MigratePool(ctx, pool); err != nil {
			nc.Close()
			pool.Close()
			return nil, err
		}
		env.Pool = pool
	}
	return env, nil
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
		relay := &outbox.Relay{Pool: e.Pool, JS: e.JS, Logger: e.Log}
		g.Go(func() error { return relay.Run(ctx) })
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
	return health.Serve(ctx, e.opts.HealthAddr, func(ctx context.Context) error {
		if e.NC.Status() != nats.CONNECTED {
			return errors.New("not connected to NATS")
		}
		if e.Pool != nil {
			if err := e.Pool.Ping(ctx); err != nil {
				return fmt.Errorf("PostgreSQL: %w", err)
			}
		}
		return nil
	})
}

// Stopped is a service Run's last word on err: nil when ctx ended, since a
// service asked to stop while still starting (or connecting, or migrating)
// has not failed; err otherwise.
func Stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}
