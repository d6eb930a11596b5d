// Command rollout runs Flotilla's rollout service: the hub store, resource
// snapshots and rolling updates.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/rollout"
)

func main() {
	var f service.Flags
	f.Register(flag.CommandLine, ":8081")
	var cfg rollout.Config
	flag.DurationVar(&cfg.SnapshotWindow, "snapshot-window", durationEnv("FLOTILLA_SNAPSHOT_WINDOW", rollout.DefaultSnapshotWindow),
		"evaluate a placement's selection once hub changes pause this long (one snapshot per burst)")
	flag.DurationVar(&cfg.SnapshotMaxWait, "snapshot-max-wait", durationEnv("FLOTILLA_SNAPSHOT_MAX_WAIT", rollout.DefaultSnapshotMaxWait),
		"evaluate it at most this long after a burst began, even if changes keep coming")
	flag.DurationVar(&cfg.StuckAfter, "stuck-after", durationEnv("FLOTILLA_STUCK_AFTER", rollout.DefaultStuckAfter),
		"how long a cluster may take to become applied and available before the rollout reports it stuck")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, f, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "rollout:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, f service.Flags, cfg rollout.Config) error {
	if f.MigrateOnly {
		return service.Migrate(ctx, f.DatabaseURL)
	}
	cfg.NATSURL, cfg.DatabaseURL, cfg.HealthAddr, cfg.Logger = f.NATSURL, f.DatabaseURL, f.HealthAddr, f.Logger()
	cfg.Topology.Replicas = f.StreamReplicas
	return rollout.Run(ctx, cfg)
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
