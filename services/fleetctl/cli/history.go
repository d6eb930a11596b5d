package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/printer"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
)

// parseReportOutput parses a -o limited to table, wide, yaml and json.
func parseReportOutput(s string) (printer.Output, error) {
	out, err := printer.ParseOutput(s)
	if err != nil {
		return out, err
	}
	switch out.Format {
	case printer.Table, printer.Wide, printer.YAML, printer.JSON:
		return out, nil
	}
	return out, fmt.Errorf("output format %q is not available here; use table, wide, yaml or json", s)
}

func (a *app) historyCommand() *cobra.Command {
	var output, namespace string
	var skipRuns int
	cmd := &cobra.Command{
		Use:   "history (crp NAME | rp NAME [-n NS])",
		Short: "Show a placement's revisions, scheduling decisions and status transitions",
		Long: `History shows, oldest first, a placement's resource snapshots (revisions: index, content
hash, selected objects), its scheduling decisions (cluster, action, scores, reason) and the
transitions of its conditions, as the status service recorded them. An External
placement's staged update runs come a page at a time, the newest (at most 1,000, fewer
when they update many clusters): the history says how many older runs it left out, and
--skip-runs N shows the page after the newest N.`,
		Example: `  fleetctl history crp web-2-crp
  fleetctl history crp web-2-crp -o yaml
  fleetctl history crp web-2-crp --skip-runs 1000
  fleetctl history rp app-config -n team-a`,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, names, err := parseTarget(args)
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			if r != placements && r != resourcePlacements {
				return usageError(cmd, "history is kept for placements only: fleetctl history crp NAME, or history rp NAME -n NAMESPACE")
			}
			if len(names) != 1 {
				return usageError(cmd, "name exactly one placement")
			}
			out, err := parseReportOutput(output)
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			if skipRuns < 0 {
				return usageError(cmd, "--skip-runs must be 0 or more, not %d", skipRuns)
			}
			nc, err := a.connect()
			if err != nil {
				return err
			}
			defer nc.Close()
			key := names[0]
			if r == resourcePlacements {
				key = api.PlacementKey(namespace, key)
			}
			h, err := a.queryClient(nc).History(cmd.Context(), events.HistoryQuery{Name: key, SkipRuns: skipRuns})
			if errors.Is(err, query.ErrNotFound) {
				return notFound(r, names[0])
			}
			if err != nil {
				return err
			}
			return printer.Printer{Output: out, Now: a.now}.History(a.out, h)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: table, wide (full hashes), yaml or json")
	cmd.Flags().IntVar(&skipRuns, "skip-runs", 0, "leave out the newest N staged update runs, to page back through them")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the resourceplacement")
	return cmd
}

func (a *app) takeoversCommand() *cobra.Command {
	var output, placement string
	var limit int
	cmd := &cobra.Command{
		Use:   "takeovers [--placement NAME]",
		Short: "Show takeover decisions: objects found on members and what Flotilla did with them",
		Long: `Takeovers lists the decisions apply workers made about objects that already existed on a
member: taken over, or refused (NotTakenOver with whenToTakeOver Never, FailedToTakeOver with
the fields that differ), with the mode, the comparison option and the time.`,
		Example: `  fleetctl takeovers
  fleetctl takeovers --placement web-2-crp -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := parseReportOutput(output)
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			if limit < 0 {
				return usageError(cmd, "--limit must be 0 (no limit) or more, not %d", limit)
			}
			return a.takeovers(cmd.Context(), out, events.TakeoverQuery{Placement: placement, Limit: limit})
		},
	}
	cmd.Flags().StringVar(&placement, "placement", "", "only the decisions of this placement")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many decisions, the newest (0: no limit)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: table, yaml or json")
	return cmd
}

func (a *app) takeovers(ctx context.Context, out printer.Output, q events.TakeoverQuery) error {
	nc, err := a.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	records, err := a.queryClient(nc).Takeovers(ctx, q)
	if err != nil {
		return err
	}
	p := printer.Printer{Output: out, Now: a.now}
	if len(records) == 0 && (out.Format == printer.Table || out.Format == printer.Wide) {
		fmt.Fprintln(a.err, "No takeover decisions found")
		return nil
	}
	return p.Takeovers(a.out, records)
}
