package postgres

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/flotilla-dev/flotilla/harness/internal/proc"
)

// scratchPrefix names the server's scratch directories, so leftovers of killed test binaries
// are recognised and swept by the next Start.
const scratchPrefix = "flotilla-pg-"

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

// hasCluster reports whether dataDir holds a database cluster made by initdb.
func hasCluster(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, "PG_VERSION"))
	return err == nil
}

// clearStaleLock deals with a postmaster.pid left by a server that was killed, so that the
// server starts again instead of taking the dead one for a live one:
//   - its pid now belongs to another program: the lock is removed;
//   - its pid is a zombie (the server died and its parent, killed too, never reaped it): the
//     lock is removed;
//   - its pid is a server still exiting (its parent was killed with it a moment ago): wait, up
//     to grace, for it and its backends to go.
//
// A lock whose process is gone PostgreSQL removes itself. A server that stays up past grace is
// left alone: PostgreSQL then refuses to start with its own clear message.
func clearStaleLock(ctx context.Context, dataDir string, grace time.Duration, logw io.Writer) {
	lock := filepath.Join(dataDir, "postmaster.pid")
	deadline := time.Now().Add(grace)
	waited := false
	for {
		pid := lockPID(lock)
		if pid <= 0 {
			return
		}
		switch state, comm := processState(pid); {
		case state == 0:
			return // gone: PostgreSQL copes
		case state == 'Z' || comm != "postgres":
			os.Remove(lock)
			return
		}
		if !waited {
			fmt.Fprintf(logw, "postgres: waiting for the previous server (pid %d) to exit\n", pid)
			waited = true
		}
		if time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// lockPID reads the server's pid from the first line of a postmaster.pid, or 0.
func lockPID(lock string) int {
	b, err := os.ReadFile(lock)
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0
	}
	return pid
}

// processState reads a process's state letter and name from /proc/<pid>/stat; state is 0 when
// there is no such process.
func processState(pid int) (state byte, comm string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, ""
	}
	// "pid (comm) S ...": comm may hold spaces and parentheses, so cut at the last ')'.
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open || closing+2 >= len(s) {
		return 0, ""
	}
	return s[closing+2], s[open+1 : closing]
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
