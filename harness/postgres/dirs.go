package postgres

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
