// Command scheduler runs Flotilla's scheduler service.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/scheduler"
)

func main() {
	var f service.Flags
	f.Register(flag.CommandLine, ":8081")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f); err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, f service.Flags) error {
	if f.MigrateOnly {
		return service.Migrate(ctx, f.DatabaseURL)
	}
	cfg := scheduler.Config{NATSURL: f.NATSURL, DatabaseURL: f.DatabaseURL, HealthAddr: f.HealthAddr, Logger: f.Logger()}
	cfg.Topology.Replicas = f.StreamReplicas
	return scheduler.Run(ctx, cfg)
}
