package service

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flotilla-dev/flotilla/platform/tracing"
)

// Config is a service's configuration: the shared Options, embedded, and its own fields.
// Validate checks the whole of it (a Config with fields of its own overrides Options'
// Validate and calls it). A Config may also have RegisterFlags(*flag.FlagSet) for its own
// flags.
type Config interface {
	Shared() *Options
	Validate() error
}

// Shared returns o; a Config gets it by embedding Options.
func (o *Options) Shared() *Options { return o }

type flagger interface{ RegisterFlags(*flag.FlagSet) }

// Main is the whole of a service command's main: it fills cfg from the command line and
// the environment, validates it, and calls run with a context that ends on SIGINT or
// SIGTERM. --migrate-only migrates the database instead. A bad command line exits with
// status 2, a failure with 1, each with the error on stderr.
func Main(name string, cfg Config, run func(ctx context.Context) error) {
	os.Exit(runMain(name, cfg, run, os.Args[1:]))
}

func runMain(name string, cfg Config, run func(ctx context.Context) error, args []string) int {
	opts := cfg.Shared()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	opts.Register(fs)
	if f, ok := cfg.(flagger); ok {
		f.RegisterFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s takes no arguments, got %q; see -help\n", name, fs.Args())
		return 2
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 2
	}
	if opts.Logger == nil {
		opts.Logger = opts.NewLogger()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if opts.MigrateOnly {
		err = Migrate(ctx, opts.DatabaseURL)
	} else {
		err = runTraced(ctx, name, run)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	return 0
}

// runTraced runs run with tracing set up (package tracing: spans are exported
// only when an OTLP endpoint is configured), and flushes the spans after.
func runTraced(ctx context.Context, name string, run func(ctx context.Context) error) error {
	stop, err := tracing.Start(ctx, name)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = stop(sctx)
	}()
	return run(ctx)
}
