package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
	"github.com/flotilla-dev/flotilla/services/fleetctl/submit"
)

func (a *app) approveCommand() *cobra.Command {
	var message, namespace string
	cmd := &cobra.Command{
		Use:   "approve (clusterapprovalrequest NAME | approvalrequest NAME -n NS)",
		Short: "Approve a stage of a staged update run",
		Long: `Approve sets the condition Approved of a ClusterApprovalRequest, as kubectl fleet approve
does: the run waiting for it (before a stage starts, or after it ends) goes on. A run names
its requests <run>-before-<stage> and <run>-after-<stage>; list them with
fleetctl get clusterapprovalrequests. A StagedUpdateRun of a ResourcePlacement makes
namespaced ApprovalRequests (areq) of the same names in its namespace. Approving twice
changes nothing.`,
		Example: `  fleetctl approve clusterapprovalrequest web-rollout-before-production
  fleetctl approve careq/web-rollout-after-staging
  fleetctl approve areq app-rollout-after-staging -n team-a`,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, names, err := parseTarget(args)
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			if r != approvalRequests && r != nsApprovals {
				return usageError(cmd, "approve takes clusterapprovalrequests (careq) or approvalrequests (areq), not %s", r.display())
			}
			if len(names) == 0 {
				return usageError(cmd, "name the %s to approve", r.display())
			}
			if r == approvalRequests {
				namespace = ""
			}
			return a.approve(cmd.Context(), r, namespace, names, message)
		},
	}
	cmd.Flags().StringVar(&message, "message", "approved with fleetctl", "the message of the Approved condition")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the approvalrequests")
	return cmd
}

// approve approves each request that exists; a missing one is reported as
// kubectl does and approves nothing.
func (a *app) approve(ctx context.Context, r resource, namespace string, names []string, message string) error {
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
		key := api.PlacementKey(namespace, n) // the name, for a ClusterApprovalRequest
		_, err := q.ApprovalRequest(ctx, key)
		switch {
		case errors.Is(err, query.ErrNotFound):
			missing = append(missing, notFound(r, n))
			continue
		case err != nil:
			return err
		}
		c, err := change.ApprovalRequestApproved(key, message)
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
			fmt.Fprintf(a.out, "%s/%s %s\n", r.display(), approved[i], verb)
		}
	}
	return errors.Join(missing...)
}
