// Package natsserver runs an embedded NATS server with JetStream, for tests and
// for the single-process quick start.
package natsserver

import (
	"errors"
	"fmt"
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
}

// Server is a running embedded NATS server.
type Server struct {
	*server.Server
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
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("start nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("start nats: server not ready after 10s")
	}
	return &Server{s}, nil
}

// URL is the client URL, e.g. nats://127.0.0.1:4222.
func (s *Server) URL() string { return s.ClientURL() }

// Connect opens a client connection to the server, in-process when the server
// does not listen on TCP.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	if s.Server.Addr() == nil {
		opts = append(opts, nats.InProcessServer(s.Server))
	}
	nc, err := nats.Connect(s.ClientURL(), opts...)
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
