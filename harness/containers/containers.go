// Package containers starts PostgreSQL and NATS in containers with testcontainers-go, on a
// Docker engine that needs no registry: the images are the ones make images builds here
// (hack/images.sh), or others named by FLOTILLA_POSTGRES_IMAGE and FLOTILLA_NATS_IMAGE. Its
// own tests run wherever a Docker engine answers. FLOTILLA_USE_DOCKER=1 make test also runs
// the integration suites' PostgreSQL in a container (hack/docker-test.sh); without it they use
// harness/postgres and harness/natsserver, which need no Docker.
package containers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// EnvUseDocker set to 1 runs the integration suites on containers (see hack/docker-test.sh).
const EnvUseDocker = "FLOTILLA_USE_DOCKER"

// The variables naming the images; docker-compose.yaml reads the same ones.
const (
	EnvPostgresImage = "FLOTILLA_POSTGRES_IMAGE"
	EnvNATSImage     = "FLOTILLA_NATS_IMAGE"
)

// The public images, used when neither the variables nor a local build name others.
const (
	PostgresImage = "postgres:17-alpine"
	NATSImage     = "nats:2-alpine"
)

// Image is the image to run for env (EnvPostgresImage or EnvNATSImage): the variable, else
// what make images last built (~/.cache/flotilla/images/compose.env), else fallback.
func Image(env, fallback string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	if v := builtImages()[env]; v != "" {
		return v
	}
	return fallback
}

// builtImages reads the image names hack/images.sh wrote into the cache.
func builtImages() map[string]string {
	cache := os.Getenv("FLOTILLA_CACHE")
	if cache == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return nil
		}
		cache = filepath.Join(base, "flotilla")
	}
	f, err := os.Open(filepath.Join(cache, "images", "compose.env"))
	if err != nil {
		return nil
	}
	defer f.Close()
	names := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			names[k] = v
		}
	}
	return names
}

// Available checks that a Docker engine answers. testcontainers can panic when it finds no
// engine configuration at all; that becomes an error here.
func Available(ctx context.Context) (err error) {
	configure()
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

// configure sets what testcontainers needs here, unless the caller chose otherwise:
//   - no reaper (Ryuk): its image would have to be pulled, and every container here is removed
//     by Stop or the test's cleanup;
//   - published ports on 127.0.0.1 when the engine's bridge (docker0) is in this network
//     namespace: testcontainers otherwise takes a machine that is itself a container (has
//     /.dockerenv) for one started by that engine, and dials the default gateway instead.
func configure() {
	if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	if _, set := os.LookupEnv("TESTCONTAINERS_HOST_OVERRIDE"); !set {
		if _, err := net.InterfaceByName("docker0"); err == nil {
			os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
		}
	}
}

// StartPostgres starts a PostgreSQL container (image "" means Image(EnvPostgresImage, ...)) with trust
// authentication and durability off, and returns the URL of its postgres database.
func StartPostgres(ctx context.Context, image string) (*Container, error) {
	configure()
	if image == "" {
		image = Image(EnvPostgresImage, PostgresImage)
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

// StartNATS starts a NATS server container with JetStream (image "" means
// Image(EnvNATSImage, ...)) and
// returns its client URL.
func StartNATS(ctx context.Context, image string) (*Container, error) {
	configure()
	if image == "" {
		image = Image(EnvNATSImage, NATSImage)
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
