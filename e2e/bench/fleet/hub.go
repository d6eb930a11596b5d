package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/platform/natsconn"
	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/rollout"
	"github.com/flotilla-dev/flotilla/services/scheduler"
	"github.com/flotilla-dev/flotilla/services/status"
)

// hub is the standalone's hub without its members: the embedded NATS server with the
// topology, a local PostgreSQL kept in the data dir (with PostgreSQL's default durability,
// as the standalone's), and the scheduler, rollout and status services in this process,
// wired as services/standalone wires them. The standalone itself insists on at least one
// member it runs a real worker for (--local-members or --kubeconfig-dir), which a fleet of
// simulated members has none of.
type hub struct {
	nats   *natsserver.Server
	pg     *postgres.Server
	dbURL  string
	cancel context.CancelFunc
	exited chan struct{} // closed when the hub services have returned
	err    error         // what they returned

	stopOnce sync.Once
	stopErr  error
}

// startHub starts NATS and, with services, PostgreSQL and the hub services; stop ends them.
// maxConsumers, when positive, is the NATS server's default_max_consumers.
func startHub(ctx context.Context, dataDir string, services bool, maxConsumers int, log *slog.Logger, progress io.Writer) (*hub, error) {
	h := &hub{}
	srv, err := startNATS(filepath.Join(dataDir, "nats"), maxConsumers)
	if err != nil {
		return nil, err
	}
	h.nats = srv
	nc, err := srv.Connect(nats.Name("fleet-bench-topology"))
	if err != nil {
		h.stop()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err == nil {
		err = bus.EnsureTopology(ctx, js, bus.TopologyOptions{})
	}
	nc.Close()
	if err != nil {
		h.stop()
		return nil, fmt.Errorf("declare the JetStream topology: %w", err)
	}
	fmt.Fprintf(progress, "NATS with JetStream at %s\n", srv.URL())
	if !services {
		return h, nil
	}

	if h.pg, err = postgres.Start(ctx, postgres.Options{DataDir: filepath.Join(dataDir, "postgres"), Log: io.Discard}); err != nil {
		h.stop()
		return nil, err
	}
	if h.dbURL, err = h.pg.EnsureDatabase(ctx, "flotilla"); err != nil {
		h.stop()
		return nil, err
	}
	fmt.Fprintf(progress, "PostgreSQL %s on port %d\n", h.pg.Version(), h.pg.Port())

	opts := service.Options{
		NATS:        natsconn.Settings{URL: srv.URL()},
		NATSOptions: []nats.Option{nats.InProcessServer(srv.Server)},
		DatabaseURL: h.dbURL,
		Logger:      log,
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	h.cancel = cancel
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error { return scheduler.Run(gctx, scheduler.Config{Options: opts}) })
	g.Go(func() error { return rollout.Run(gctx, rollout.Config{Options: opts}) })
	g.Go(func() error { return status.Run(gctx, status.Config{Options: opts}) })
	h.exited = make(chan struct{})
	go func() {
		h.err = g.Wait()
		close(h.exited)
	}()
	fmt.Fprintln(progress, "scheduler, rollout and status services started")
	return h, nil
}

// startNATS starts the embedded server as harness/natsserver does (the standalone's), with
// one knob more: JetStream's default bound on the consumers of a stream. nats-server applies
// it (1,000 unless configured) to every stream that does not set MaxConsumers, the WORK
// stream among them, so without it no more than 1,000 apply workers can have a consumer.
func startNATS(storeDir string, maxConsumers int) (*natsserver.Server, error) {
	o := &server.Options{
		ServerName: "flotilla-fleet", Host: "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: storeDir, NoSigs: true, NoLog: true,
	}
	o.JetStreamLimits.DefaultMaxConsumers = maxConsumers
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("start nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("start nats: server not ready after 10s")
	}
	return &natsserver.Server{Server: s}, nil
}

// exitedEarly is closed when the hub services stop; nil without services.
func (h *hub) exitedEarly() <-chan struct{} { return h.exited }

// stop ends the services, PostgreSQL and NATS, once.
func (h *hub) stop() error {
	h.stopOnce.Do(func() {
		var errs []error
		if h.cancel != nil {
			h.cancel()
			<-h.exited
			if h.err != nil {
				errs = append(errs, fmt.Errorf("hub services: %w", h.err))
			}
		}
		if h.pg != nil {
			if err := h.pg.Stop(); err != nil {
				errs = append(errs, fmt.Errorf("PostgreSQL: %w", err))
			}
		}
		if h.nats != nil {
			h.nats.Stop()
		}
		h.stopErr = errors.Join(errs...)
	})
	return h.stopErr
}
