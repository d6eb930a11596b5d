package service_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/platform/natsconn"
	"github.com/flotilla-dev/flotilla/platform/service"
)

// TestOpenWaitsForNATSAndPostgres: a hub service started before its NATS server and its
// database are up says what it waits for, and opens once they are: its database migrated,
// every connection with the statement timeout.
func TestOpenWaitsForNATSAndPostgres(t *testing.T) {
	pg := postgres.StartT(t)
	dbURL, err := pg.EnsureDatabase(t.Context(), "flotilla")
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.Halt(); err != nil {
		t.Fatal(err)
	}
	natsPort, natsDir := freePort(t), t.TempDir()
	logs := &logRecorder{}
	opts := service.Options{
		NATS:             natsconn.Settings{URL: "nats://127.0.0.1:" + strconv.Itoa(natsPort)},
		DatabaseURL:      dbURL,
		StatementTimeout: 1500 * time.Millisecond,
		Logger:           logs.logger(t),
	}
	type opened struct {
		env *service.Env
		err error
	}
	done := make(chan opened, 1)
	go func() {
		env, err := service.Open(t.Context(), "widgets", opts)
		done <- opened{env, err}
	}()

	poll.Until(t, time.Minute, "Open waiting for NATS", logs.saw("waiting: NATS at nats://127.0.0.1:"))
	srv, err := natsserver.Start(natsserver.Options{Port: natsPort, StoreDir: natsDir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	poll.Until(t, time.Minute, "Open waiting for PostgreSQL", logs.saw("waiting: PostgreSQL at 127.0.0.1:"))
	if err := pg.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	var o opened
	select {
	case o = <-done:
	case <-time.After(time.Minute):
		t.Fatal("Open still waiting a minute after NATS and PostgreSQL came up")
	}
	if o.err != nil {
		t.Fatalf("Open: %v", o.err)
	}
	defer o.env.Close()
	var timeout string
	if err := o.env.Pool.QueryRow(t.Context(), "select current_setting('statement_timeout')").Scan(&timeout); err != nil {
		t.Fatal(err)
	}
	if timeout != "1500ms" {
		t.Errorf("statement_timeout = %s, want 1500ms", timeout)
	}
	var version int
	if err := o.env.Pool.QueryRow(t.Context(), "select version from flotilla_schema_version").Scan(&version); err != nil || version == 0 {
		t.Errorf("schema version %d, %v: not migrated", version, err)
	}
	if err := o.env.Ready(t.Context()); err != nil {
		t.Errorf("not ready once open: %v", err)
	}
}

// TestOpenDoesNotWaitForAMissingDatabase: a server that answers and refuses is a mistake to
// report, not an outage to wait out.
func TestOpenDoesNotWaitForAMissingDatabase(t *testing.T) {
	pg := postgres.StartT(t)
	srv, _ := natsserver.StartT(t)
	url := pg.DatabaseURL("no_such_database")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := service.Open(ctx, "widgets", service.Options{NATS: natsconn.Settings{URL: srv.URL()}, DatabaseURL: url})
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "no_such_database") {
		t.Errorf("Open = %v, want the missing database reported at once", err)
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

// logRecorder keeps the messages logged through its logger, which also logs to the test.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecorder) logger(t testing.TB) *slog.Logger {
	h := slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(&recordingHandler{Handler: h, rec: l})
}

func (l *logRecorder) saw(prefix string) func() error {
	return func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, m := range l.msgs {
			if strings.HasPrefix(m, prefix) {
				return nil
			}
		}
		return errors.New("no log line " + prefix)
	}
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
