// Command status runs Flotilla's status service: placement status, history,
// the audit log and the queries fleetctl asks.
package main

import (
	"context"

	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/status"
)

func main() {
	var cfg status.Config
	service.Main("status", &cfg, func(ctx context.Context) error { return status.Run(ctx, cfg) })
}
