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
	return cli.Run(ctx, append([]string{"--nats", r.natsURL}, args...), cli.Options{
		In:     strings.NewReader(""),
		Out:    w,
		Err:    w,
		Getenv: func(string) string { return "" }, // nothing from the environment: this server only
	})
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
