package containers

import (
	"context"
	"os"
	"testing"
)

// Require skips the test where no Docker engine answers, saying so, except with CI=true,
// where it fails it: a CI machine without its engine must not pass by skipping.
func Require(t testing.TB) {
	t.Helper()
	if err := Available(t.Context()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %v: the container tests must run in CI", err)
		}
		t.Skipf("container tests need a Docker engine: %v", err)
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
