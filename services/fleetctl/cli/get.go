package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/printer"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
)

func (a *app) getCommand() *cobra.Command {
	var output, selector, namespace string
	var noHeaders, allNamespaces bool
	cmd := &cobra.Command{
		Use:   "get (crp|rp|members|cro|ro|csus|csur|careq|sus|sur|areq) [NAME...]",
		Short: "Show placements, member clusters, overrides or staged updates with their status",
		Long: `Get shows ClusterResourcePlacements, ResourcePlacements or MemberClusters in Fleet's shape (apiVersion, kind,
metadata, spec, status), as the status service reports them, and ClusterResourceOverrides
and ResourceOverrides as they were applied (in the version they were written in).

Resource types: clusterresourceplacements (crp), resourceplacements (rp, of the namespace -n,
or of all with -A), memberclusters (members, mc),
clusterresourceoverrides (cro), resourceoverrides (ro, of the namespace -n, or of all with
-A), clusterstagedupdatestrategies (csus), clusterstagedupdateruns (csur, with the stage and
clusters in progress and what the run waits for in -o wide), clusterapprovalrequests (careq),
and their namespaced twins for ResourcePlacements stagedupdatestrategies (sus),
stagedupdateruns (sur) and approvalrequests (areq), of -n or -A;
the kubectl spellings with group and version work too, e.g.
clusterresourceplacement.v1beta1.placement.kubernetes-fleet.io.

Output formats (-o): ` + printer.Formats + `.
jsonpath templates are kubectl's (client-go's jsonpath): a list or object prints as JSON.`,
		Example: `  fleetctl get crp
  fleetctl get members -o wide
  fleetctl get clusterresourceplacement.v1beta1.placement.kubernetes-fleet.io web-2-crp -o jsonpath='{.status.placementStatuses}' \
      | jq '[.[] | select (.failedPlacements != null)] | map({clusterName, failedPlacements})'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, names, err := parseTarget(args)
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			out, err := printer.ParseOutput(output)
			if err == nil {
				err = out.Check()
			}
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			if selector != "" && len(names) > 0 {
				return usageError(cmd, "give either names or a label selector (-l), not both")
			}
			p := printer.Printer{Output: out, NoHeaders: noHeaders, Now: a.now}
			if r.namespaced() {
				if allNamespaces && len(names) > 0 {
					return usageError(cmd, "a name cannot be given with --all-namespaces")
				}
				ns := namespace
				if allNamespaces {
					ns = ""
				}
				switch r {
				case resourcePlacements:
					return a.getResourcePlacements(cmd.Context(), p, ns, names, selector)
				case resourceOverrides:
					return a.getResourceOverrides(cmd.Context(), p, ns, names, selector)
				}
				return a.getNamespacedStaged(cmd.Context(), p, r, ns, names, selector)
			}
			return a.get(cmd.Context(), p, r, names, selector)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: "+printer.Formats)
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector, e.g. -l app=web,tier!=cache")
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "leave out the table header")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of namespaced kinds (rp, ro, sus, sur, areq)")
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "the namespaced kind's objects of every namespace")
	return cmd
}

// getResourceOverrides prints the ResourceOverrides of a namespace ("": of all).
func (a *app) getResourceOverrides(ctx context.Context, p printer.Printer, namespace string, names []string, selector string) error {
	nc, err := a.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	q := a.queryClient(nc)
	list := func(ctx context.Context, sel string) ([]api.ResourceOverride, error) {
		return q.ResourceOverrides(ctx, namespace, sel)
	}
	get := func(ctx context.Context, name string) (*api.ResourceOverride, error) {
		return q.ResourceOverride(ctx, namespace, name)
	}
	p.AllNamespaces = namespace == ""
	return getEach(ctx, a, p, resourceOverrides, names, selector, list, get, p.ResourceOverrides)
}

// getResourcePlacements prints the ResourcePlacements of a namespace ("": of all).
func (a *app) getResourcePlacements(ctx context.Context, p printer.Printer, namespace string, names []string, selector string) error {
	nc, err := a.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	q := a.queryClient(nc)
	list := func(ctx context.Context, sel string) ([]api.ClusterResourcePlacement, error) {
		return q.ResourcePlacements(ctx, namespace, sel)
	}
	get := func(ctx context.Context, name string) (*api.ClusterResourcePlacement, error) {
		return q.ResourcePlacement(ctx, namespace, name)
	}
	p.AllNamespaces = namespace == ""
	return getEach(ctx, a, p, resourcePlacements, names, selector, list, get, p.ResourcePlacements)
}

// getNamespacedStaged prints the StagedUpdateStrategies, StagedUpdateRuns or
// ApprovalRequests of a namespace ("": of all).
func (a *app) getNamespacedStaged(ctx context.Context, p printer.Printer, r resource, namespace string, names []string, selector string) error {
	nc, err := a.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	q := a.queryClient(nc)
	p.AllNamespaces = namespace == ""
	switch r {
	case nsStrategies:
		return getEach(ctx, a, p, r, names, selector,
			func(ctx context.Context, sel string) ([]api.ClusterStagedUpdateStrategy, error) {
				return q.StagedUpdateStrategiesIn(ctx, namespace, sel)
			},
			func(ctx context.Context, name string) (*api.ClusterStagedUpdateStrategy, error) {
				return q.StagedUpdateStrategyIn(ctx, namespace, name)
			}, p.StagedUpdateStrategies)
	case nsRuns:
		return getEach(ctx, a, p, r, names, selector,
			func(ctx context.Context, sel string) ([]api.ClusterStagedUpdateRun, error) {
				return q.StagedUpdateRunsIn(ctx, namespace, sel)
			},
			func(ctx context.Context, name string) (*api.ClusterStagedUpdateRun, error) {
				return q.StagedUpdateRunIn(ctx, namespace, name)
			}, p.StagedUpdateRuns)
	}
	return getEach(ctx, a, p, r, names, selector,
		func(ctx context.Context, sel string) ([]api.ClusterApprovalRequest, error) {
			return q.ApprovalRequestsIn(ctx, namespace, sel)
		},
		func(ctx context.Context, name string) (*api.ClusterApprovalRequest, error) {
			return q.ApprovalRequestIn(ctx, namespace, name)
		}, p.ApprovalRequests)
}

// notFound renders a missing object as kubectl does.
func notFound(r resource, name string) error {
	return fmt.Errorf("%s %q not found", r.display(), name)
}

func (a *app) get(ctx context.Context, p printer.Printer, r resource, names []string, selector string) error {
	nc, err := a.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	q := a.queryClient(nc)
	switch r {
	case placements:
		return getEach(ctx, a, p, r, names, selector, q.Placements, q.Placement, p.Placements)
	case members:
		return getEach(ctx, a, p, r, names, selector, q.Members, q.Member, p.Members)
	case clusterOverrides:
		return getEach(ctx, a, p, r, names, selector, q.ClusterResourceOverrides, q.ClusterResourceOverride, p.ClusterResourceOverrides)
	case stagedStrategies:
		return getEach(ctx, a, p, r, names, selector, q.StagedUpdateStrategies, q.StagedUpdateStrategy, p.StagedUpdateStrategies)
	case stagedRuns:
		return getEach(ctx, a, p, r, names, selector, q.StagedUpdateRuns, q.StagedUpdateRun, p.StagedUpdateRuns)
	case approvalRequests:
		return getEach(ctx, a, p, r, names, selector, q.ApprovalRequests, q.ApprovalRequest, p.ApprovalRequests)
	case evictions:
		return getEach(ctx, a, p, r, names, selector, q.Evictions, q.Eviction, p.Evictions)
	case disruptionBudgets:
		return getEach(ctx, a, p, r, names, selector, q.DisruptionBudgets, q.DisruptionBudget, p.DisruptionBudgets)
	}
	return nil
}

// getEach prints the objects named (every one matching selector when no
// names are given) as one list, and then reports the names not found.
func getEach[T any](ctx context.Context, a *app, p printer.Printer, r resource, names []string, selector string,
	list func(context.Context, string) ([]T, error), get func(context.Context, string) (*T, error),
	show func(w io.Writer, items []T, single bool) error) error {
	items, missing, err := fetch(ctx, r, names, selector, list, get)
	if err != nil {
		return err
	}
	if len(items) > 0 {
		if err := show(a.out, items, len(names) == 1); err != nil {
			return err
		}
	} else if len(names) == 0 {
		a.noResources(p, a.err)
	}
	return errors.Join(missing...)
}

// noResources says that a list is empty: on stderr for tables, as kubectl
// does, and as an empty List for structured formats so that scripts get JSON.
func (a *app) noResources(p printer.Printer, w io.Writer) {
	switch p.Output.Format {
	case printer.Table, printer.Wide, printer.Name:
		fmt.Fprintln(w, "No resources found")
	default:
		_ = p.Placements(a.out, nil, false)
	}
}

func (a *app) describeCommand() *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   "describe (crp|rp|members|csur) [NAME...]",
		Short: "Show a placement or member cluster in detail, for people",
		Long: `Describe shows a placement's spec in short, its conditions, and for every cluster the
cluster's conditions and the objects that failed to apply or are not available
(failedPlacements), drifted on the member (driftedPlacements) or differ from the hub
(diffedPlacements). Without names, every object of the type is described.`,
		Example: `  fleetctl describe crp web-2-crp
  fleetctl describe rp app-config -n team-a
  fleetctl describe member member-1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, names, err := parseTarget(args)
			if err != nil {
				return usageError(cmd, "%v", err)
			}
			if r != placements && r != resourcePlacements && r != members && r != stagedRuns && r != nsRuns && r != evictions && r != disruptionBudgets {
				return usageError(cmd, "describe shows placements, member clusters, staged update runs, evictions and disruption budgets; show the others with fleetctl get %s -o yaml", strings.Split(r.display(), ".")[0])
			}
			return a.describe(cmd.Context(), r, names, namespace)
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of the resourceplacements or stagedupdateruns")
	return cmd
}

func (a *app) describe(ctx context.Context, r resource, names []string, namespace string) error {
	nc, err := a.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	q := a.queryClient(nc)
	p := printer.Printer{Now: a.now}
	switch r {
	case placements:
		return describeEach(ctx, a, r, names, q.Placements, q.Placement, p.DescribePlacement)
	case resourcePlacements:
		list := func(ctx context.Context, sel string) ([]api.ClusterResourcePlacement, error) {
			return q.ResourcePlacements(ctx, namespace, sel)
		}
		get := func(ctx context.Context, name string) (*api.ClusterResourcePlacement, error) {
			return q.ResourcePlacement(ctx, namespace, name)
		}
		return describeEach(ctx, a, r, names, list, get, p.DescribePlacement)
	case nsRuns:
		list := func(ctx context.Context, sel string) ([]api.ClusterStagedUpdateRun, error) {
			return q.StagedUpdateRunsIn(ctx, namespace, sel)
		}
		get := func(ctx context.Context, name string) (*api.ClusterStagedUpdateRun, error) {
			return q.StagedUpdateRunIn(ctx, namespace, name)
		}
		return describeEach(ctx, a, r, names, list, get, p.DescribeStagedUpdateRun)
	case members:
		return describeEach(ctx, a, r, names, q.Members, q.Member, p.DescribeMember)
	case stagedRuns:
		return describeEach(ctx, a, r, names, q.StagedUpdateRuns, q.StagedUpdateRun, p.DescribeStagedUpdateRun)
	case evictions:
		return describeEach(ctx, a, r, names, q.Evictions, q.Eviction, p.DescribeEviction)
	case disruptionBudgets:
		return describeEach(ctx, a, r, names, q.DisruptionBudgets, q.DisruptionBudget, p.DescribeDisruptionBudget)
	}
	return nil
}

// describeEach describes the objects named (every one when no names are
// given), a blank line between two, and then reports the names not found.
func describeEach[T any](ctx context.Context, a *app, r resource, names []string,
	list func(context.Context, string) ([]T, error), get func(context.Context, string) (*T, error),
	describe func(io.Writer, *T) error) error {
	items, missing, err := fetch(ctx, r, names, "", list, get)
	if err != nil {
		return err
	}
	for i := range items {
		if i > 0 {
			fmt.Fprintln(a.out)
		}
		if err := describe(a.out, &items[i]); err != nil {
			return err
		}
	}
	if len(items) == 0 && len(names) == 0 {
		fmt.Fprintln(a.err, "No resources found")
	}
	return errors.Join(missing...)
}

// fetch lists every object (filtered by selector) when no names are given,
// else gets each named one, collecting kubectl-style errors for the missing.
func fetch[T any](ctx context.Context, r resource, names []string, selector string,
	list func(context.Context, string) ([]T, error), get func(context.Context, string) (*T, error)) ([]T, []error, error) {
	if len(names) == 0 {
		items, err := list(ctx, selector)
		return items, nil, err
	}
	var items []T
	var missing []error
	for _, n := range names {
		obj, err := get(ctx, n)
		switch {
		case errors.Is(err, query.ErrNotFound):
			missing = append(missing, notFound(r, n))
		case err != nil:
			return nil, nil, err
		default:
			items = append(items, *obj)
		}
	}
	return items, missing, nil
}
