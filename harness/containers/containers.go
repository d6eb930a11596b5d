// Package containers starts PostgreSQL and NATS in containers with testcontainers-go, for
// machines with a Docker engine where the local binaries are not wanted. It is opt-in:
// FLOTILLA_USE_DOCKER=1. Without it, tests use harness/postgres and harness/natsserver, which
// need no Docker.
package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// EnvUseDocker turns the container path on when set to 1.
const EnvUseDocker = "FLOTILLA_USE_DOCKER"

// Default images; pinned so that a test run means the same thing everywhere.
const (
	PostgresImage = "postgres:17-alpine"
	NATSImage     = "nats:2-alpine"
)

// Enabled reports whether the container path was asked for.
func Enabled() bool { return os.Getenv(EnvUseDocker) == "1" }

// Available checks that a Docker engine answers. testcontainers can panic when it finds no
// engine configuration at all; that becomes an error here.
func Available(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("no Docker engine: %v", r)
		}
	}()
	provider, err := testcontainers.ProviderDocker.GetProvider()
	if err != nil {
		return fmt.Errorf("no Docker engine: %w", err)
	}
	defer provider.Close()
	if err := provider.Health(ctx); err != nil {
		return fmt.Errorf("no Docker engine answers: %w", err)
	}
	return nil
}

// Container is a running container and the URL its service answers on.
type Container struct {
	// URL is a client URL: postgres://... or nats://...
	URL string
	c   testcontainers.Container
}

// Stop removes the container.
func (c *Container) Stop(ctx context.Context) error {
	if c == nil || c.c == nil {
		return nil
	}
	if err := testcontainers.TerminateContainer(c.c); err != nil {
		return fmt.Errorf("remove container: %w", err)
	}
	return nil
}

// StartPostgres starts a PostgreSQL container (image "" means PostgresImage) with trust
// authentication and durability off, and returns the URL of its postgres database.
func StartPostgres(ctx context.Context, image string) (*Container, error) {
	if image == "" {
		image = PostgresImage
	}
	c, err := testcontainers.Run(ctx, image,
		testcontainers.WithEnv(map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust"}),
		testcontainers.WithCmd("postgres", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"),
		testcontainers.WithExposedPorts("5432/tcp"),
		// The entrypoint starts the server twice (once to initialise, once for real).
		testcontainers.WithWaitStrategyAndDeadline(2*time.Minute,
			wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
			wait.ForListeningPort("5432/tcp")),
	)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start postgres container: %w", err), terminate(c))
	}
	endpoint, err := c.PortEndpoint(ctx, "5432/tcp", "")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("postgres container address: %w", err), terminate(c))
	}
	return &Container{URL: "postgres://postgres@" + endpoint + "/postgres?sslmode=disable", c: c}, nil
}

// StartNATS starts a NATS server container with JetStream (image "" means NATSImage) and
// returns its client URL.
func StartNATS(ctx context.Context, image string) (*Container, error) {
	if image == "" {
		image = NATSImage
	}
	c, err := testcontainers.Run(ctx, image,
		testcontainers.WithCmd("--jetstream", "--store_dir", "/data"),
		testcontainers.WithExposedPorts("4222/tcp"),
		testcontainers.WithWaitStrategyAndDeadline(time.Minute,
			wait.ForLog("Server is ready"),
			wait.ForListeningPort("4222/tcp")),
	)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("start nats container: %w", err), terminate(c))
	}
	endpoint, err := c.PortEndpoint(ctx, "4222/tcp", "nats")
	if err != nil {
		return nil, errors.Join(fmt.Errorf("nats container address: %w", err), terminate(c))
	}
	return &Container{URL: endpoint, c: c}, nil
}

func terminate(c *testcontainers.DockerContainer) error {
	if c == nil {
		return nil
	}
	return testcontainers.TerminateContainer(c)
}
