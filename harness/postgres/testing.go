package postgres

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/migrations"
)

// Template is the name of the template database holding Flotilla's migrated schema on the
// shared test server.
const Template = "flotilla"

// shared is the one server a test binary uses, started by the first test that asks for it.
var shared struct {
	once    sync.Once
	srv     *Server
	err     error
	started time.Duration
}

// SharedServer returns the test binary's server, starting it (and migrating the Flotilla
// template) on first use. It fails the test, with instructions, when no PostgreSQL is available.
// Call Shutdown from TestMain, or use RunMain, so the server is stopped when the tests end; if
// the binary dies first the kernel kills the server and the next run removes its directory.
func SharedServer(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		begin := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		srv, err := Start(ctx, Options{})
		if err != nil {
			shared.err = err
			return
		}
		if err := srv.CreateTemplate(ctx, Template, migrations.Migrate); err != nil {
			srv.Stop()
			shared.err = fmt.Errorf("shared test server: %w", err)
			return
		}
		shared.srv = srv
		shared.started = time.Since(begin)
		stopOnSignal()
		if srv.External() {
			t.Logf("using PostgreSQL %s at %s (%s); migrated template ready in %s",
				srv.Version(), redact(srv.URL()), EnvURL, shared.started.Round(time.Millisecond))
		} else {
			t.Logf("started a real PostgreSQL %s on 127.0.0.1:%d in %s (migrated template ready after %s)",
				srv.Version(), srv.Port(), srv.StartDuration().Round(time.Millisecond), shared.started.Round(time.Millisecond))
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

// NewTestDB returns the URL of a fresh database holding Flotilla's migrated schema, cloned from
// the shared server's template. Each call gets its own database, so tests may run in parallel.
func NewTestDB(t testing.TB) string {
	t.Helper()
	srv := SharedServer(t)
	dbURL, err := srv.NewDatabase(t.Context(), Template)
	if err != nil {
		t.Fatal(err)
	}
	if srv.External() {
		// Keep a shared server tidy; a throwaway one is removed whole.
		t.Cleanup(func() {
			if err := srv.DropDatabase(context.Background(), dbURL); err != nil {
				t.Log(err)
			}
		})
	}
	t.Logf("PostgreSQL %s on port %d: fresh database %s", srv.Version(), srv.Port(), dbName(dbURL))
	return dbURL
}

func dbName(dbURL string) string {
	name, err := databaseName(dbURL)
	if err != nil {
		return "?"
	}
	return name
}

// StartT starts a private server for one test and stops it when the test ends. Most tests want
// NewTestDB instead, which shares one server per test binary.
func StartT(t testing.TB) *Server {
	t.Helper()
	srv, err := Start(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Log(err)
		}
	})
	t.Logf("started a real PostgreSQL %s on 127.0.0.1:%d in %s", srv.Version(), srv.Port(), srv.StartDuration().Round(time.Millisecond))
	return srv
}

// Shutdown stops the shared server, if one was started. Call it from TestMain after m.Run.
func Shutdown() error {
	// Make sure a later SharedServer does not start a new server.
	shared.once.Do(func() { shared.err = fmt.Errorf("shared test server: already shut down") })
	if shared.srv == nil {
		return nil
	}
	return shared.srv.Stop()
}

// RunMain runs the tests and stops the shared server however they end, returning m.Run's exit
// code. Use it as a package's TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }
func RunMain(m *testing.M) int {
	defer func() {
		if err := Shutdown(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	return m.Run()
}

// stopOnSignal stops the shared server when the test binary is interrupted (Ctrl-C, a CI
// cancel), then lets the signal take its usual course.
func stopOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-ch
		Shutdown()
		signal.Reset(sig)
		_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
	}()
}
