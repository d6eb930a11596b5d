// Package benchkit is what the benchmark commands under e2e/bench share: the
// data dir a run keeps its stack's state and log in, removed at the end
// unless asked to keep it.
package benchkit

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// LogFile is the name of the services' log in a data dir.
const LogFile = "flotilla.log"

// tailLines is how much of the log a failed run shows.
const tailLines = 40

// DataDir returns dir, created if need be, or when dir is "" a fresh
// temporary one named after prefix; and cleanUp, to call with the run's error
// at the end. A temporary dir is removed then unless keep, after showing the
// last lines of its log on progress when the run failed.
func DataDir(dir, prefix string, keep bool, progress io.Writer) (_ string, cleanUp func(err error), err error) {
	cleanUp = func(error) {}
	if dir != "" {
		return dir, cleanUp, os.MkdirAll(dir, 0o755)
	}
	// Under /tmp and world-readable: a local PostgreSQL runs as the postgres user when this
	// runs as root, and must reach its data there.
	if dir, err = os.MkdirTemp("/tmp", prefix); err != nil {
		return "", nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", nil, err
	}
	if keep {
		fmt.Fprintf(progress, "data dir (kept): %s\n", dir)
		return dir, cleanUp, nil
	}
	return dir, func(err error) {
		if err != nil {
			fmt.Fprintf(progress, "\nlast lines of the log:\n%s\n", Tail(filepath.Join(dir, LogFile), tailLines))
		}
		// PostgreSQL's last files can still be going away as it stops: try again a little.
		for range 10 {
			if err := os.RemoveAll(dir); err == nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		fmt.Fprintf(progress, "could not remove the data dir %s\n", dir)
	}, nil
}

// Tail is the last n lines of the file at path, or why it cannot be read.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
