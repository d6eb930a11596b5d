package natsserver_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/harness/certs"
	"github.com/flotilla-dev/flotilla/harness/natsserver"
	"github.com/flotilla-dev/flotilla/platform/natsconn"
)

// startTLS starts a server that requires TLS and a client certificate signed by its CA.
func startTLS(t *testing.T) (*natsserver.Server, certs.Set) {
	t.Helper()
	set, err := certs.WriteSet(t.TempDir(), "flotilla-test-client")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := natsserver.Start(natsserver.Options{
		StoreDir: t.TempDir(),
		TLS:      &natsserver.TLS{CertFile: set.Server.Cert, KeyFile: set.Server.Key, CAFile: set.CA},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv, set
}

// A client with the CA and a client certificate, given as every Flotilla program takes them
// (--nats-ca, --nats-cert, --nats-key), talks to the server over a verified TLS connection.
func TestClientsConnectOverMutualTLS(t *testing.T) {
	srv, set := startTLS(t)
	if !strings.HasPrefix(srv.URL(), "tls://") {
		t.Errorf("URL %s: want tls://", srv.URL())
	}
	s := natsconn.Settings{URL: srv.URL(), CA: set.CA, Cert: set.Client.Cert, Key: set.Client.Key}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	nc, err := s.Connect("tls-test")
	if err != nil {
		t.Fatalf("connect with the CA and a client certificate: %v", err)
	}
	defer nc.Close()
	state, err := nc.TLSConnectionState()
	if err != nil {
		t.Fatalf("connection state: %v", err)
	}
	if !state.HandshakeComplete || len(state.VerifiedChains) == 0 {
		t.Errorf("TLS handshake complete %v, verified chains %d: want a verified server certificate", state.HandshakeComplete, len(state.VerifiedChains))
	}
	sub, err := nc.SubscribeSync("tls.echo")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("tls.echo", []byte("over TLS")); err != nil {
		t.Fatal(err)
	}
	msg, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("message over TLS: %v", err)
	}
	if string(msg.Data) != "over TLS" {
		t.Errorf("message over TLS: %q", msg.Data)
	}
}

// The server refuses a client without a certificate, a plain-text client, and a client
// that does not trust its certificate; the client refuses a server its CA did not sign.
func TestServerRefusesClientsWithoutTheRightCertificates(t *testing.T) {
	srv, set := startTLS(t)
	other, err := certs.WriteSet(t.TempDir(), "stranger")
	if err != nil {
		t.Fatal(err)
	}
	plain := strings.Replace(srv.URL(), "tls://", "nats://", 1)
	for name, s := range map[string]natsconn.Settings{
		"no client certificate":          {URL: srv.URL(), CA: set.CA},
		"a certificate of another CA":    {URL: srv.URL(), CA: set.CA, Cert: other.Client.Cert, Key: other.Client.Key},
		"the server not trusted":         {URL: srv.URL(), CA: other.CA, Cert: set.Client.Cert, Key: set.Client.Key},
		"plain text, no TLS":             {URL: plain},
		"the system's CAs, not the test": {URL: srv.URL(), Cert: set.Client.Cert, Key: set.Client.Key},
	} {
		t.Run(name, func(t *testing.T) {
			nc, err := s.Connect("tls-test", nats.Timeout(5*time.Second), nats.NoReconnect())
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), "tls") {
				t.Errorf("refused for another reason than TLS: %v", err)
			}
		})
	}
}
