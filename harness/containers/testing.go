package containers

import (
	"context"
	"testing"
)

// Require skips the test, saying how to enable it, unless FLOTILLA_USE_DOCKER=1; and fails it
// when that is set but no Docker engine answers (asking for Docker and silently not getting it
// would hide a broken CI machine).
func Require(t testing.TB) {
	t.Helper()
	if !Enabled() {
		t.Skipf("container tests are opt-in: set %s=1 on a machine with a Docker engine "+
			"(without it, tests use the local PostgreSQL binaries and the embedded NATS server)", EnvUseDocker)
	}
	if err := Available(t.Context()); err != nil {
		t.Fatalf("%s=1 but %v", EnvUseDocker, err)
	}
}

// PostgresT starts a PostgreSQL container for the test and returns its URL; see Require.
func PostgresT(t testing.TB) string { return startT(t, "PostgreSQL", StartPostgres) }

// NATST starts a NATS container with JetStream for the test and returns its URL; see Require.
func NATST(t testing.TB) string { return startT(t, "NATS", StartNATS) }

// startT starts a container of the default image with start, removing it when the test ends.
func startT(t testing.TB, what string, start func(ctx context.Context, image string) (*Container, error)) string {
	t.Helper()
	Require(t)
	c, err := start(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(context.Background()); err != nil {
			t.Log(err)
		}
	})
	t.Logf("%s container at %s", what, c.URL)
	return c.URL
}
