package bus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// sqlError stands for a PostgreSQL driver's error, which the bus knows by its method.
type sqlError struct{ code string }

func (e *sqlError) Error() string    { return "ERROR (SQLSTATE " + e.code + ")" }
func (e *sqlError) SQLState() string { return e.code }

func TestIsOutageTellsDependenciesFromEvents(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", fmt.Errorf("connect to PostgreSQL: %w", refused), true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"handler timeout", fmt.Errorf("insert: %w", context.DeadlineExceeded), true},
		{"connection dropped mid-reply", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), true},
		{"NATS down", fmt.Errorf("publish: %w", nats.ErrConnectionReconnecting), true},
		{"no JetStream yet", fmt.Errorf("lookup: %w", nats.ErrNoResponders), true},
		{"serialization failure", &sqlError{"40001"}, true},
		{"deadlock", &sqlError{"40P01"}, true},
		{"statement timeout", fmt.Errorf("update: %w", &sqlError{"57014"}), true},
		{"server shutting down", &sqlError{"57P01"}, true},
		{"connection failure", &sqlError{"08006"}, true},
		{"too many connections", &sqlError{"53300"}, true},
		{"marked unavailable", bus.Unavailable(errors.New("member API server down")), true},
		{"unique violation", &sqlError{"23505"}, false},
		{"wrong password", &sqlError{"28P01"}, false},
		{"bad payload", errors.New("placement has no name"), false},
		{"cancelled at shutdown", context.Canceled, false},
		{"permanent timeout", bus.Permanent(context.DeadlineExceeded), false},
		{"nil", nil, false},
	} {
		if got := bus.IsOutage(c.err); got != c.want {
			t.Errorf("%s: IsOutage(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestAwaitRetriesOutagesAndReturnsOtherErrors(t *testing.T) {
	calls := 0
	err := bus.Await(t.Context(), testLogger(t), "the database", func(context.Context) error {
		if calls++; calls < 3 {
			return syscall.ECONNREFUSED
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("Await = %v after %d calls, want nil after 3", err, calls)
	}
	bad := &sqlError{"28P01"}
	calls = 0
	err = bus.Await(t.Context(), testLogger(t), "the database", func(context.Context) error { calls++; return bad })
	if !errors.Is(err, bad) || calls != 1 {
		t.Errorf("Await = %v after %d calls, want the password error at once", err, calls)
	}
}

// dependency is a database stand-in a test takes down and brings back.
type dependency struct {
	down   atomic.Bool
	probes atomic.Int64
	mu     sync.Mutex
	pauses []error // what the pause hook was told, in order
}

func (d *dependency) probe(context.Context) error {
	d.probes.Add(1)
	if d.down.Load() {
		return errors.New("database: connection refused")
	}
	return nil
}

func (d *dependency) hook(reason error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pauses = append(d.pauses, reason)
}

func (d *dependency) paused() (paused bool, times int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.pauses {
		if r != nil {
			times++
		}
	}
	return len(d.pauses) > 0 && d.pauses[len(d.pauses)-1] != nil, times
}

// TestOutagePausesWithoutUsingUpDeliveries: the database goes away under a consumer allowed
// two deliveries. The consumer pauses, holds the events it has, and resumes when the
// database is back: every event is handled once, on its first delivery, and nothing is
// dead-lettered, however long the outage lasted.
func TestOutagePausesWithoutUsingUpDeliveries(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{MaxDeliver: 2, AckWait: time.Second})
	var db dependency
	db.down.Store(true)
	p := bus.NewPublisher(js)
	for i := range 5 {
		if _, err := p.Publish(t.Context(), "flotilla.placement.p", newEvent(t, fmt.Sprint("ev-", i), knownType)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	handled := map[string][]uint64{} // event id -> NumDelivered of each successful call
	attempts := 0
	h := func(_ context.Context, ev event.Event, m bus.Meta) error {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if db.down.Load() {
			return fmt.Errorf("insert inbox row: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED})
		}
		handled[ev.ID()] = append(handled[ev.ID()], m.NumDelivered)
		return nil
	}
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerScheduler, h,
		bus.WithRetryDelay(10*time.Millisecond, 100*time.Millisecond), bus.WithProbe(db.probe), bus.WithPauseHook(db.hook))

	poll.Until(t, patience, "the consumer paused", func() error {
		if paused, _ := db.paused(); !paused {
			return errors.New("not paused")
		}
		return nil
	})
	// Outlast the old budget (two deliveries) and several AckWaits: the probe runs every
	// 100ms at most, so 40 probes take four seconds or more.
	poll.Until(t, patience, "the outage lasting", func() error {
		if n := db.probes.Load(); n < 40 {
			return fmt.Errorf("%d probes", n)
		}
		return nil
	})
	mu.Lock()
	if attempts != 1 {
		t.Errorf("the handler was called %d times during the outage, want once (the consumer pauses)", attempts)
	}
	mu.Unlock()
	db.down.Store(false)

	poll.Until(t, patience, "every event handled and the consumer settled", func() error {
		mu.Lock()
		n := len(handled)
		mu.Unlock()
		if n != 5 {
			return fmt.Errorf("%d of 5 events handled", n)
		}
		return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerScheduler)
	})
	mu.Lock()
	for id, deliveries := range handled {
		if len(deliveries) != 1 || deliveries[0] != 1 {
			t.Errorf("event %s handled on deliveries %v, want once on the first", id, deliveries)
		}
	}
	mu.Unlock()
	if dls := deadLetters(t, js); len(dls) != 0 {
		t.Errorf("%d events dead-lettered during an outage: %s", len(dls), dls[0].Header.Get(bus.HeaderDeadLetterReason))
	}
	if paused, times := db.paused(); paused || times != 1 {
		t.Errorf("pause hook: paused at the end %v, pauses %d; want one pause, resumed", paused, times)
	}
}

// TestSlowEventIsDeadLetteredWhileItsDependencyAnswers: a handler that always runs out of
// time while the database answers is the event's problem: after a few tries in place each
// delivery counts, and the event is dead-lettered when they run out; the next is handled.
func TestSlowEventIsDeadLetteredWhileItsDependencyAnswers(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{MaxDeliver: 2})
	var db dependency
	p := bus.NewPublisher(js)
	for _, id := range []string{"slow", "quick"} {
		if _, err := p.Publish(t.Context(), "flotilla.placement.p", newEvent(t, id, knownType)); err != nil {
			t.Fatal(err)
		}
	}
	var r recorder
	r.fail = func(ev event.Event, _ bus.Meta) error {
		if ev.ID() == "slow" {
			return fmt.Errorf("fold: %w", context.DeadlineExceeded)
		}
		return nil
	}
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerScheduler, r.handle,
		bus.WithRetryDelay(5*time.Millisecond, 20*time.Millisecond), bus.WithProbe(db.probe), bus.WithHandlerTimeout(time.Second))
	poll.Until(t, patience, "the slow event dead-lettered", func() error {
		if n := len(deadLetters(t, js)); n != 1 {
			return fmt.Errorf("%d dead letters", n)
		}
		return r.seen("quick")
	})
	dl := deadLetters(t, js)[0]
	if dl.Header.Get("ce-id") != "slow" || !strings.Contains(dl.Header.Get(bus.HeaderDeadLetterReason), "deadline exceeded") {
		t.Errorf("dead letter: %v", dl.Header)
	}
}

// TestHandlerTimeoutEndsAHangingHandler: a handler stuck on a frozen dependency gets its
// context cancelled after the timeout; the retry that follows succeeds.
func TestHandlerTimeoutEndsAHangingHandler(t *testing.T) {
	_, js := startBus(t, bus.TopologyOptions{MaxDeliver: 1})
	if _, err := bus.NewPublisher(js).Publish(t.Context(), "flotilla.placement.p", newEvent(t, "hang", knownType)); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	var done atomic.Bool
	h := func(ctx context.Context, _ event.Event, _ bus.Meta) error {
		if calls.Add(1) == 1 {
			<-ctx.Done() // a statement on a frozen database
			return fmt.Errorf("insert: %w", ctx.Err())
		}
		done.Store(true)
		return nil
	}
	consumeInBackground(t, js, bus.StreamEvents, bus.ConsumerScheduler, h,
		bus.WithRetryDelay(5*time.Millisecond, 20*time.Millisecond), bus.WithHandlerTimeout(100*time.Millisecond))
	poll.Until(t, patience, "the event handled", func() error {
		if !done.Load() {
			return errors.New("not yet")
		}
		return settled(t.Context(), js, bus.StreamEvents, bus.ConsumerScheduler)
	})
	if dls := deadLetters(t, js); len(dls) != 0 {
		t.Errorf("dead-lettered on its only delivery after a timeout: %s", dls[0].Header.Get(bus.HeaderDeadLetterReason))
	}
}

// TestConsumeWaitsForNATS: a consumer started while its NATS server is down waits (its
// first lookup times out) and consumes once the server is back.
func TestConsumeWaitsForNATS(t *testing.T) {
	port, store := freePort(t), t.TempDir()
	srv := startNATSAt(t, port, store)
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureTopology(t.Context(), js, bus.TopologyOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()

	logs := &logRecorder{}
	var r recorder
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- bus.Consume(ctx, js, bus.StreamEvents, bus.ConsumerScheduler, r.handle, bus.WithLogger(logs.logger(t)), bus.WithValidator(admitAll))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume: %v", err)
		}
	})
	poll.Until(t, patience, "Consume waiting for NATS", func() error {
		if !logs.has("waiting: NATS JetStream to find consumer scheduler") {
			return errors.New("no waiting log line yet")
		}
		return nil
	})
	startNATSAt(t, port, store) // stopped by its cleanup
	if _, err := bus.NewPublisher(js).Publish(t.Context(), "flotilla.placement.p", newEvent(t, "after", knownType)); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, patience, "the event handled", func() error { return r.seen("after") })
	select {
	case err := <-done:
		t.Fatalf("Consume gave up: %v", err)
	default:
	}
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

func startNATSAt(t *testing.T, port int, store string) *natsserver.Server {
	t.Helper()
	srv, err := natsserver.Start(natsserver.Options{Port: port, StoreDir: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}
