package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/flotilla-dev/flotilla/services/fleetctl/change"
	"github.com/flotilla-dev/flotilla/services/fleetctl/input"
	"github.com/flotilla-dev/flotilla/services/fleetctl/preview"
	"github.com/flotilla-dev/flotilla/services/fleetctl/submit"
)

// fileFlags are the -f, -R and -n flags of apply and delete.
type fileFlags struct {
	files     []string
	recursive bool
	namespace string
}

func (f *fileFlags) add(cmd *cobra.Command, verb string) {
	cmd.Flags().StringArrayVarP(&f.files, "filename", "f", nil, "file, directory or - (stdin) with the objects to "+verb+"; repeatable")
	cmd.Flags().BoolVarP(&f.recursive, "recursive", "R", false, "read the directories given with -f recursively")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "default", "namespace of namespaced hub objects that name none")
}

func (a *app) applyCommand() *cobra.Command {
	var files fileFlags
	var dryRun, output string
	var memberTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "apply -f FILENAME",
		Short: "Publish placements, member clusters and hub manifests from files",
		Long: `Apply publishes the objects in the given files:

  ClusterResourcePlacement                 creates or updates the placement
  ClusterResourceOverride, ResourceOverride creates or updates the override (v1alpha1, v1beta1, v1)
  ClusterResourcePlacementEviction         evicts the placement from the cluster, once
  ClusterResourcePlacementDisruptionBudget creates or updates the budget of the placement of its name
  MemberCluster                            joins (or updates) the member cluster
  PropagationPolicy (KubeAdmiral)          becomes two placements, pp.<namespace>.<name> and
  ClusterPropagationPolicy (KubeAdmiral)   pp-adopt.<namespace>.<name> (cpp... for cluster policies)
  any other Kubernetes manifest            goes into the hub store, where placements select it

Files may hold several YAML documents or JSON objects, and v1 Lists. Every document is
decoded and validated first; if any has a problem, every problem is printed with its file,
document and field, and nothing is published. Server-populated fields (status, uid,
resourceVersion, a Service's clusterIP, ...) are removed from hub manifests, so output of
kubectl get -o yaml can be applied as it is. Applying the same content again publishes
nothing ("unchanged"). An update of a live placement (as the status service shows it) must
keep Fleet's update rules, as the services do: placementType cannot change and tolerations
can only be added; a refused update is printed with its field path and nothing is published.
Likewise an object may be selected by one override of each kind only (checked against the
live overrides and the others applied), and an override's placement cannot change.`,
		Example: `  fleetctl apply -f web-2-crp.yaml
  fleetctl apply -f ./manifests -R
  cat crp.yaml | fleetctl apply -f -
  fleetctl apply --dry-run=server -f web-2-crp.yaml -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files.files) == 0 {
				return usageError(cmd, "must specify at least one file with -f (a file, a directory, or - for standard input)")
			}
			switch dryRun {
			case "none", "client":
			case "server":
				switch output {
				case "", "table", "yaml", "json":
				default:
					return usageError(cmd, "-o must be table, yaml or json for --dry-run=server, not %q", output)
				}
				return a.previewApply(cmd.Context(), files, output, memberTimeout)
			default:
				return usageError(cmd, "--dry-run must be none, client or server, not %q", dryRun)
			}
			return a.apply(cmd.Context(), files, dryRun == "client")
		},
	}
	files.add(cmd, "apply")
	cmd.Flags().StringVar(&dryRun, "dry-run", "none", "client: validate and print what would be published, without publishing; "+
		"server: also preview each placement (clusters picked and not, manifests after overrides, what each member would do, found by server-side dry run there, and the rollout plan) without changing anything")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format of --dry-run=server: table, yaml or json")
	cmd.Flags().DurationVar(&memberTimeout, "timeout", preview.DefaultMemberTimeout, "--dry-run=server: how long each member's apply worker has to answer; members that do not are named in a partial answer")
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "client"
	return cmd
}

// reportProblems prints every problem and returns the error that ends the command.
func (a *app) reportProblems(problems []input.Problem) error {
	sources := map[string]bool{}
	for _, p := range problems {
		fmt.Fprintln(a.err, p.String())
		sources[p.Source] = true
	}
	return fmt.Errorf("%d problem(s) in %d file(s); nothing was published", len(problems), len(sources))
}

func (a *app) apply(ctx context.Context, files fileFlags, dryRun bool) error {
	items, err := a.load(files)
	if err != nil {
		return err
	}
	if dryRun {
		for _, it := range items {
			a.printOutcome(it, "configured (dry run)")
		}
		return nil
	}
	return a.publish(ctx, items, "configured", "unchanged")
}

// load reads, decodes and validates the files as apply does, printing their
// warnings.
func (a *app) load(files fileFlags) ([]change.Item, error) {
	sources, err := input.Read(files.files, files.recursive, a.in)
	if err != nil {
		return nil, err
	}
	docs, problems := input.LoadIn(sources, files.namespace)
	// Convert the valid documents too, so that every problem is reported
	// at once, including those only the conversion finds.
	items, more := change.ForApply(input.WithoutProblems(docs, problems), change.Options{Namespace: files.namespace})
	if problems = append(problems, more...); len(problems) > 0 {
		input.SortProblems(problems)
		return nil, a.reportProblems(problems)
	}
	if len(items) == 0 {
		return nil, errors.New("no objects passed to apply")
	}
	for _, d := range docs {
		for _, w := range d.Warnings {
			a.warn("%s: %s", d.Where(), w)
		}
	}
	for _, it := range items {
		for _, w := range it.Warnings {
			a.warn("%s: %s: %s", it.Where, it.Object, w)
		}
	}
	return items, nil
}

// publish publishes every item in order and prints one line per item, once every
// placement update among them passed the Fleet update rules (checkUpdates).
func (a *app) publish(ctx context.Context, items []change.Item, done, unchanged string) error {
	nc, err := a.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	if err := a.checkUpdates(ctx, nc, items); err != nil {
		return err
	}
	if err := a.checkOverrides(ctx, nc, items); err != nil {
		return err
	}
	if err := a.checkBudgets(ctx, nc, items); err != nil {
		return err
	}
	pub, err := a.publisher(ctx, nc)
	if err != nil {
		return err
	}
	var (
		all    []change.Change
		itemOf []int
	)
	for i, it := range items {
		for _, c := range it.Changes {
			all, itemOf = append(all, c), append(itemOf, i)
		}
	}
	outcomes, err := pub.PublishAll(ctx, all)
	var ce *submit.ChangeError
	if errors.As(err, &ce) && errors.Is(err, submit.ErrHubOwned) {
		// Found while preparing: nothing was published.
		return fmt.Errorf("%s %w; nothing was published", items[itemOf[ce.Index]].Object, submit.ErrHubOwned)
	}
	if errors.As(err, &ce) {
		i := itemOf[ce.Index]
		return fmt.Errorf("publish %s: %w (the %d object(s) before it were published; apply again to publish the rest)", items[i].Object, ce.Err, i)
	}
	if err != nil {
		return err
	}
	published := make([]bool, len(items))
	for k, o := range outcomes {
		published[itemOf[k]] = published[itemOf[k]] || o == submit.Published
	}
	for i, it := range items {
		if published[i] {
			a.printOutcome(it, done)
		} else {
			a.printOutcome(it, unchanged)
		}
	}
	return nil
}

func (a *app) publisher(ctx context.Context, nc *nats.Conn) (*submit.Publisher, error) {
	js, err := a.jetStream(ctx, nc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.requestTimeout)
	defer cancel()
	return submit.New(ctx, js)
}

func (a *app) printOutcome(it change.Item, outcome string) {
	line := it.Object + " " + outcome
	if it.Note != "" {
		line += " (" + it.Note + ")"
	}
	fmt.Fprintln(a.out, strings.TrimSpace(line))
}
