package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/services/fleetctl/printer"
)

// defaultDeadLetterLimit bounds a listing unless --limit says otherwise.
const defaultDeadLetterLimit = 100

func (a *app) deadLettersCommand() *cobra.Command {
	var output, consumer string
	var limit int
	var after uint64
	cmd := &cobra.Command{
		Use:   "deadletters [--consumer NAME] [--limit N]",
		Short: "List the events consumers gave up on, with the reason; show and redrive them",
		Long: `Deadletters lists, oldest first, the messages a consumer gave up on: a message that is not a
valid event, an event its payload rules reject, or one whose handler failed for good (an outage
never puts an event here: consumers wait for the dependency instead). Each has an ID.

  fleetctl deadletters show ID      the dead letter with its event (Secret values redacted)
  fleetctl deadletters redrive ID   publish the event again, unchanged, once the cause is fixed

A redriven event keeps its id, so a consumer that handled it already does not handle it again.`,
		Example: `  fleetctl deadletters
  fleetctl deadletters --consumer rollout -o wide
  fleetctl deadletters -o jsonpath='{range [*]}{.id}{"\t"}{.reason}{"\n"}{end}'
  fleetctl deadletters show 12
  fleetctl deadletters redrive 12 13
  fleetctl deadletters redrive --all --consumer rollout`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := parseCheckedOutput(output)
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			if limit < 0 {
				return usageError(cmd, "--limit must be 0 (no limit) or more, not %d", limit)
			}
			return a.withJetStream(cmd.Context(), func(ctx context.Context, js jetstream.JetStream) error {
				dls, more, err := bus.ListDeadLetters(ctx, js, bus.DeadLetterQuery{Consumer: consumer, After: after, Limit: limit})
				if err != nil {
					return err
				}
				isTable := out.Format == printer.Table || out.Format == printer.Wide
				if len(dls) == 0 && isTable {
					fmt.Fprintln(a.err, "No dead letters found")
					return nil
				}
				if err := (printer.Printer{Output: out, Now: a.now}).DeadLetters(a.out, dls); err != nil {
					return err
				}
				if more > 0 {
					a.warn("%d more dead letters; list them with --after %d, or all with --limit 0", more, dls[len(dls)-1].ID)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&consumer, "consumer", "", "only the dead letters of this consumer (scheduler, rollout, status, apply-<member>)")
	cmd.Flags().IntVar(&limit, "limit", defaultDeadLetterLimit, "at most this many, the oldest (0: no limit)")
	cmd.Flags().Uint64Var(&after, "after", 0, "only dead letters with a higher ID, for the next page")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: "+printer.Formats)
	cmd.AddCommand(a.deadLetterShowCommand(), a.deadLetterRedriveCommand())
	return cmd
}

func (a *app) deadLetterShowCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show a dead letter: where it was, why it was given up on, and the event it holds",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseDeadLetterID(args[0])
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			out, err := parseCheckedOutput(output)
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			return a.withJetStream(cmd.Context(), func(ctx context.Context, js jetstream.JetStream) error {
				dl, err := bus.GetDeadLetter(ctx, js, id)
				if errors.Is(err, bus.ErrDeadLetterNotFound) {
					return fmt.Errorf("deadletter %d not found", id)
				}
				if err != nil {
					return err
				}
				return printer.Printer{Output: out, Now: a.now}.DeadLetter(a.out, dl)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: "+printer.Formats)
	return cmd
}

func (a *app) deadLetterRedriveCommand() *cobra.Command {
	var output, consumer string
	var all bool
	cmd := &cobra.Command{
		Use:   "redrive (ID... | --all [--consumer NAME])",
		Short: "Publish dead-lettered events again, unchanged, for their consumers to handle once",
		Long: `Redrive publishes each dead letter's event again on its subject, with its id and payload
unchanged, and removes the dead letter. Every consumer of the subject receives it; one that
handled the event already skips it (its inbox knows the id), and one that did not handles it
once. A consumer that fails again dead-letters it again, under a new ID. A work message that
newer desired state has replaced is not sent again (outcome superseded).`,
		Example: `  fleetctl deadletters redrive 12
  fleetctl deadletters redrive --all --consumer rollout -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) > 0) {
				return usageError(cmd, "name the dead letters to redrive by ID, or give --all")
			}
			if consumer != "" && !all {
				return usageError(cmd, "--consumer goes with --all")
			}
			ids := make([]uint64, 0, len(args))
			for _, arg := range args {
				id, err := parseDeadLetterID(arg)
				if err != nil {
					return usageError(cmd, "%v", err)
				}
				ids = append(ids, id)
			}
			out, err := parseCheckedOutput(output)
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			return a.withJetStream(cmd.Context(), func(ctx context.Context, js jetstream.JetStream) error {
				var done []bus.Redriven
				var err error
				if all {
					done, err = bus.RedriveAll(ctx, js, consumer)
				} else {
					done, err = redriveEach(ctx, js, ids)
				}
				isTable := out.Format == printer.Table || out.Format == printer.Wide
				if len(done) == 0 && isTable && err == nil {
					fmt.Fprintln(a.err, "No dead letters found")
					return nil
				}
				if perr := (printer.Printer{Output: out, Now: a.now}).Redriven(a.out, done); perr != nil {
					return perr
				}
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "redrive every dead letter (of --consumer, if given)")
	cmd.Flags().StringVar(&consumer, "consumer", "", "with --all: only this consumer's dead letters")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: "+printer.Formats)
	return cmd
}

// redriveEach redrives ids in order, going on past failures, which it reports together.
func redriveEach(ctx context.Context, js jetstream.JetStream, ids []uint64) ([]bus.Redriven, error) {
	var done []bus.Redriven
	var errs []error
	for _, id := range ids {
		r, err := bus.Redrive(ctx, js, id)
		if errors.Is(err, bus.ErrDeadLetterNotFound) {
			err = fmt.Errorf("deadletter %d not found", id)
		}
		if r != nil {
			done = append(done, *r)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return done, errors.Join(errs...)
}

func parseDeadLetterID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%q is not a dead-letter ID (a positive number, as fleetctl deadletters lists)", s)
	}
	return id, nil
}

// parseCheckedOutput parses -o and checks a jsonpath template before anything is asked.
func parseCheckedOutput(s string) (printer.Output, error) {
	out, err := printer.ParseOutput(s)
	if err != nil {
		return out, err
	}
	return out, out.Check()
}

// withJetStream connects to NATS and runs f with JetStream.
func (a *app) withJetStream(ctx context.Context, f func(context.Context, jetstream.JetStream) error) error {
	nc, err := a.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := a.jetStream(ctx, nc)
	if err != nil {
		return err
	}
	return f(ctx, js)
}
