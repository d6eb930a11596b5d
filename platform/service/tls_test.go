package service_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/harness/certs"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/platform/natsconn"
	"github.com/flotilla-dev/flotilla/platform/service"
)

// A hub service reaches NATS over mutual TLS and PostgreSQL with sslmode=verify-full, as the
// deploy's defaults configure it, and both connections are encrypted.
func TestHubServiceOpensOverTLS(t *testing.T) {
	set, err := certs.WriteSet(t.TempDir(), "flotilla")
	if err != nil {
		t.Fatal(err)
	}
	bus, err := natsserver.Start(natsserver.Options{
		StoreDir: t.TempDir(),
		TLS:      &natsserver.TLS{CertFile: set.Server.Cert, KeyFile: set.Server.Key, CAFile: set.CA},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Stop)
	db, err := postgres.Start(t.Context(), postgres.Options{
		TLS: &postgres.TLS{CertFile: set.Server.Cert, KeyFile: set.Server.Key, RootCert: set.CA},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Stop() })
	dbURL, err := db.EnsureDatabase(t.Context(), "flotilla")
	if err != nil {
		t.Fatal(err)
	}

	opts := service.Options{
		NATS:        natsconn.Settings{URL: bus.URL(), CA: set.CA, Cert: set.Client.Cert, Key: set.Client.Key},
		DatabaseURL: dbURL,
		Logger:      slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	env, err := service.Open(t.Context(), "tls-test", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	state, err := env.NC.TLSConnectionState()
	if err != nil || len(state.VerifiedChains) == 0 {
		t.Errorf("NATS connection: TLS state %v, verified chains %d: want a verified TLS connection", err, len(state.VerifiedChains))
	}
	var ssl bool
	if err := env.Pool.QueryRow(t.Context(), `select ssl from pg_stat_ssl where pid = pg_backend_pid()`).Scan(&ssl); err != nil || !ssl {
		t.Errorf("PostgreSQL connection encrypted: %v (%v)", ssl, err)
	}
}

// syncBuffer is a log destination several goroutines may write.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Whatever goes wrong connecting, neither the error nor the log shows a password of the
// NATS URL or of the database URL.
func TestOpenShowsNoPassword(t *testing.T) {
	bus, _ := natsserver.StartT(t)
	const password = "hunter2-s3cret"
	for name, opts := range map[string]service.Options{
		"NATS unreachable": {
			NATS:        natsconn.Settings{URL: "nats://flotilla:" + password + "@127.0.0.1:1"},
			DatabaseURL: "postgres://flotilla:" + password + "@127.0.0.1:1/flotilla",
		},
		"database unreachable": {
			NATS:        natsconn.Settings{URL: bus.URL()},
			DatabaseURL: "postgres://flotilla:" + password + "@127.0.0.1:1/flotilla?sslmode=disable&connect_timeout=5",
		},
		"database CA missing": {
			NATS:        natsconn.Settings{URL: bus.URL()},
			DatabaseURL: "postgres://flotilla:" + password + "@127.0.0.1:1/flotilla?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
		},
		"database URL malformed": {
			NATS:        natsconn.Settings{URL: bus.URL()},
			DatabaseURL: "postgres://flotilla:" + password + "@127.0.0.1:port/flotilla",
		},
		"database keywords malformed": {
			NATS:        natsconn.Settings{URL: bus.URL()},
			DatabaseURL: "host=127.0.0.1 port=abc user=flotilla password=" + password,
		},
		"database password in keywords": {
			NATS:        natsconn.Settings{URL: bus.URL()},
			DatabaseURL: "host=127.0.0.1 port=1 user=flotilla password=" + password + " sslmode=disable connect_timeout=5",
		},
	} {
		t.Run(name, func(t *testing.T) {
			var log syncBuffer
			opts.Logger = slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
			// Open waits for a database that does not answer yet: a bound ends the
			// wait, and the error and the log lines of the wait are checked.
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			env, err := service.Open(ctx, "redact-test", opts)
			if err == nil {
				env.Close()
				t.Fatal("opened")
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("error shows the password: %v", err)
			}
			if strings.Contains(log.String(), password) {
				t.Errorf("log shows the password:\n%s", log.String())
			}
			mctx, mcancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer mcancel()
			if err := service.Migrate(mctx, opts.DatabaseURL); err == nil || strings.Contains(err.Error(), password) {
				t.Errorf("migrate: %v: want an error without the password", err)
			}
			t.Logf("error: %v", err)
		})
	}
}
