// Command apply runs Flotilla's apply workers: one per member cluster, each
// applying its cluster's placements and reporting back over NATS.
//
//	apply --nats nats://localhost:4222 --cluster member-1 --kubeconfig member-1.kubeconfig
//	apply --nats nats://localhost:4222 --kubeconfig-dir ./members
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/flotilla-dev/flotilla/services/apply/worker"
)

func main() {
	var opts worker.Options
	flag.StringVar(&opts.NATSURL, "nats", envOr("FLOTILLA_NATS_URL", envOr("NATS_URL", "nats://127.0.0.1:4222")), "NATS server URL (env FLOTILLA_NATS_URL)")
	flag.StringVar(&opts.NATSCredentials, "nats-creds", envOr("FLOTILLA_NATS_CREDS", os.Getenv("NATS_CREDS")), "NATS credentials file (optional; env FLOTILLA_NATS_CREDS)")
	flag.StringVar(&opts.HealthAddr, "health-addr", ":8081", "address of /healthz and /readyz (empty: off)")
	flag.StringVar(&opts.Cluster, "cluster", "", "member cluster name (with --kubeconfig)")
	flag.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig of the member (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	flag.StringVar(&opts.KubeconfigDir, "kubeconfig-dir", "", "run a worker per kubeconfig file in this directory, named after the file")
	flag.DurationVar(&opts.HeartbeatPeriod, "heartbeat-period", 0, "member heartbeat period (default 60s)")
	flag.DurationVar(&opts.ResyncPeriod, "resync-period", 0, "re-apply every placement this often (default 5m)")
	flag.IntVar(&opts.Placements, "placements", 0, "placements applied at once per member (default 4)")
	flag.Parse()

	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := worker.Run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "apply:", err)
		os.Exit(1)
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
