package natsserver

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// StartT starts a server for a test on a random port, with JetStream in a
// temporary directory, and stops it when the test ends. It returns the server
// and a connected client.
func StartT(t testing.TB) (*Server, *nats.Conn) {
	t.Helper()
	s, err := Start(Options{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("embedded NATS server with JetStream at %s", s.URL())
	nc, err := s.Connect()
	if err != nil {
		s.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		nc.Close()
		s.Stop()
	})
	return s, nc
}
