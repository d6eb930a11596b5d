// Command apply runs Flotilla's apply workers: one per member cluster, each
// applying its cluster's placements and reporting back over NATS.
//
//	apply --nats nats://localhost:4222 --cluster member-1 --kubeconfig member-1.kubeconfig
//	apply --nats nats://localhost:4222 --kubeconfig-dir ./members
package main

import (
	"context"

	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/apply/worker"
)

func main() {
	opts := worker.Options{Options: service.Options{Role: service.Member}}
	service.Main("apply", &opts, func(ctx context.Context) error { return worker.Run(ctx, opts) })
}
