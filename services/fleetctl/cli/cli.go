// Package cli holds fleetctl's commands: apply, get, describe, delete,
// history, takeovers, deadletters and wait. Run is the whole program; main only wires the
// process to it.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/platform/natsconn"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
)

// Environment variables fleetctl reads (package natsconn has the others).
const (
	EnvNATSURL   = natsconn.EnvURL
	EnvNATSCreds = natsconn.EnvCredentials
)

// Options connect Run to its process.
type Options struct {
	In       io.Reader
	Out, Err io.Writer
	// Getenv reads the environment; os.Getenv when nil.
	Getenv func(string) string
	// Now is the clock of ages in tables; time.Now when nil.
	Now func() time.Time
}

// app is one run of fleetctl: its streams and its global flags.
type app struct {
	in       io.Reader
	out, err io.Writer
	now      func() time.Time

	nats           natsconn.Settings
	requestTimeout time.Duration
	// getenv reads the environment (flags' defaults).
	getenv func(string) string
}

// Run runs fleetctl with args (without the program name). Errors are
// returned, not printed, except that problems found in input files are
// printed one per line first; the caller prints the error and exits non-zero.
func Run(ctx context.Context, args []string, opts Options) error {
	a := &app{in: opts.In, out: opts.Out, err: opts.Err, now: opts.Now}
	if a.in == nil {
		a.in = os.Stdin
	}
	if a.out == nil {
		a.out = os.Stdout
	}
	if a.err == nil {
		a.err = os.Stderr
	}
	if a.now == nil {
		a.now = time.Now
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	a.getenv = getenv
	root := a.rootCommand(getenv)
	root.SetArgs(args)
	root.SetIn(a.in)
	root.SetOut(a.out)
	root.SetErr(a.err)
	return root.ExecuteContext(ctx)
}

func (a *app) rootCommand(getenv func(string) string) *cobra.Command {
	root := &cobra.Command{
		Use:   "fleetctl",
		Short: "fleetctl controls Flotilla, the multi-cluster placement engine",
		Long: `fleetctl controls Flotilla, the multi-cluster placement engine that speaks Fleet's API.

Apply ClusterResourcePlacements, MemberClusters, KubeAdmiral PropagationPolicies and any
Kubernetes manifest for the hub, then watch placements converge:

  fleetctl apply -f web-2-crp.yaml
  fleetctl get crp web-2-crp -o jsonpath='{.status.placementStatuses}'
  fleetctl wait crp web-2-crp --for=condition=Applied --timeout=2m`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without a subcommand, print help rather than nothing.
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	natsFlags := flag.NewFlagSet("nats", flag.ContinueOnError)
	a.nats.Register(natsFlags, getenv)
	pf.AddGoFlagSet(natsFlags)
	pf.DurationVar(&a.requestTimeout, "request-timeout", query.DefaultTimeout, "how long to wait for each answer from NATS, and for each message of the status service's replies")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w\nSee '%s --help' for usage", err, cmd.CommandPath())
	})
	root.AddCommand(
		a.applyCommand(),
		a.getCommand(),
		a.describeCommand(),
		a.deleteCommand(),
		a.approveCommand(),
		a.drainCommand(),
		a.uncordonCommand(),
		a.historyCommand(),
		a.takeoversCommand(),
		a.deadLettersCommand(),
		a.waitCommand(),
	)
	return root
}

// usageError is an error in the arguments of cmd, pointing to its help.
func usageError(cmd *cobra.Command, format string, args ...any) error {
	return fmt.Errorf("%s\nSee '%s --help' for usage", fmt.Sprintf(format, args...), cmd.CommandPath())
}

// fleetctlInbox is fleetctl's inbox prefix (bus.InboxPrefix("fleetctl")).
const fleetctlInbox = bus.InboxRoot + ".fleetctl"

// connect opens a NATS connection, or says how to get one.
func (a *app) connect() (*nats.Conn, error) {
	if err := a.nats.Validate(); err != nil {
		return nil, err
	}
	// Replies come back under fleetctl's own inbox prefix, not the one every client shares.
	opts := append([]nats.Option{nats.Name("fleetctl"), nats.Timeout(a.requestTimeout), nats.CustomInboxPrefix(fleetctlInbox)},
		a.nats.Options()...)
	nc, err := nats.Connect(a.nats.URL, opts...)
	if err != nil {
		hint := fmt.Sprintf("start Flotilla with `make run` (or the standalone binary), or point fleetctl at your NATS server with --nats URL or %s", EnvNATSURL)
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) {
			hint = fmt.Sprintf("check the credentials given with --nats-creds or %s", EnvNATSCreds)
		}
		return nil, fmt.Errorf("cannot reach NATS at %s (%v): %s", a.nats.Redacted(), err, hint)
	}
	return nc, nil
}

// jetStream opens JetStream on nc, or says that the server lacks it.
func (a *app) jetStream(ctx context.Context, nc *nats.Conn) (jetstream.JetStream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("open JetStream on %s: %w", a.nats.Redacted(), err)
	}
	ctx, cancel := context.WithTimeout(ctx, a.requestTimeout)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return nil, fmt.Errorf("the NATS server at %s has no JetStream; Flotilla needs a server started with JetStream (nats-server -js), as `make run` starts", a.nats.Redacted())
		}
		return nil, fmt.Errorf("JetStream on %s: %w", a.nats.Redacted(), err)
	}
	return js, nil
}

func (a *app) queryClient(nc *nats.Conn) *query.Client {
	q := query.New(nc)
	q.Timeout = a.requestTimeout
	return q
}

// warn prints a warning as kubectl does.
func (a *app) warn(format string, args ...any) {
	fmt.Fprintf(a.err, "Warning: "+format+"\n", args...)
}
