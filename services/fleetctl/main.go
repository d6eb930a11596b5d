// Command fleetctl is Flotilla's command-line client: it publishes
// placements, member clusters and hub manifests, and queries placement status.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/tracing"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// What fleetctl publishes starts a trace the services carry on to every member's
	// apply; its spans are exported when OTEL_EXPORTER_OTLP_ENDPOINT is set.
	stopTracing, err := tracing.Start(ctx, "fleetctl")
	if err == nil {
		name := "fleetctl"
		if len(os.Args) > 1 {
			name += " " + os.Args[1]
		}
		tctx, span := bus.StartTrace(ctx, name)
		err = cli.Run(tctx, os.Args[1:], cli.Options{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
		span.End()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = stopTracing(sctx)
		cancel()
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
