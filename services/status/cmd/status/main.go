// Command status runs Flotilla's status service: placement status, history,
// the audit log and the queries fleetctl asks.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/status"
)

func main() {
	var f service.Flags
	f.Register(flag.CommandLine, ":8081")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "status:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, f service.Flags) error {
	if f.MigrateOnly {
		return service.Migrate(ctx, f.DatabaseURL)
	}
	cfg := status.Config{NATSURL: f.NATSURL, DatabaseURL: f.DatabaseURL, HealthAddr: f.HealthAddr, Logger: f.Logger()}
	cfg.Topology.Replicas = f.StreamReplicas
	return status.Run(ctx, cfg)
}
