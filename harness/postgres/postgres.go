// Package postgres runs a throwaway PostgreSQL server for tests and the quick start, from the
// binaries installed on the machine (initdb, postgres), or uses an existing server named by a
// URL. Databases for tests are cloned from a migrated template, which takes milliseconds.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvURL names an existing server to use instead of starting one. The URL must allow
// CREATE DATABASE, e.g. postgres://postgres@localhost:5432/postgres?sslmode=disable.
const EnvURL = "FLOTILLA_TEST_DATABASE_URL"

// EnvBinDir names the directory holding initdb and postgres, when they are not on PATH or in
// Debian's /usr/lib/postgresql/<version>/bin.
const EnvBinDir = "FLOTILLA_POSTGRES_BIN_DIR"

// installHint ends the error returned when no server can be found, so the person reading it
// knows exactly what to do.
const installHint = "install PostgreSQL (Debian/Ubuntu: apt-get install -y postgresql; " +
	"macOS: brew install postgresql), or point " + EnvURL + " at a server where you may CREATE DATABASE"

// Options configures Start. The zero value starts a throwaway server, or uses
// $FLOTILLA_TEST_DATABASE_URL when it is set.
type Options struct {
	// URL of an existing server to use instead of starting one; overrides $FLOTILLA_TEST_DATABASE_URL.
	URL string
	// BinDir holds initdb and postgres; by default $FLOTILLA_POSTGRES_BIN_DIR, then PATH, then
	// the newest /usr/lib/postgresql/*/bin.
	BinDir string
	// Dir is where the server's scratch directory is created (default os.TempDir(), or /tmp when
	// running as root, since the server then runs as another user who must be able to reach it;
	// a t.TempDir() is not reachable, its parents being 0700).
	Dir string
	// DataDir keeps the server's cluster in this directory across runs, for the quick start:
	// initdb runs only when it holds no cluster yet, the server comes back on the port it had
	// when that is still free, durability settings are PostgreSQL's defaults, and Stop shuts
	// the server down cleanly and leaves the directory in place. Empty: a throwaway server in a
	// scratch directory under Dir. When running as root the server's user must be able to
	// reach DataDir's parent (see Reachable).
	DataDir string
	// Log receives the steps taken (binaries found, user, port). Nil discards them.
	Log io.Writer
	// TLS, when set, makes a server started here accept TCP connections over TLS only, and
	// its URLs verify it (sslmode=verify-full).
	TLS *TLS
}

// Server is a running PostgreSQL server, started by Start or named by a URL.
type Server struct {
	adminURL string // the "postgres" database, as a superuser
	version  string
	port     int
	external bool
	started  time.Duration // how long start took; 0 for an external server
	// persistent: the server's directory is the caller's DataDir, kept by Stop.
	persistent bool

	// Set for a server we started.
	tls *TLS
	// settings are the server's command-line settings (TLS), kept for Resume.
	settings []string
	binDir   string
	as       *runAs
	frozen   atomic.Bool
	dir      string
	cmd      *exec.Cmd
	done     chan struct{} // closed when the postmaster has exited
	logf     *os.File

	admin *pgxpool.Pool

	mu        sync.Mutex
	templates map[string]string // caller's template name -> database name
	databases []string          // databases created on an external server, dropped by Stop
	stopped   bool
	seq       atomic.Int64
	prefix    string // makes names unique on an external server shared by several test binaries
}

// Start starts a throwaway server, or connects to the one named by opts.URL or
// $FLOTILLA_TEST_DATABASE_URL. It never skips silently: when neither is possible the error says
// how to install PostgreSQL.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.URL == "" {
		opts.URL = os.Getenv(EnvURL)
	}
	if opts.URL != "" {
		return connectExternal(ctx, opts.URL)
	}
	return startLocal(ctx, opts)
}

func connectExternal(ctx context.Context, rawURL string) (*Server, error) {
	pool, err := pgxpool.New(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("postgres at %s: %w", redact(rawURL), err)
	}
	s := &Server{
		adminURL:  rawURL,
		external:  true,
		admin:     pool,
		templates: map[string]string{},
		prefix:    fmt.Sprintf("flotilla_test_%d_%d_", os.Getpid(), time.Now().UnixNano()%1e6),
	}
	if err := s.readVersion(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres at %s: %w", redact(rawURL), err)
	}
	if cfg := pool.Config().ConnConfig; cfg != nil {
		s.port = int(cfg.Port)
	}
	return s, nil
}

func (s *Server) readVersion(ctx context.Context) error {
	if err := s.admin.QueryRow(ctx, "show server_version").Scan(&s.version); err != nil {
		return fmt.Errorf("read server version: %w", err)
	}
	return nil
}

// URL is the address of the server's postgres database as a superuser.
func (s *Server) URL() string { return s.adminURL }

// Version is the server's version, e.g. "15.14 (Debian 15.14-0+deb12u1)".
func (s *Server) Version() string { return s.version }

// Port is the TCP port the server listens on.
func (s *Server) Port() int { return s.port }

// External reports whether the server was named by a URL rather than started here.
func (s *Server) External() bool { return s.external }

// StartDuration is how long Start took to bring the server up (zero for an external server).
func (s *Server) StartDuration() time.Duration { return s.started }

// Stop ends a server started here and removes its directory: an immediate shutdown, since it
// is throwaway, or for a server with a DataDir a fast shutdown (a clean checkpoint) that
// leaves the directory in place. For an external server it drops the databases this Server
// created. Stop is safe to call more than once.
func (s *Server) Stop() error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	dbs := slices.Clone(s.databases)
	s.mu.Unlock()

	var errs []error
	if s.external && s.admin != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, db := range slices.Backward(dbs) {
			id := pgx.Identifier{db}.Sanitize()
			// A template cannot be dropped until it is no longer marked as one.
			_, _ = s.admin.Exec(ctx, "alter database "+id+" with is_template false")
			if _, err := s.admin.Exec(ctx, "drop database if exists "+id+" with (force)"); err != nil {
				errs = append(errs, fmt.Errorf("drop %s: %w", db, err))
			}
		}
	}
	s.closeAdmin()
	s.stopProcess()
	if s.dir != "" && !s.persistent {
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop postgres: %w", err)
	}
	return nil
}

// redact hides a password in a URL for error messages.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		return u.Redacted()
	}
	return "the configured server"
}
