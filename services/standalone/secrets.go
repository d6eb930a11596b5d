package standalone

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/flotilla-dev/flotilla/harness/certs"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/platform/sealing"
)

// encryptionKeys makes sure the rollout has a key to seal Secrets with: the file given, or
// DataDir/encryption-keys, made with a new key the first time. It stays with the data: the
// database's Secrets cannot be read without it.
func (r *runner) encryptionKeys() error {
	if r.cfg.EncryptionKeyFile != "" {
		r.keyFile = r.cfg.EncryptionKeyFile
		_, err := sealing.LoadKeys(r.keyFile)
		return err
	}
	r.keyFile = filepath.Join(r.cfg.DataDir, "encryption-keys")
	wrote, err := sealing.WriteNewKeyFile(r.keyFile, "standalone")
	if err != nil {
		return err
	}
	if wrote {
		r.out.printf("==> Made the key that encrypts Secrets in PostgreSQL: %s (keep it with the data)\n", r.rel(r.keyFile))
	}
	return nil
}

// natsTLS returns the server's TLS files and the client's, made in DataDir/tls the first
// time: a CA, a server certificate for the loopback addresses, localhost and host, and a
// client certificate for fleetctl.
func (r *runner) natsTLS(host string) (*natsserver.TLS, *ClientTLS, error) {
	dir := filepath.Join(r.cfg.DataDir, "tls")
	server := &natsserver.TLS{CertFile: filepath.Join(dir, "server.pem"), KeyFile: filepath.Join(dir, "server-key.pem"), CAFile: filepath.Join(dir, "ca.pem")}
	client := &ClientTLS{CA: server.CAFile, Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem")}
	if fileExists(server.CAFile) && fileExists(client.Key) {
		return server, client, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("NATS TLS: %w", err)
	}
	ca, err := certs.NewAuthority("Flotilla standalone CA")
	if err != nil {
		return nil, nil, err
	}
	hosts := []string{"127.0.0.1", "::1", "localhost"}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		hosts = append(hosts, host)
	}
	if name, err := os.Hostname(); err == nil {
		hosts = append(hosts, name)
	}
	pair, err := ca.Server("flotilla-nats", hosts...)
	if err == nil {
		_, err = pair.Write(dir, "server")
	}
	if err == nil {
		pair, err = ca.Client("fleetctl")
	}
	if err == nil {
		_, err = pair.Write(dir, "client")
	}
	if err == nil {
		_, err = ca.WriteCA(dir)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("NATS TLS: %w", err)
	}
	r.out.printf("==> Made a CA and certificates for NATS over TLS in %s\n", r.rel(dir))
	return server, client, nil
}
