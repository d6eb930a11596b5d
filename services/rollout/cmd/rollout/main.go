// Command rollout runs Flotilla's rollout service: the hub store, resource
// snapshots and rolling updates.
package main

import (
	"context"

	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/rollout"
)

func main() {
	var cfg rollout.Config
	service.Main("rollout", &cfg, func(ctx context.Context) error { return rollout.Run(ctx, cfg) })
}
