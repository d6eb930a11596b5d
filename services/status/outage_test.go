package status_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/platform/natsconn"
	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/status"
)

// outageBudget is the consumers' retry budget in these tests: two deliveries, 10ms to 50ms
// apart. Before outages paused consumers, an event in flight was dead-lettered after it.
var outageBudget = struct {
	maxDeliver          int
	retryBase, retryMax time.Duration
}{2, 10 * time.Millisecond, 50 * time.Millisecond}

// outageRig is a status service on a PostgreSQL server and a NATS server of its own, which
// the test takes away and brings back.
type outageRig struct {
	t        *testing.T
	pg       *postgres.Server
	dbURL    string
	natsPort int
	natsDir  string
	nats     *natsserver.Server
	nc       *nats.Conn
	js       jetstream.JetStream
	health   string
	pool     *pgxpool.Pool // the test's own connection, opened once the database is up
}

func newOutageRig(t *testing.T) *outageRig {
	t.Helper()
	pg := postgres.StartT(t)
	dbURL, err := pg.EnsureDatabase(t.Context(), "flotilla")
	if err != nil {
		t.Fatal(err)
	}
	return &outageRig{t: t, pg: pg, dbURL: dbURL, natsPort: freePort(t), natsDir: t.TempDir(),
		health: "127.0.0.1:" + strconv.Itoa(freePort(t))}
}

// startNATS starts the rig's NATS server and connects the test to it.
func (r *outageRig) startNATS() {
	r.t.Helper()
	srv, err := natsserver.Start(natsserver.Options{Port: r.natsPort, StoreDir: r.natsDir})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(srv.Stop)
	r.nats = srv
	if r.nc == nil {
		nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			r.t.Fatal(err)
		}
		r.t.Cleanup(nc.Close)
		if r.js, err = jetstream.New(nc); err != nil {
			r.t.Fatal(err)
		}
		r.nc = nc
	}
}

// runStatus runs the status service with the small retry budget until the test ends.
func (r *outageRig) runStatus() {
	r.t.Helper()
	opts := service.Options{
		NATS:             natsconn.Settings{URL: "nats://127.0.0.1:" + strconv.Itoa(r.natsPort)},
		DatabaseURL:      r.dbURL,
		HealthAddr:       r.health,
		Topology:         bus.TopologyOptions{MaxDeliver: outageBudget.maxDeliver},
		RetryBase:        outageBudget.retryBase,
		RetryMax:         outageBudget.retryMax,
		HandlerTimeout:   time.Second,
		StatementTimeout: 500 * time.Millisecond,
		Logger:           slog.New(slog.NewTextHandler(r.t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- status.Run(ctx, status.Config{Options: opts}) }()
	r.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			r.t.Errorf("status: %v", err)
		}
	})
}

// ready is the service's /readyz answer: nil when ready.
func (r *outageRig) ready() error {
	resp, err := http.Get("http://" + r.health + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

func (r *outageRig) connectDB() {
	r.t.Helper()
	pool, err := pgxpool.New(r.t.Context(), r.dbURL)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(pool.Close)
	r.pool = pool
}

func (r *outageRig) publish(id string) {
	r.t.Helper()
	ev, err := events.New(events.TypePlacementDeleted, "/flotilla/test", "", id, events.PlacementDeleted{Name: "web"})
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := bus.NewPublisher(r.js).Publish(r.t.Context(), "flotilla.placement.web", ev); err != nil {
		r.t.Fatal(err)
	}
}

// audited waits until the event is in the audit log, and checks it is there once.
func (r *outageRig) audited(id string) {
	r.t.Helper()
	poll.Until(r.t, time.Minute, "event "+id+" in the audit log", func() error {
		var n int
		if err := r.pool.QueryRow(r.t.Context(), `select count(*) from audit_log where event_id = $1`, id).Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%d audit rows", n)
		}
		return nil
	})
}

// nothingDeadLettered checks the dead-letter stream is empty and the consumer settled.
func (r *outageRig) nothingDeadLettered() {
	r.t.Helper()
	dls, _, err := bus.ListDeadLetters(r.t.Context(), r.js, bus.DeadLetterQuery{})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, dl := range dls {
		r.t.Errorf("dead-lettered: %s %s by %s: %s", dl.EventType, dl.EventID, dl.Consumer, dl.Reason)
	}
	poll.Until(r.t, time.Minute, "the status consumer settled", func() error {
		c, err := r.js.Consumer(r.t.Context(), bus.StreamEvents, bus.ConsumerStatus)
		if err != nil {
			return err
		}
		info, err := c.Info(r.t.Context())
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("%d pending, %d awaiting ack", info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

// TestPostgresOutageLongerThanTheRetryBudget: PostgreSQL goes away (shut down, or frozen as
// by SIGSTOP) while the status service has an event in hand, for far longer than its retry
// budget. The service pauses and says so on /readyz; when the database is back the event is
// recorded once and nothing is dead-lettered.
func TestPostgresOutageLongerThanTheRetryBudget(t *testing.T) {
	for _, fault := range []struct {
		name        string
		inject, end func(*postgres.Server) error
	}{
		{"stopped", (*postgres.Server).Halt, func(s *postgres.Server) error { return s.Resume(context.Background()) }},
		{"frozen", (*postgres.Server).Freeze, (*postgres.Server).Thaw},
	} {
		t.Run(fault.name, func(t *testing.T) {
			r := newOutageRig(t)
			r.startNATS()
			r.runStatus()
			poll.Until(t, time.Minute, "the service ready", r.ready)
			r.connectDB()
			r.publish("before")
			r.audited("before")

			if err := fault.inject(r.pg); err != nil {
				t.Fatal(err)
			}
			r.publish("during")
			poll.Until(t, time.Minute, "the consumer paused", func() error {
				err := r.ready()
				if err == nil || !strings.Contains(err.Error(), "consumer status: paused") {
					return fmt.Errorf("readiness: %v", err)
				}
				return nil
			})
			// The outage lasts many times the retry budget (about 60ms).
			time.Sleep(3 * time.Second)
			if err := fault.end(r.pg); err != nil {
				t.Fatal(err)
			}

			r.audited("during")
			poll.Until(t, time.Minute, "the service ready again", r.ready)
			r.nothingDeadLettered()
		})
	}
}

// TestStatusStartedBeforeNATSAndPostgresWaitsThenServes: the service is started while
// neither NATS nor PostgreSQL is up; it waits for both, then records events and answers.
func TestStatusStartedBeforeNATSAndPostgresWaitsThenServes(t *testing.T) {
	r := newOutageRig(t)
	if err := r.pg.Halt(); err != nil {
		t.Fatal(err)
	}
	r.runStatus()
	// Let it try both for a while: it must wait, not exit (an error from Run fails the test).
	time.Sleep(time.Second)
	r.startNATS()
	if err := r.pg.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, time.Minute, "the service ready", r.ready)
	r.connectDB()
	r.publish("first")
	r.audited("first")
	if _, err := r.nc.Request("$SRV.PING."+events.QueryService, nil, 10*time.Second); err != nil {
		t.Errorf("query service: %v", err)
	}
	r.nothingDeadLettered()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
