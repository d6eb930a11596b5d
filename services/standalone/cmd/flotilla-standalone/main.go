// Command flotilla-standalone runs all of Flotilla in one process: an embedded NATS server
// with JetStream, PostgreSQL, the scheduler, rollout and status services, and an apply worker
// per member cluster. It is what `make run` starts:
//
//	flotilla-standalone --local-members 3 --example
//	flotilla-standalone --kubeconfig-dir ./kubeconfigs --database-url postgres://...
//
// State lives in --data-dir (default ./.flotilla); running again on it resumes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flotilla-dev/flotilla/platform/tracing"
	"github.com/flotilla-dev/flotilla/services/standalone"
)

func main() {
	var cfg standalone.Config
	cfg.RegisterFlags(flag.CommandLine)
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "flotilla-standalone takes no arguments, got %q; see -help\n", flag.Args())
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		// A second Ctrl-C ends the process at once; the servers it started die with it.
		stop()
	}()
	err := run(ctx, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

// run runs Flotilla with tracing set up (spans are exported only when an OTLP endpoint is
// configured: OTEL_EXPORTER_OTLP_ENDPOINT), and flushes the spans after.
func run(ctx context.Context, cfg standalone.Config) error {
	stopTracing, err := tracing.Start(ctx, "standalone")
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = stopTracing(sctx)
	}()
	return standalone.Run(ctx, cfg)
}
