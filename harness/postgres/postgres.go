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
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flotilla-dev/flotilla/harness/internal/proc"
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
	dir  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the postmaster has exited
	logf *os.File

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

// binaries are the programs a throwaway server needs.
var binaries = []string{"initdb", "postgres"}

// FindBinDir returns the directory holding initdb and postgres: dir if given, else
// $FLOTILLA_POSTGRES_BIN_DIR, else the first PATH entry holding both, else the newest
// /usr/lib/postgresql/<version>/bin (Debian, Ubuntu) or /usr/local/pgsql/bin.
func FindBinDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv(EnvBinDir)
	}
	if dir != "" {
		if err := hasBinaries(dir); err != nil {
			return "", fmt.Errorf("postgres binaries in %s: %w; %s", dir, err, installHint)
		}
		return dir, nil
	}
	var candidates []string
	if p, err := exec.LookPath("initdb"); err == nil {
		candidates = append(candidates, filepath.Dir(p))
	}
	versioned, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(versioned, func(a, b string) int { return compareVersions(versionOf(b), versionOf(a)) })
	candidates = append(candidates, versioned...)
	candidates = append(candidates, "/usr/local/pgsql/bin")
	for _, c := range candidates {
		if hasBinaries(c) == nil {
			return c, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb, postgres) on PATH or in /usr/lib/postgresql/*/bin: %s", installHint)
}

func hasBinaries(dir string) error {
	for _, b := range binaries {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil {
			return err
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not executable", filepath.Join(dir, b))
		}
	}
	return nil
}

// versionOf extracts "15" or "9.6" from /usr/lib/postgresql/15/bin.
func versionOf(binDir string) string { return filepath.Base(filepath.Dir(binDir)) }

func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		var x, y int
		if i < len(as) {
			x, _ = strconv.Atoi(as[i])
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x - y
		}
	}
	return 0
}

// runAs is the unprivileged account a server runs as when we are root: PostgreSQL refuses to
// run as root, and CI runs as root.
type runAs struct {
	name     string
	uid, gid uint32
}

func unprivilegedUser() (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		return &runAs{name: name, uid: uint32(uid), gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as " +
		"(PostgreSQL refuses to run as root): create one with useradd -r postgres, or set " + EnvURL)
}

func (u *runAs) apply(cmd *exec.Cmd) {
	if u == nil {
		return
	}
	// Go switches user in the child between fork and exec, like setpriv, without needing the
	// tool, and sets the parent-death signal after the switch so it still holds.
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.uid, Gid: u.gid}
	cmd.Env = append(os.Environ(), "HOME="+cmd.Dir, "USER="+u.name, "LOGNAME="+u.name)
}

// traversable checks that as can reach dir: every directory from / down must let it search.
func traversable(dir string, as *runAs) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		canSearch := mode&0o001 != 0 ||
			(ok && st.Uid == as.uid && mode&0o100 != 0) ||
			(ok && st.Gid == as.gid && mode&0o010 != 0)
		if !canSearch {
			return fmt.Errorf("user %s, which runs PostgreSQL because we are root, cannot reach %s (%s is %v); "+
				"use a directory under /tmp", as.name, dir, p, mode)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// scratchPrefix names the server's scratch directories, so leftovers of killed test binaries
// are recognised and swept by the next Start.
const scratchPrefix = "flotilla-pg-"

func startLocal(ctx context.Context, opts Options) (*Server, error) {
	begin := time.Now()
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	binDir, err := FindBinDir(opts.BinDir)
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	as, err := unprivilegedUser()
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	persistent := opts.DataDir != ""
	var dir string
	if persistent {
		dir, err = dataDirFor(opts.DataDir, as)
	} else {
		dir, err = scratchDirFor(opts.Dir, as)
	}
	if err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	kind := "scratch dir"
	if persistent {
		kind = "data dir"
	}
	fmt.Fprintf(logw, "postgres: binaries in %s, %s %s, running as %s\n", binDir, kind, dir, userName(as))

	s := &Server{dir: dir, persistent: persistent, templates: map[string]string{}}
	fail := func(err error) (*Server, error) {
		s.Stop()
		if !persistent {
			os.RemoveAll(dir)
		}
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	dataDir := filepath.Join(dir, "data")
	if persistent && hasCluster(dataDir) {
		fmt.Fprintf(logw, "postgres: reusing the cluster in %s\n", dataDir)
		removeForeignLock(dataDir)
	} else if err := s.initdb(ctx, binDir, dataDir, as); err != nil {
		return fail(err)
	}
	preferred := 0
	if persistent {
		preferred = readPort(dir)
	}
	// A port can be taken between choosing and binding it; try a few.
	for attempt := 1; ; attempt++ {
		err = s.run(ctx, binDir, dataDir, as, preferred)
		if err == nil {
			break
		}
		if attempt == 3 || !strings.Contains(proc.Tail(s.logPath(), 20), "could not bind") {
			return fail(err)
		}
		fmt.Fprintf(logw, "postgres: port %d was taken, trying another\n", s.port)
		preferred = 0
	}
	if persistent {
		if err := writePort(dir, s.port); err != nil {
			return fail(err)
		}
	}
	if err := s.readVersion(ctx); err != nil {
		return fail(err)
	}
	s.started = time.Since(begin)
	fmt.Fprintf(logw, "postgres: PostgreSQL %s ready on 127.0.0.1:%d in %s\n", s.version, s.port, s.started.Round(time.Millisecond))
	return s, nil
}

// scratchDirFor creates a throwaway server's directory under base.
func scratchDirFor(base string, as *runAs) (string, error) {
	if base == "" {
		base = os.TempDir()
		if as != nil {
			// The server's user must traverse every parent of its directory; /tmp is 1777.
			base = "/tmp"
		}
	}
	if as != nil {
		if err := traversable(base, as); err != nil {
			return "", err
		}
	}
	dir, err := proc.ScratchDir(base, scratchPrefix)
	if err != nil {
		return "", err
	}
	if err := handOver(dir, as); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// dataDirFor creates a persistent server's directory, or checks the one a previous run made.
func dataDirFor(dir string, as *runAs) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create data dir: %w", err)
	}
	if err := handOver(dir, as); err != nil {
		return "", err
	}
	if as != nil {
		if err := traversable(dir, as); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// handOver gives dir to the server's user (0700): initdb creates the data directory in it and
// the server writes its log (and a throwaway server its socket) there.
func handOver(dir string, as *runAs) error {
	if as == nil {
		return nil
	}
	if err := os.Chown(dir, int(as.uid), int(as.gid)); err != nil {
		return fmt.Errorf("hand %s to user %s: %w", dir, as.name, err)
	}
	return nil
}

// Reachable reports whether a server started here could keep its files in dir, which must
// exist: when running as root the server runs as an unprivileged user, who must be able to
// search every directory from / down to dir. The error says what to do otherwise.
func Reachable(dir string) error {
	as, err := unprivilegedUser()
	if err != nil || as == nil {
		return err
	}
	return traversable(dir, as)
}

// hasCluster reports whether dataDir holds a database cluster made by initdb.
func hasCluster(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, "PG_VERSION"))
	return err == nil
}

// removeForeignLock removes a postmaster.pid left by a server that was killed, when its pid
// now belongs to another program: PostgreSQL would refuse to start, taking that program for
// another server. A lock whose process is gone PostgreSQL removes itself.
func removeForeignLock(dataDir string) {
	lock := filepath.Join(dataDir, "postmaster.pid")
	b, err := os.ReadFile(lock)
	if err != nil {
		return
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) == "postgres" {
		return // gone (PostgreSQL copes), unknowable, or a server really running
	}
	os.Remove(lock)
}

// portFile records a persistent server's port, so that it comes back where it was.
const portFile = "port"

func readPort(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, portFile))
	if err != nil {
		return 0
	}
	port, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return port
}

func writePort(dir string, port int) error {
	if err := os.WriteFile(filepath.Join(dir, portFile), []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
		return fmt.Errorf("record port: %w", err)
	}
	return nil
}

func userName(as *runAs) string {
	if as == nil {
		return "the current user"
	}
	return as.name
}

func (s *Server) logPath() string { return filepath.Join(s.dir, "postgres.log") }

func (s *Server) initdb(ctx context.Context, binDir, dataDir string, as *runAs) error {
	args := []string{
		"-D", dataDir,
		"-U", "postgres", // the superuser's name, whatever OS user runs the server
		"--auth=trust",
		"--encoding=UTF8",
		"--locale=C",
	}
	if !s.persistent {
		args = append(args, "--no-sync") // a throwaway cluster need not survive a power cut
	}
	cmd, logf, err := proc.Command(filepath.Join(binDir, "initdb"), args, filepath.Join(s.dir, "initdb.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Dir = s.dir
	as.apply(cmd)
	if err := runContext(ctx, cmd); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, proc.Tail(filepath.Join(s.dir, "initdb.log"), 20))
	}
	// A throwaway server trades durability for speed and puts its socket inside the scratch
	// directory, so nothing is written to /var/run/postgresql. A persistent one keeps the
	// defaults and listens on TCP only: a socket path inside a deep data directory could
	// exceed the kernel's limit on its length.
	conf := `
# flotilla harness
listen_addresses = '127.0.0.1'
max_connections = 200
dynamic_shared_memory_type = mmap
log_min_messages = warning
`
	if s.persistent {
		conf += "unix_socket_directories = ''\n"
	} else {
		conf += "unix_socket_directories = '" + s.dir + `'
fsync = off
synchronous_commit = off
full_page_writes = off
autovacuum = off
`
	}
	f, err := os.OpenFile(filepath.Join(dataDir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return fmt.Errorf("configure: %w", err)
	}
	return f.Close()
}

// runContext runs cmd and kills its process group if ctx ends first.
func runContext(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	var err error
	go func() { err = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		proc.Stop(cmd, done, syscall.SIGKILL, 0)
		return ctx.Err()
	}
}

// run starts the postmaster as our own child (not daemonised by pg_ctl), so the kernel kills it
// if the test binary dies, and waits until it accepts connections. It listens on preferred
// when that is set and free.
func (s *Server) run(ctx context.Context, binDir, dataDir string, as *runAs, preferred int) error {
	ports, err := proc.PreferPorts([]int{preferred})
	if err != nil {
		return err
	}
	port := ports[0]
	s.port = port
	cmd, logf, err := proc.Command(filepath.Join(binDir, "postgres"), []string{"-D", dataDir, "-p", strconv.Itoa(port)}, s.logPath())
	if err != nil {
		return err
	}
	cmd.Dir = s.dir
	as.apply(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("run postgres: %w", err)
	}
	s.cmd, s.logf, s.done = cmd, logf, make(chan struct{})
	go func(done chan struct{}) { cmd.Wait(); close(done) }(s.done)

	s.adminURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if s.admin == nil {
			if pool, err := pgxpool.New(ctx, s.adminURL); err == nil {
				s.admin = pool
			}
		}
		if s.admin != nil {
			if err = s.admin.Ping(ctx); err == nil {
				return nil
			}
		}
		select {
		case <-s.done:
			s.closeAdmin()
			s.stopProcess()
			return fmt.Errorf("postgres exited before accepting connections:\n%s", proc.Tail(s.logPath(), 20))
		case <-ctx.Done():
			s.closeAdmin()
			s.stopProcess()
			return fmt.Errorf("postgres not accepting connections on port %d: %w (last error: %v)\n%s",
				port, ctx.Err(), err, proc.Tail(s.logPath(), 20))
		case <-time.After(25 * time.Millisecond):
		}
	}
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

// DatabaseURL is the URL of database name on this server.
func (s *Server) DatabaseURL(name string) string { return withDatabase(s.adminURL, name) }

// CreateTemplate creates the template database name once per Server and runs migrate on it.
// NewDatabase(ctx, name) then clones it. Calling it again with the same name does nothing.
func (s *Server) CreateTemplate(ctx context.Context, name string, migrate func(context.Context, *pgx.Conn) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("create template: server stopped")
	}
	if _, ok := s.templates[name]; ok {
		return nil
	}
	db := s.prefix + sanitize(name)
	if _, err := s.admin.Exec(ctx, "create database "+pgx.Identifier{db}.Sanitize()); err != nil {
		return fmt.Errorf("create template %s: %w", name, err)
	}
	if s.external {
		s.databases = append(s.databases, db)
	}
	conn, err := pgx.Connect(ctx, withDatabase(s.adminURL, db))
	if err != nil {
		return fmt.Errorf("create template %s: connect: %w", name, err)
	}
	if migrate != nil {
		if err := migrate(ctx, conn); err != nil {
			conn.Close(ctx)
			return fmt.Errorf("create template %s: %w", name, err)
		}
	}
	if err := conn.Close(ctx); err != nil {
		return fmt.Errorf("create template %s: close: %w", name, err)
	}
	// No connections to a template: CREATE DATABASE ... TEMPLATE fails while anyone is connected.
	if _, err := s.admin.Exec(ctx, "alter database "+pgx.Identifier{db}.Sanitize()+" with is_template true allow_connections false"); err != nil {
		return fmt.Errorf("create template %s: %w", name, err)
	}
	s.templates[name] = db
	return nil
}

// NewDatabase creates a fresh database cloned from a template made by CreateTemplate and returns
// its URL. An empty template gives an empty database.
func (s *Server) NewDatabase(ctx context.Context, template string) (string, error) {
	s.mu.Lock()
	tpl, ok := s.templates[template]
	stopped := s.stopped
	s.mu.Unlock()
	if stopped {
		return "", errors.New("new database: server stopped")
	}
	if template != "" && !ok {
		return "", fmt.Errorf("new database: no template %q (call CreateTemplate first)", template)
	}
	n := s.seq.Add(1)
	db := fmt.Sprintf("%sdb_%d", s.prefix, n)
	if template != "" {
		db = fmt.Sprintf("%s%s_%d", s.prefix, sanitize(template), n)
	}
	stmt := "create database " + pgx.Identifier{db}.Sanitize()
	if tpl != "" {
		stmt += " template " + pgx.Identifier{tpl}.Sanitize()
	}
	if _, err := s.admin.Exec(ctx, stmt); err != nil {
		return "", fmt.Errorf("new database from %q: %w", template, err)
	}
	if s.external {
		s.mu.Lock()
		s.databases = append(s.databases, db)
		s.mu.Unlock()
	}
	return withDatabase(s.adminURL, db), nil
}

// EnsureDatabase creates the database name unless it exists, and returns its URL. Unlike
// NewDatabase's, the database is the caller's to keep: Stop never drops it.
func (s *Server) EnsureDatabase(ctx context.Context, name string) (string, error) {
	var exists bool
	if err := s.admin.QueryRow(ctx, "select exists (select 1 from pg_database where datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("ensure database %s: %w", name, err)
	}
	if !exists {
		_, err := s.admin.Exec(ctx, "create database "+pgx.Identifier{name}.Sanitize())
		var pgErr *pgconn.PgError
		if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P04") { // duplicate_database: created meanwhile
			return "", fmt.Errorf("ensure database %s: %w", name, err)
		}
	}
	return s.DatabaseURL(name), nil
}

// DropDatabase drops a database made by NewDatabase, disconnecting anyone still connected.
func (s *Server) DropDatabase(ctx context.Context, dbURL string) error {
	name, err := databaseName(dbURL)
	if err != nil {
		return err
	}
	if _, err := s.admin.Exec(ctx, "drop database if exists "+pgx.Identifier{name}.Sanitize()+" with (force)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	s.mu.Lock()
	s.databases = slices.DeleteFunc(s.databases, func(d string) bool { return d == name })
	s.mu.Unlock()
	return nil
}

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

func (s *Server) closeAdmin() {
	if s.admin != nil {
		s.admin.Close()
		s.admin = nil
	}
}

// stopProcess sends SIGQUIT, PostgreSQL's immediate shutdown (what pg_ctl stop -m immediate
// sends), to the postmaster's group and waits for it; for a persistent server SIGINT, the fast
// shutdown, which checkpoints so the next start needs no recovery.
func (s *Server) stopProcess() {
	if s.cmd == nil {
		return
	}
	if s.persistent {
		proc.Stop(s.cmd, s.done, syscall.SIGINT, time.Minute)
	} else {
		proc.Stop(s.cmd, s.done, syscall.SIGQUIT, 10*time.Second)
	}
	s.logf.Close()
	s.cmd = nil
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

func sanitize(name string) string {
	return unsafeName.ReplaceAllString(strings.ToLower(name), "_")
}

// withDatabase returns dsn with its database replaced by db. It understands both URLs and
// keyword/value strings.
func withDatabase(dsn, db string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		q := u.Query()
		q.Del("dbname")
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " dbname=" + db
}

func databaseName(dsn string) (string, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "", fmt.Errorf("parse database url: %w", err)
	}
	return cfg.Database, nil
}

// redact hides a password in a URL for error messages.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		return u.Redacted()
	}
	return "the configured server"
}
