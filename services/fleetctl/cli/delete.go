package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
	"github.com/flotilla-dev/flotilla/services/fleetctl/input"
)

func (a *app) deleteCommand() *cobra.Command {
	var files fileFlags
	var leave string
	cmd := &cobra.Command{
		Use:   "delete (-f FILENAME | crp NAME... | rp NAME... [-n NS] | member NAME... | cro NAME... | ro NAME... [-n NS])",
		Short: "Delete placements or overrides, remove member clusters, or take manifests out of the hub store",
		Long: `Delete publishes the deletion of the named objects:

  a ClusterResourcePlacement, or a ResourcePlacement (of the namespace -n), is deleted, and its
  objects removed from members per its deleteStrategy;
  a MemberCluster leaves the fleet (--leave-policy Keep leaves placed objects running on it,
  Delete removes what Flotilla placed there);
  a KubeAdmiral policy's two placements are deleted;
  a ClusterResourceOverride or ResourceOverride (of the namespace -n) is deleted, and the placements
  it concerned roll out without it;
  any other manifest given with -f is removed from the hub store.`,
		Example: `  fleetctl delete crp web-2-crp
  fleetctl delete member member-3 --leave-policy Delete
  fleetctl delete -f web-2-crp.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			lp := events.LeavePolicy(leave)
			switch lp {
			case "", events.LeaveKeep, events.LeaveDelete:
			default:
				return usageError(cmd, "--leave-policy must be Keep or Delete, not %q", leave)
			}
			if len(files.files) > 0 {
				if len(args) > 0 {
					return usageError(cmd, "give either -f or a resource type and names, not both")
				}
				return a.deleteFiles(cmd.Context(), files, lp)
			}
			r, names, err := parseTarget(args)
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			if len(names) == 0 {
				return usageError(cmd, "name the %s to delete", r.display())
			}
			return a.deleteNames(cmd.Context(), r, names, files.namespace, lp)
		},
	}
	files.add(cmd, "delete")
	cmd.Flags().StringVar(&leave, "leave-policy", "", "what a leaving member keeps: Keep (placed objects stay, as upstream Fleet) or Delete")
	return cmd
}

func (a *app) deleteNames(ctx context.Context, r resource, names []string, namespace string, leave events.LeavePolicy) error {
	items := make([]change.Item, 0, len(names))
	for _, n := range names {
		var c change.Change
		var err error
		switch r {
		case members:
			c, err = change.MemberLeft(n, leave)
		case clusterOverrides:
			c, err = change.OverrideDeleted(api.OverrideKey{Kind: api.ClusterResourceOverrideKind, Name: n})
		case resourceOverrides:
			c, err = change.OverrideDeleted(api.OverrideKey{Kind: api.ResourceOverrideKind, Namespace: namespace, Name: n})
		case stagedStrategies:
			c, err = change.StagedUpdateDeleted(events.StagedUpdateKey{Kind: api.ClusterStagedUpdateStrategyKind, Name: n})
		case stagedRuns:
			c, err = change.StagedUpdateDeleted(events.StagedUpdateKey{Kind: api.ClusterStagedUpdateRunKind, Name: n})
		case nsStrategies:
			c, err = change.StagedUpdateDeleted(events.StagedUpdateKey{Kind: api.ClusterStagedUpdateStrategyKind, Name: api.PlacementKey(namespace, n)})
		case nsRuns:
			c, err = change.StagedUpdateDeleted(events.StagedUpdateKey{Kind: api.ClusterStagedUpdateRunKind, Name: api.PlacementKey(namespace, n)})
		case evictions:
			c, err = change.DisruptionDeleted(events.DisruptionKey{Kind: api.ClusterResourcePlacementEvictionKind, Name: n})
		case disruptionBudgets:
			c, err = change.DisruptionDeleted(events.DisruptionKey{Kind: api.ClusterResourcePlacementDisruptionBudgetKind, Name: n})
		case approvalRequests:
			return fmt.Errorf("a clusterapprovalrequest goes with its run: delete the clusterstagedupdaterun")
		case nsApprovals:
			return fmt.Errorf("an approvalrequest goes with its run: delete the stagedupdaterun")
		case placements:
			c, err = change.PlacementDeleted(n)
		case resourcePlacements:
			c, err = change.PlacementDeleted(api.PlacementKey(namespace, n))
		default:
			return fmt.Errorf("fleetctl cannot delete %s", r.display())
		}
		if err != nil {
			return fmt.Errorf("%s %q: %w", r.display(), n, err)
		}
		items = append(items, change.Item{Object: fmt.Sprintf("%s %q", r.display(), n), Changes: []change.Change{c}})
	}
	return a.publish(ctx, items, "deleted", "already deleted")
}

func (a *app) deleteFiles(ctx context.Context, files fileFlags, leave events.LeavePolicy) error {
	sources, err := input.Read(files.files, files.recursive, a.in)
	if err != nil {
		return err
	}
	// Deleting needs names only: the objects need not be valid.
	docs, problems := input.Decode(sources)
	if len(problems) > 0 {
		return a.reportProblems(problems)
	}
	items, problems := change.ForDelete(docs, leave, change.Options{Namespace: files.namespace})
	if len(problems) > 0 {
		return a.reportProblems(problems)
	}
	if len(items) == 0 {
		return errors.New("no objects passed to delete")
	}
	// kubectl names deleted objects as <resource> "<name>".
	for i := range items {
		if kind, name, ok := strings.Cut(items[i].Object, "/"); ok {
			items[i].Object = fmt.Sprintf("%s %q", kind, name)
		}
	}
	return a.publish(ctx, items, "deleted", "already deleted")
}
