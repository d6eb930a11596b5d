// Command hubsync runs Flotilla's hub connector: kubectl and GitOps tools apply Fleet's
// objects to a real Kubernetes API server (the hub), and hubsync puts them on the bus and
// writes their status back.
package main

import (
	"context"

	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/hubsync"
)

func main() {
	cfg := hubsync.Config{Options: service.Options{Role: service.Connector}, OwnProcess: true}
	service.Main("hubsync", &cfg, func(ctx context.Context) error { return hubsync.Run(ctx, cfg) })
}
