package postgres

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"github.com/flotilla-dev/flotilla/harness/internal/proc"
)

// Faults a test can inject into a server started here (not into an external one).

var errExternal = errors.New("the server was not started here")

// Freeze stops every process of the server (SIGSTOP to its process group), as a server that
// hangs: connections stay open, new ones are accepted by the kernel, and nothing answers.
// Thaw resumes it.
func (s *Server) Freeze() error {
	if s.external || s.cmd == nil {
		return fmt.Errorf("freeze postgres: %w", errExternal)
	}
	s.frozen.Store(true)
	proc.SignalTree(s.cmd, syscall.SIGSTOP)
	return nil
}

// Thaw resumes a server stopped by Freeze.
func (s *Server) Thaw() error {
	if s.external || s.cmd == nil {
		return fmt.Errorf("thaw postgres: %w", errExternal)
	}
	s.frozen.Store(false)
	proc.SignalTree(s.cmd, syscall.SIGCONT)
	return nil
}

// Halt shuts the server down (a fast shutdown: sessions are ended, committed data kept) and
// leaves it down: connections are refused until Resume.
func (s *Server) Halt() error {
	if s.external || s.cmd == nil {
		return fmt.Errorf("halt postgres: %w", errExternal)
	}
	s.closeAdmin()
	if s.frozen.Swap(false) {
		proc.SignalTree(s.cmd, syscall.SIGCONT)
	}
	// Not stopProcess's immediate shutdown: a throwaway server commits asynchronously, and
	// would lose what it had not yet written.
	proc.Stop(s.cmd, s.done, syscall.SIGINT, time.Minute)
	s.logf.Close()
	s.cmd = nil
	return nil
}

// Resume starts a halted server again, on the same port, with the same data, and waits until
// it accepts connections.
func (s *Server) Resume(ctx context.Context) error {
	if s.external || s.binDir == "" {
		return fmt.Errorf("resume postgres: %w", errExternal)
	}
	if s.cmd != nil {
		return errors.New("resume postgres: the server is running")
	}
	port := s.port
	if err := s.run(ctx, s.binDir, filepath.Join(s.dir, "data"), s.as, port, s.settings); err != nil {
		return fmt.Errorf("resume postgres: %w", err)
	}
	if s.port != port {
		s.Halt()
		return fmt.Errorf("resume postgres: port %d was taken meanwhile", port)
	}
	return nil
}
