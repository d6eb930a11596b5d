package postgres

import (
	"fmt"
	"os"
	"path/filepath"
)

// TLS makes a server started here accept TCP connections over TLS only. Clients verify it
// with sslmode=verify-full, so CertFile must name 127.0.0.1 (an IP address SAN) and be
// signed by RootCert.
type TLS struct {
	// CertFile and KeyFile are the server's certificate and key (PEM).
	CertFile, KeyFile string
	// RootCert is the authority that signed CertFile: Server.URL and the database URLs name
	// it as sslrootcert.
	RootCert string
}

// tlsDir is where a server's copy of its certificate and key lives, in its directory: the
// server refuses a key file other users may read, and when we are root it runs as another
// user, who must own it.
const tlsDir = "tls"

// installTLS copies the certificate and key into the server's directory, owned by the
// server's user, and returns the command-line settings that turn TLS on.
func (s *Server) installTLS(t *TLS, as *runAs) ([]string, error) {
	if t.CertFile == "" || t.KeyFile == "" || t.RootCert == "" {
		return nil, fmt.Errorf("TLS: CertFile, KeyFile and RootCert are all required")
	}
	dir := filepath.Join(s.dir, tlsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	if err := handOver(dir, as); err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	cert, key := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	for _, f := range []struct{ from, to string }{{t.CertFile, cert}, {t.KeyFile, key}} {
		data, err := os.ReadFile(f.from)
		if err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
		if err := os.WriteFile(f.to, data, 0o600); err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
		if err := handOver(f.to, as); err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
	}
	return []string{"-c", "ssl=on", "-c", "ssl_cert_file=" + cert, "-c", "ssl_key_file=" + key}, nil
}

// writeHBA writes the server's client authentication rules: trust on its socket and on the
// loopback address, and over TCP only with TLS when tls is set (a plain-text connection
// is refused). It is written at every start, so a kept cluster follows the options given.
func writeHBA(dataDir string, tls bool, as *runAs) error {
	host := "host"
	if tls {
		host = "hostssl"
	}
	rules := "# flotilla harness: rewritten at every start\n" +
		"local all all trust\n" +
		host + " all all 127.0.0.1/32 trust\n" +
		host + " all all ::1/128 trust\n"
	path := filepath.Join(dataDir, "pg_hba.conf")
	if err := os.WriteFile(path, []byte(rules), 0o600); err != nil {
		return fmt.Errorf("write pg_hba.conf: %w", err)
	}
	return handOver(path, as)
}
