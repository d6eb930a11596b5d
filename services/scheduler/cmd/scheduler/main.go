// Command scheduler runs Flotilla's scheduler service.
package main

import (
	"context"

	"github.com/flotilla-dev/flotilla/platform/service"
	"github.com/flotilla-dev/flotilla/services/scheduler"
)

func main() {
	var cfg scheduler.Config
	service.Main("scheduler", &cfg, func(ctx context.Context) error { return scheduler.Run(ctx, cfg) })
}
