package postgres

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

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
