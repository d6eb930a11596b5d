// Package service is the skeleton every Flotilla service runs on: the Options each
// service's Config embeds (one flag set, validated once), Main for its command, Open for
// a NATS connection with the JetStream topology in place and a migrated PostgreSQL pool,
// and Run, which starts the service's loops, the outbox relay and the health endpoint
// together and stops them together.
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
	"github.com/flotilla-dev/flotilla/platform/natsconn"
	"github.com/flotilla-dev/flotilla/platform/outbox"
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
	opts      Options
}

// Open connects the service called name to NATS and, for a hub service, declares the
// JetStream topology and connects to PostgreSQL and migrates it. Errors say what to do
// about an unreachable server and never show a password.
func Open(ctx context.Context, name string, opts Options) (*Env, error) {
	if name == "" {
		return nil, errors.New("open service: a name is required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("service", name)
	natsOpts := append([]nats.Option{
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from NATS; reconnecting", "error", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted()) }),
	}, opts.NATSOptions...)
	nc, err := opts.NATS.Connect("flotilla-"+name, natsOpts...)
	if err != nil {
		return nil, fmt.Errorf("%w (is the server running? set --nats or %s)", err, natsconn.EnvURL)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("open JetStream: %w", err)
	}
	env := &Env{
		Name: name, Source: "/flotilla/" + name,
		NC: nc, JS: js, Publisher: bus.NewPublisher(js), Log: log, opts: opts,
	}
	if opts.Role == Member {
		return env, nil
	}
	if err := bus.EnsureTopology(ctx, js, opts.Topology); err != nil {
		nc.Close()
		return nil, fmt.Errorf("declare JetStream topology (is JetStream enabled on %s?): %w", opts.NATS.Redacted(), err)
	}
	if opts.DatabaseURL == "" {
		nc.Close()
		return nil, fmt.Errorf("%s: a database URL is required (--database-url or %s)", name, EnvDatabaseURL)
	}
	pool, err := pgxpool.New(ctx, opts.DatabaseURL)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		nc.Close()
		if pool != nil {
			pool.Close()
		}
		return nil, fmt.Errorf("connect to PostgreSQL: %w (check --database-url or %s)", err, EnvDatabaseURL)
	}
	if err := migrations.MigratePool(ctx, pool); err != nil {
		nc.Close()
		pool.Close()
		return nil, err
	}
	env.Pool = pool
	// The outbox quarantines what the server would refuse, or what is over
	// the configured limit if that is smaller.
	limit := nc.MaxPayload()
	if opts.OutboxMaxBytes > 0 && opts.OutboxMaxBytes < limit {
		limit = opts.OutboxMaxBytes
	}
	outbox.SetMaxBytes(limit)
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
		relay := &outbox.Relay{Pool: e.Pool, JS: e.JS, Logger: e.Log, Source: e.Source}
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
	return migrations.MigratePool(ctx, pool)
}
