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
	err := standalone.Run(ctx, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
