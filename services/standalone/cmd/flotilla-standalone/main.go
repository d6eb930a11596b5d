// Command standalone runs all of Flotilla in one process: an embedded NATS server with
// JetStream, PostgreSQL, the scheduler, rollout and status services, and an apply worker per
// member cluster. It is what `make run` starts:
//
//	standalone --local-members 3 --example
//	standalone --kubeconfig-dir ./kubeconfigs --database-url postgres://...
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
	var logLevel string
	flag.StringVar(&cfg.DataDir, "data-dir", envOr("FLOTILLA_DATA_DIR", standalone.DefaultDataDir),
		"directory for everything that survives a restart (JetStream, PostgreSQL and member data, kubeconfigs, the log)")
	flag.StringVar(&cfg.NATSListen, "nats-listen", standalone.DefaultNATSListen, "host:port the embedded NATS server listens on (fleetctl's default is 127.0.0.1:4222)")
	flag.StringVar(&cfg.DatabaseURL, "database-url", os.Getenv("DATABASE_URL"),
		"PostgreSQL to use (default $DATABASE_URL); empty starts a local PostgreSQL in <data-dir>/postgres")
	flag.StringVar(&cfg.KubeconfigDir, "kubeconfig-dir", "", "run an apply worker for each <member>.kubeconfig file in this directory")
	flag.IntVar(&cfg.LocalMembers, "local-members", 0, "start this many member clusters here, member-1 ... member-N")
	flag.StringVar(&cfg.KubeBinDir, "kube-bin-dir", "", "directory with etcd, kube-apiserver, kube-controller-manager and kubectl (default $FLOTILLA_KUBE_BIN_DIR, then the make kube-bins cache)")
	flag.BoolVar(&cfg.SimulatedNodes, "simulated-nodes", true, "give each local member a node that reports its pods running, though no container runs (there is no kubelet), so that Deployments become available")
	flag.BoolVar(&cfg.Example, "example", false, "apply the quick-start example (deploy/examples/quickstart) and show its placement converge")
	flag.StringVar(&cfg.ExamplesDir, "examples-dir", "", "directory holding quickstart/ (default deploy/examples here or in a parent directory)")
	flag.StringVar(&logLevel, "log-level", "info", "level of the services' log in <data-dir>/flotilla.log: debug, info, warn or error")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "standalone takes no arguments, got %q; see -help\n", flag.Args())
		os.Exit(2)
	}
	if err := cfg.LogLevel.UnmarshalText([]byte(logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "--log-level: %v\n", err)
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

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
