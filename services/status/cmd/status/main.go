// Command status runs Flotilla's status service: the audit log, the
// Fleet-shaped placement and member status, history in PostgreSQL, and the
// queries fleetctl asks over NATS.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/flotilla-dev/flotilla/services/status"
)

func main() {
	var cfg status.Config
	flag.StringVar(&cfg.NATSURL, "nats", envOr("FLOTILLA_NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL")
	flag.StringVar(&cfg.DatabaseURL, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL connection string")
	flag.StringVar(&cfg.HealthAddr, "health-addr", ":8084", "address of /healthz and /readyz (empty: off)")
	flag.Parse()
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := status.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
