// Command rollout runs Flotilla's rollout service: the hub store, resource
// snapshots and rolling updates.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flotilla-dev/flotilla/services/rollout"
)

func main() {
	var cfg rollout.Config
	flag.StringVar(&cfg.NATSURL, "nats", envOr("FLOTILLA_NATS_URL", "nats://127.0.0.1:4222"), "NATS server URL")
	flag.StringVar(&cfg.DatabaseURL, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL connection string")
	flag.StringVar(&cfg.HealthAddr, "health-addr", ":8082", "address of /healthz and /readyz (empty: off)")
	flag.DurationVar(&cfg.SnapshotWindow, "snapshot-window", durationEnv("FLOTILLA_SNAPSHOT_WINDOW", rollout.DefaultSnapshotWindow),
		"how long hub changes are collected into one resource snapshot")
	flag.DurationVar(&cfg.StuckAfter, "stuck-after", durationEnv("FLOTILLA_STUCK_AFTER", rollout.DefaultStuckAfter),
		"how long a cluster may take to become applied and available before the rollout reports it stuck")
	flag.Parse()
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := rollout.Run(ctx, cfg); err != nil {
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

// durationEnv reads a duration default from the environment; a value that
// does not parse is reported and the built-in default kept.
func durationEnv(key string, def time.Duration) time.Duration {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ignoring %s=%q: %v\n", key, v, err)
		return def
	}
	return d
}
