package postgres

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flotilla-dev/flotilla/harness/internal/proc"
)

// startLocal starts a server of our own from the installed binaries, in a scratch directory
// or the caller's DataDir.
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

	s := &Server{dir: dir, persistent: persistent, templates: map[string]string{}, tls: opts.TLS, binDir: binDir, as: as}
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
		clearStaleLock(ctx, dataDir, 30*time.Second, logw)
	} else if err := s.initdb(ctx, binDir, dataDir, as); err != nil {
		return fail(err)
	}
	if err := writeHBA(dataDir, s.tls != nil, as); err != nil {
		return fail(err)
	}
	var settings []string
	if s.tls != nil {
		if settings, err = s.installTLS(s.tls, as); err != nil {
			return fail(err)
		}
	}
	s.settings = settings
	preferred := 0
	if persistent {
		preferred = readPort(dir)
	}
	// A port can be taken between choosing and binding it; try a few.
	for attempt := 1; ; attempt++ {
		err = s.run(ctx, binDir, dataDir, as, preferred, settings)
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
// when that is set and free, with settings (-c name=value) on its command line.
func (s *Server) run(ctx context.Context, binDir, dataDir string, as *runAs, preferred int, settings []string) error {
	ports, err := proc.PreferPorts([]int{preferred})
	if err != nil {
		return err
	}
	port := ports[0]
	s.port = port
	args := append([]string{"-D", dataDir, "-p", strconv.Itoa(port)}, settings...)
	cmd, logf, err := proc.Command(filepath.Join(binDir, "postgres"), args, s.logPath())
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
	if s.tls != nil {
		q := url.Values{"sslmode": {"verify-full"}, "sslrootcert": {s.tls.RootCert}}
		s.adminURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?%s", port, q.Encode())
	}
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
	if s.frozen.Swap(false) {
		proc.SignalTree(s.cmd, syscall.SIGCONT) // a stopped process handles no signal but SIGKILL
	}
	if s.persistent {
		proc.Stop(s.cmd, s.done, syscall.SIGINT, time.Minute)
	} else {
		proc.Stop(s.cmd, s.done, syscall.SIGQUIT, 10*time.Second)
	}
	s.logf.Close()
	s.cmd = nil
}
