package standalone

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"

	"github.com/flotilla-dev/flotilla/harness/postgres"
)

// postgresDir is where a local PostgreSQL keeps its cluster: dataDir/postgres, unless the
// server's user cannot reach it. PostgreSQL refuses to run as root, so as root it runs as the
// postgres user, who cannot reach a data dir under a private home directory such as /root; the
// cluster then lives in a directory named after the data dir under /var/tmp (which survives
// reboots), and note says so.
func postgresDir(dataDir string) (dir, note string, err error) {
	dir = filepath.Join(dataDir, "postgres")
	reachErr := postgres.Reachable(dataDir)
	if reachErr == nil {
		return dir, "", nil
	}
	sum := sha256.Sum256([]byte(dataDir))
	alt := filepath.Join("/var/tmp", "flotilla-postgres-"+hex.EncodeToString(sum[:6]))
	if err := postgres.Reachable("/var/tmp"); err != nil {
		return "", "", fmt.Errorf("local PostgreSQL: %w; or give --database-url", reachErr)
	}
	if err := os.MkdirAll(alt, 0o755); err != nil {
		return "", "", fmt.Errorf("local PostgreSQL: %w", err)
	}
	return filepath.Join(alt, "postgres"), fmt.Sprintf("the server's user cannot reach %s, so PostgreSQL keeps its data in %s", dataDir, alt), nil
}

// redactURL hides a password in a database URL (postgres://user:password@..., or
// ?password=) or connection string (password=...).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return passwordKeyword.ReplaceAllString(raw, "${1}xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	if u.User != nil {
		return u.Redacted()
	}
	return u.String()
}

// passwordKeyword is the password of a keyword/value connection string, quoted or not.
var passwordKeyword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)
