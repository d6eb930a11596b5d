// Package certs makes a throwaway certificate authority and the certificates it signs, for
// tests and the quick start that need real TLS: a NATS server that verifies its clients, a
// PostgreSQL server a client checks with sslmode=verify-full. Keys are ECDSA P-256; nothing
// here is meant to outlive a test run or a local stack (deploy/tls.sh makes the files an
// installation uses).
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// validity of everything made here: long enough for a quick start left running, short
// enough that a leaked file is soon worthless.
const validity = 90 * 24 * time.Hour

// Authority is a certificate authority that signs server and client certificates.
type Authority struct {
	cert *x509.Certificate
	key  crypto.Signer
	// PEM is the authority's certificate, what a peer verifies others with.
	PEM []byte
}

// NewAuthority makes a self-signed authority called name.
func NewAuthority(name string) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certificate authority %s: %w", name, err)
	}
	tmpl, err := template(name)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("certificate authority %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certificate authority %s: %w", name, err)
	}
	return &Authority{cert: cert, key: key, PEM: pemBlock("CERTIFICATE", der)}, nil
}

// Pair is a certificate and its private key, PEM-encoded.
type Pair struct {
	Cert, Key []byte
}

// Server signs a certificate a server presents for hosts (DNS names or IP addresses).
func (a *Authority) Server(name string, hosts ...string) (Pair, error) {
	if len(hosts) == 0 {
		return Pair{}, fmt.Errorf("server certificate %s: no host names", name)
	}
	return a.issue(name, hosts, x509.ExtKeyUsageServerAuth)
}

// Client signs a certificate a client presents; name is its subject's common name (what a
// NATS server maps to a user with verify_and_map).
func (a *Authority) Client(name string) (Pair, error) {
	return a.issue(name, nil, x509.ExtKeyUsageClientAuth)
}

func (a *Authority) issue(name string, hosts []string, usage x509.ExtKeyUsage) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("certificate %s: %w", name, err)
	}
	tmpl, err := template(name)
	if err != nil {
		return Pair{}, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{usage}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return Pair{}, fmt.Errorf("certificate %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, fmt.Errorf("certificate %s: %w", name, err)
	}
	return Pair{Cert: pemBlock("CERTIFICATE", der), Key: pemBlock("PRIVATE KEY", keyDER)}, nil
}

func template(name string) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certificate %s: serial: %w", name, err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"Flotilla"}},
		NotBefore:    now.Add(-time.Hour), // a peer whose clock is a little behind accepts it
		NotAfter:     now.Add(validity),
	}, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// Files are the paths of a certificate and its key.
type Files struct {
	Cert, Key string
}

// Write writes the pair to dir/name.pem and dir/name-key.pem (the key readable by its owner
// only) and returns their paths.
func (p Pair) Write(dir, name string) (Files, error) {
	f := Files{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
	if err := os.WriteFile(f.Cert, p.Cert, 0o644); err != nil {
		return Files{}, fmt.Errorf("write certificate: %w", err)
	}
	if err := os.WriteFile(f.Key, p.Key, 0o600); err != nil {
		return Files{}, fmt.Errorf("write key: %w", err)
	}
	return f, nil
}

// WriteCA writes the authority's certificate to dir/ca.pem and returns its path.
func (a *Authority) WriteCA(dir string) (string, error) {
	path := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(path, a.PEM, 0o644); err != nil {
		return "", fmt.Errorf("write CA certificate: %w", err)
	}
	return path, nil
}

// Set is a directory of TLS files for one test or local stack: a CA, a server certificate
// for the loopback address and localhost, and a client certificate.
type Set struct {
	CA     string
	Server Files
	Client Files
}

// WriteSet makes a new authority in dir (ca.pem), a server certificate for 127.0.0.1, ::1
// and localhost (server.pem, server-key.pem) and a client certificate called client
// (client.pem, client-key.pem).
func WriteSet(dir, client string) (Set, error) {
	if client == "" {
		return Set{}, errors.New("write TLS files: a client name is required")
	}
	ca, err := NewAuthority("Flotilla test CA")
	if err != nil {
		return Set{}, err
	}
	var s Set
	if s.CA, err = ca.WriteCA(dir); err != nil {
		return Set{}, err
	}
	server, err := ca.Server("flotilla-server", "127.0.0.1", "::1", "localhost")
	if err != nil {
		return Set{}, err
	}
	if s.Server, err = server.Write(dir, "server"); err != nil {
		return Set{}, err
	}
	c, err := ca.Client(client)
	if err != nil {
		return Set{}, err
	}
	if s.Client, err = c.Write(dir, "client"); err != nil {
		return Set{}, err
	}
	return s, nil
}
