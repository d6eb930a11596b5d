package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
)

// patience bounds every wait for the bus in these tests.
const patience = 15 * time.Second

// startBus starts an embedded server with the topology in place.
func startBus(t testing.TB, opts bus.TopologyOptions) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	_, nc := natsserver.StartT(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureTopology(t.Context(), js, opts); err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// consumeInBackground runs bus.Consume until the test ends and checks that it
// then returns nil.
func consumeInBackground(t *testing.T, js jetstream.JetStream, stream, consumer string, h bus.Handler, opts ...bus.Option) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts = append([]bus.Option{bus.WithLogger(testLogger(t)), bus.WithValidator(admitAll)}, opts...)
	go func() { done <- bus.Consume(ctx, js, stream, consumer, h, opts...) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Consume returned %v after its context ended, want nil", err)
		}
	})
}

// admitAll is the validator of tests about the consume loop itself; services check
// every event against its subject (events.Admit).
func admitAll(string, event.Event) error { return nil }

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// newEvent returns a valid event with JSON data.
func newEvent(t testing.TB, id, typ string) event.Event {
	t.Helper()
	ev := event.New()
	ev.SetID(id)
	ev.SetSource("/flotilla/test")
	ev.SetType(typ)
	if err := ev.SetData(event.ApplicationJSON, map[string]string{"name": id}); err != nil {
		t.Fatal(err)
	}
	return ev
}

// deadLetters returns the messages in the dead-letter stream.
func deadLetters(t testing.TB, js jetstream.JetStream) []*jetstream.RawStreamMsg {
	t.Helper()
	s, err := js.Stream(t.Context(), bus.StreamDeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// settled reports nil once the consumer has no message pending or awaiting
// an ack: everything was acked or terminated.
func settled(ctx context.Context, js jetstream.JetStream, stream, consumer string) error {
	c, err := js.Consumer(ctx, stream, consumer)
	if err != nil {
		return err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	if info.NumPending != 0 || info.NumAckPending != 0 {
		return fmt.Errorf("consumer %s: %d pending, %d awaiting ack", consumer, info.NumPending, info.NumAckPending)
	}
	return nil
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// logRecorder keeps the messages logged through its logger, which also logs to the test.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) logger(t testing.TB) *slog.Logger {
	return slog.New(&recordingHandler{Handler: testLogger(t).Handler(), rec: l})
}

func (l *logRecorder) has(prefix string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.msgs {
		if strings.HasPrefix(m, prefix) {
			return true
		}
	}
	return false
}

type recordingHandler struct {
	slog.Handler
	rec *logRecorder
}

func (h *recordingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.rec.mu.Lock()
	h.rec.msgs = append(h.rec.msgs, r.Message)
	h.rec.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h *recordingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordingHandler{Handler: h.Handler.WithAttrs(attrs), rec: h.rec}
}

func (h *recordingHandler) WithGroup(name string) slog.Handler {
	return &recordingHandler{Handler: h.Handler.WithGroup(name), rec: h.rec}
}
