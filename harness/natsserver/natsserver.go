// Package natsserver runs an embedded NATS server with JetStream, for tests and
// for the single-process quick start.
package natsserver

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Options configures an embedded server. The zero value is a test server: a
// random loopback port and JetStream in a directory the caller provides.
type Options struct {
	// StoreDir holds JetStream's files. Required.
	StoreDir string
	// Host and Port to listen on; Port 0 picks a free port, -1 does not listen
	// on TCP at all (in-process clients only).
	Host string
	Port int
	// ServerName names the server in logs and advisories.
	ServerName string
	// TLS, when set, makes every TCP client speak TLS (in-process clients need not).
	TLS *TLS
}

// TLS is the server's side of TLS: its certificate and key, and the authority that signs
// client certificates. With CA set a client must present a certificate it signed.
type TLS struct {
	CertFile, KeyFile string
	CAFile            string
}

// Server is a running embedded NATS server.
type Server struct {
	*server.Server
	tls bool
}

// Start starts a server and waits until it accepts connections.
func Start(opts Options) (*Server, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("start nats: StoreDir is required")
	}
	o := &server.Options{
		ServerName: opts.ServerName,
		Host:       opts.Host,
		Port:       opts.Port,
		JetStream:  true,
		StoreDir:   opts.StoreDir,
		NoSigs:     true,
		NoLog:      true,
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	switch opts.Port {
	case 0:
		o.Port = server.RANDOM_PORT
	case -1:
		o.DontListen = true
	}
	if o.ServerName == "" {
		o.ServerName = "flotilla"
	}
	if opts.TLS != nil {
		if err := withTLS(o, opts.TLS); err != nil {
			return nil, err
		}
	}
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("start nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("start nats: server not ready after 10s")
	}
	return &Server{Server: s, tls: opts.TLS != nil}, nil
}

func withTLS(o *server.Options, t *TLS) error {
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: t.CertFile, KeyFile: t.KeyFile, CaFile: t.CAFile, Verify: t.CAFile != "",
	})
	if err != nil {
		return fmt.Errorf("start nats: TLS: %w", err)
	}
	o.TLS, o.TLSConfig, o.TLSVerify = true, tc, t.CAFile != ""
	o.TLSTimeout = 5 // seconds; the default 0.5 is short for a busy test machine
	return nil
}

// URL is the client URL, e.g. nats://127.0.0.1:4222.
func (s *Server) URL() string { return s.ClientURL() }

// Connect opens a client connection to the server, in-process when the server
// does not listen on TCP or requires TLS (an in-process client needs no certificate:
// it is the process that runs the server).
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	url := s.ClientURL()
	if s.Server.Addr() == nil || s.tls {
		opts = append(opts, nats.InProcessServer(s.Server))
		// In process, the server does not ask for TLS; a tls:// URL would make the client.
		url = strings.Replace(url, "tls://", "nats://", 1)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to embedded nats: %w", err)
	}
	return nc, nil
}

// Stop shuts the server down and waits for it.
func (s *Server) Stop() {
	s.Shutdown()
	s.WaitForShutdown()
}
