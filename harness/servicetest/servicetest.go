// Package servicetest is what a hub service's integration tests share: an
// embedded NATS server with Flotilla's JetStream topology, a fresh migrated
// PostgreSQL database, a way to run the service until the test ends, and
// collectors of the events it publishes.
//
// Test packages using it need the PostgreSQL harness's TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }
package servicetest

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/platform/natsconn"
	"github.com/flotilla-dev/flotilla/platform/service"
)

// Env is a test's bus and database.
type Env struct {
	t testing.TB
	// NATSURL and DatabaseURL are what the service under test connects to.
	NATSURL     string
	DatabaseURL string
	NC          *nats.Conn
	JS          jetstream.JetStream
	Publisher   *bus.Publisher
	// Pool is the test's own connection to the database, for assertions.
	Pool *pgxpool.Pool
}

// New starts the bus with the topology declared and creates a database; both
// go away when the test ends.
func New(t testing.TB) *Env {
	t.Helper()
	srv, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	db := postgres.NewTestDB(t)
	pool, err := pgxpool.New(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &Env{t: t, NATSURL: srv.URL(), DatabaseURL: db, NC: nc, JS: js, Publisher: bus.NewPublisher(js), Pool: pool}
}

// Options are the shared service options that connect a hub service to the test's bus
// and database, logging to the test's output.
func (e *Env) Options() service.Options {
	return service.Options{NATS: natsconn.Settings{URL: e.NATSURL}, DatabaseURL: e.DatabaseURL, Logger: e.Logger()}
}

// Logger logs to the test's output.
func (e *Env) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(e.t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Publish publishes an event of typ with a random id, as a user or another
// service would.
func (e *Env) Publish(typ, subject string, payload any) {
	e.t.Helper()
	ev, err := events.New(typ, "/flotilla/test", "", "", payload)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.Publisher.Publish(e.t.Context(), subject, ev); err != nil {
		e.t.Fatal(err)
	}
}

// Run runs a service (a replica, if called again) until the returned stop
// is called or the test ends; an error it returns fails the test.
func (e *Env) Run(name string, run func(ctx context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("%s: %v", name, err)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// Collected gathers the payloads of type T published on some subjects, from
// the start of the stream.
type Collected[T any] struct {
	mu    sync.Mutex
	items []T
}

// Collect starts collecting the T payloads published on subjects (patterns
// like bus.SubjectsScheduling) until the test ends.
func Collect[T any](e *Env, subjects ...string) *Collected[T] {
	e.t.Helper()
	c := &Collected[T]{}
	cons, err := e.JS.OrderedConsumer(e.t.Context(), bus.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: subjects})
	if err != nil {
		e.t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev, err := bus.DecodeJetStream(m)
		if err != nil {
			e.t.Errorf("decode %s: %v", m.Subject(), err)
			return
		}
		p, err := events.DecodeAs[T](ev)
		if err != nil {
			e.t.Errorf("decode %s: %v", m.Subject(), err)
			return
		}
		c.mu.Lock()
		c.items = append(c.items, *p)
		c.mu.Unlock()
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cc.Stop)
	return c
}

// All returns what was collected so far, oldest first.
func (c *Collected[T]) All() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]T(nil), c.items...)
}
