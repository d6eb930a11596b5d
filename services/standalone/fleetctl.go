package standalone

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
)

// fleetctl runs a fleetctl command against this process's NATS server, printing its output
// as progress: the standalone process publishes what it applies exactly as fleetctl does.
func (r *runner) fleetctl(ctx context.Context, args ...string) error {
	w := r.out.writer()
	return cli.Run(ctx, append(r.fleetctlNATSFlags(), args...), cli.Options{
		In:     strings.NewReader(""),
		Out:    w,
		Err:    w,
		Getenv: func(string) string { return "" }, // nothing from the environment: this server only
	})
}

// fleetctlNATSFlags are fleetctl's flags that reach this process's NATS server.
func (r *runner) fleetctlNATSFlags() []string {
	flags := []string{"--nats", r.natsURL}
	if r.tls != nil {
		flags = append(flags, "--nats-ca", r.tls.CA, "--nats-cert", r.tls.Cert, "--nats-key", r.tls.Key)
	}
	return flags
}

var errNotFound = query.ErrNotFound

// queries asks the status service, as fleetctl get does.
type queries struct {
	client *query.Client
}

func newQueries(nc *nats.Conn) *queries {
	return &queries{client: query.New(nc)}
}

// waitForStatusService waits until the status service answers queries.
func (q *queries) waitForStatusService(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var last error
	for {
		if _, last = q.client.Members(ctx, ""); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(last, query.ErrNoStatusService) {
				return fmt.Errorf("the status service did not start: %w", last)
			}
			return fmt.Errorf("the status service does not answer: %w", last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
