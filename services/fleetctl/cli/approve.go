package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
	"github.com/flotilla-dev/flotilla/services/fleetctl/submit"
)

func (a *app) approveCommand() *cobra.Command {
	var message string
	cmd := &cobra.Command{
		Use:   "approve clusterapprovalrequest NAME",
		Short: "Approve a stage of a staged update run",
		Long: `Approve sets the condition Approved of a ClusterApprovalRequest, as kubectl fleet approve
does: the run waiting for it (before a stage starts, or after it ends) goes on. A run names
its requests <run>-before-<stage> and <run>-after-<stage>; list them with
fleetctl get clusterapprovalrequests. Approving twice changes nothing.`,
		Example: `  fleetctl approve clusterapprovalrequest web-rollout-before-production
  fleetctl approve careq/web-rollout-after-staging`,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, names, err := parseTarget(args)
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			if r != approvalRequests {
				return usageError(cmd, "approve takes clusterapprovalrequests (careq), not %s", r.display())
			}
			if len(names) == 0 {
				return usageError(cmd, "name the clusterapprovalrequest to approve")
			}
			return a.approve(cmd.Context(), names, message)
		},
	}
	cmd.Flags().StringVar(&message, "message", "approved with fleetctl", "the message of the Approved condition")
	return cmd
}

// approve approves each request that exists; a missing one is reported as
// kubectl does and approves nothing.
func (a *app) approve(ctx context.Context, names []string, message string) error {
	nc, err := a.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	q := a.queryClient(nc)
	var (
		changes  []change.Change
		approved []string
		missing  []error
	)
	for _, n := range names {
		_, err := q.ApprovalRequest(ctx, n)
		switch {
		case errors.Is(err, query.ErrNotFound):
			missing = append(missing, notFound(approvalRequests, n))
			continue
		case err != nil:
			return err
		}
		c, err := change.ApprovalRequestApproved(n, message)
		if err != nil {
			return fmt.Errorf("approve %s: %w", n, err)
		}
		changes, approved = append(changes, c), append(approved, n)
	}
	if len(changes) > 0 {
		pub, err := a.publisher(ctx, nc)
		if err != nil {
			return err
		}
		outcomes, err := pub.PublishAll(ctx, changes)
		if err != nil {
			return err
		}
		for i, o := range outcomes {
			verb := "approved"
			if o == submit.Unchanged {
				verb = "approved (unchanged)"
			}
			fmt.Fprintf(a.out, "%s/%s %s\n", approvalRequests.display(), approved[i], verb)
		}
	}
	return errors.Join(missing...)
}
