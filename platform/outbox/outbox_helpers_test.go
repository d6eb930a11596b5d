package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/platform/outbox"
)

// patience bounds every wait of these tests; it is for a broken setup, not speed.
const patience = 30 * time.Second

func placementOf(s int) string { return fmt.Sprintf("p-%02d", s) }

func subjectOf(s int) string {
	subj, err := events.SchedulingSubject(placementOf(s))
	if err != nil {
		panic(err)
	}
	return subj
}

// scheduled is the n-th decision for placement: its generation is n, so the
// order in which a subject's events arrive can be read back.
func scheduled(t testing.TB, placement string, n int) cloudevents.Event {
	t.Helper()
	ev, err := events.New(events.TypePlacementScheduled, "/flotilla/test", placement,
		events.ID("order", placement, fmt.Sprint(n)),
		events.PlacementScheduled{Placement: placement, Generation: int64(n), Fulfilled: true})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// sequences are the generations read back from the stream per placement,
// in stream order.
type sequences struct {
	mu  sync.Mutex
	seq map[string][]int64
	n   int
}

// collectSequences reads every scheduling decision from the start of the
// events stream with an ordered consumer.
func collectSequences(t *testing.T, env *servicetest.Env) *sequences {
	t.Helper()
	s := &sequences{seq: map[string][]int64{}}
	cons, err := env.JS.OrderedConsumer(t.Context(), bus.StreamEvents,
		jetstream.OrderedConsumerConfig{FilterSubjects: []string{bus.SubjectsScheduling}})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev, err := bus.DecodeJetStream(m)
		if err != nil {
			t.Errorf("decode %s: %v", m.Subject(), err)
			return
		}
		p, err := events.DecodeAs[events.PlacementScheduled](ev)
		if err != nil {
			t.Errorf("decode %s: %v", m.Subject(), err)
			return
		}
		s.mu.Lock()
		s.seq[p.Placement] = append(s.seq[p.Placement], p.Generation)
		s.n++
		s.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return s
}

func (s *sequences) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// check fails t unless each of subjects placements got exactly 1..perSubject
// in that order.
func (s *sequences) check(t *testing.T, subjects, perSubject int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	bad := 0
	for i := range subjects {
		p := placementOf(i)
		got := s.seq[p]
		ok := len(got) == perSubject
		for j := 0; ok && j < perSubject; j++ {
			ok = got[j] == int64(j+1)
		}
		if !ok {
			bad++
			if bad <= 3 {
				t.Errorf("%s arrived as %v, want 1..%d in order", p, got, perSubject)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d subjects out of order, doubled or short", bad, subjects)
	}
}

// waitDrained waits until no outbox row waits to be published.
func waitDrained(t *testing.T, env *servicetest.Env) {
	t.Helper()
	poll.Until(t, patience, "outbox drained", func() error {
		var pending int
		if err := env.Pool.QueryRow(t.Context(), `select count(*) from outbox where published_at is null and quarantined_at is null`).Scan(&pending); err != nil {
			return err
		}
		if pending != 0 {
			return fmt.Errorf("%d outbox rows unpublished", pending)
		}
		return nil
	})
}

// streamMsgs is how many messages stream holds.
func streamMsgs(t *testing.T, env *servicetest.Env, stream string) uint64 {
	t.Helper()
	st, err := env.JS.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// logs is a relay's log, kept for assertions and shown in the test's output.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
	out io.Writer
}

func newLogs(t *testing.T) (*logs, *slog.Logger) {
	l := &logs{out: t.Output()}
	return l, slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	return l.out.Write(p)
}

// count is how many lines of the log contain s.
func (l *logs) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for line := range strings.Lines(l.buf.String()) {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// runRelay runs relay until the test ends.
func runRelay(t *testing.T, relay *outbox.Relay) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- relay.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("relay: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// enqueue commits evs, each on its subject, in one transaction.
func enqueue(t *testing.T, env *servicetest.Env, subjectsAndEvents ...any) {
	t.Helper()
	err := pgx.BeginFunc(t.Context(), env.Pool, func(tx pgx.Tx) error {
		for i := 0; i < len(subjectsAndEvents); i += 2 {
			if err := outbox.Enqueue(t.Context(), tx, subjectsAndEvents[i].(string), subjectsAndEvents[i+1].(cloudevents.Event)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// setMaxBytes sets the enqueue limit for the test.
func setMaxBytes(t *testing.T, n int64) {
	outbox.SetMaxBytes(n)
	t.Cleanup(func() { outbox.SetMaxBytes(0) })
}

// lastOn reads the last message on subject of stream, decoded, or nil.
func lastOn(t *testing.T, env *servicetest.Env, stream, subject string) *cloudevents.Event {
	t.Helper()
	st, err := env.JS.Stream(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := st.GetLastMsgForSubject(t.Context(), subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	ev, err := bus.Decode(&nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data})
	if err != nil {
		t.Fatal(err)
	}
	return &ev
}

// quarantined is a row of outbox_quarantine.
type quarantined struct {
	EventID, Type, Subject, Reason string
	Size                           int64
	Attempts                       int
	FirstFailedAt, LastFailedAt    time.Time
	QuarantinedAt                  time.Time
}

// quarantinedRow reads eventID's row of outbox_quarantine, or nil.
func quarantinedRow(t *testing.T, env *servicetest.Env, eventID string) *quarantined {
	t.Helper()
	rows, err := env.Pool.Query(t.Context(), `
		select event_id, type, subject, reason, size, attempts, first_failed_at, last_failed_at, quarantined_at
		from outbox_quarantine where event_id = $1`, eventID)
	if err != nil {
		t.Fatal(err)
	}
	q, err := pgx.CollectRows(rows, pgx.RowToStructByPos[quarantined])
	if err != nil {
		t.Fatal(err)
	}
	if len(q) == 0 {
		return nil
	}
	return &q[0]
}

// notices collects the quarantine notices on the bus.
func notices(t *testing.T, env *servicetest.Env) *servicetest.Collected[events.OutboxQuarantined] {
	return servicetest.Collect[events.OutboxQuarantined](env, bus.SubjectsOutbox)
}

// noticeOf is the notice about eventID among ns, or nil.
func noticeOf(ns []events.OutboxQuarantined, eventID string) *events.OutboxQuarantined {
	for _, n := range ns {
		if n.EventID == eventID {
			return &n
		}
	}
	return nil
}
