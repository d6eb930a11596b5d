// Package quickstart is the quick-start demo the standalone process runs with --example: it
// creates a workload directly on member-1, as if it ran there before Flotilla, applies
// deploy/examples/quickstart as fleetctl apply does, prints the placement's conditions as they
// change until it converges, and reports how the pre-existing workload was taken over.
package quickstart

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
)

// The quick-start example lives in <examples>/quickstart: the hub's manifests and a
// ClusterResourcePlacement in its top level, and in a directory named after a member the
// objects that already run on that member before Flotilla places anything (a workload that
// is taken over without a restart).
const (
	quickstartDir = "quickstart"
	// existingMember is the member the pre-existing workload runs on.
	existingMember = "member-1"
)

// Bounds of the waits in the example: generous, since a busy machine is slow, and only there
// to stop waiting on something broken; the services keep running either way.
const (
	membersTimeout  = 3 * time.Minute
	convergeTimeout = 10 * time.Minute
	pollEvery       = 500 * time.Millisecond
)

// Env is what the demo needs from the process that runs it. Every function in it but Applied
// must be set.
type Env struct {
	// ExamplesDir holds quickstart/ (see FindExamplesDir).
	ExamplesDir string
	// LocalMembers are the member clusters running here, which the demo waits for; member-1,
	// where the pre-existing workload goes, must be one of them.
	LocalMembers []string
	// RESTConfig reaches a local member; it returns nil for any other name.
	RESTConfig func(member string) *rest.Config
	// Kubeconfig returns the path of a member's kubeconfig file, "" when there is no such
	// member; the hints printed at the end name it.
	Kubeconfig func(member string) string
	// Fleetctl runs a fleetctl command against the fleet, printing its output as progress.
	Fleetctl func(ctx context.Context, args ...string) error
	// Status asks the status service, as fleetctl get does.
	Status *query.Client
	// Available waits for the placement to be available too, not only applied: only members
	// whose nodes run pods ever make a Deployment available.
	Available bool
	// Applied, when set, is called once the example is published (before it converges).
	Applied func()
	// Log receives what the person watching need not see; default none.
	Log *slog.Logger

	// Step prints that a step begins and returns the function that ends it with its result;
	// Linef prints an indented detail line; Printf prints as is.
	Step          func(what string) (done func(result string))
	Linef, Printf func(format string, args ...any)
	// Rel shows a path as the person would type it.
	Rel func(path string) string
	// FleetctlCommand and KubectlCommand are how the person runs fleetctl and kubectl, for
	// the hints printed at the end.
	FleetctlCommand, KubectlCommand string
}

// FindExamplesDir returns deploy/examples in dir or the nearest parent of dir that has it.
func FindExamplesDir(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		candidate := filepath.Join(d, "deploy", "examples")
		if fi, err := os.Stat(filepath.Join(candidate, quickstartDir)); err == nil && fi.IsDir() {
			return candidate, nil
		}
		if d == filepath.Dir(d) {
			return "", fmt.Errorf("no deploy/examples/%s in %s or its parents: run from the Flotilla repository or give --examples-dir", quickstartDir, dir)
		}
	}
}

// Run puts the pre-existing workload on member-1, applies the example as fleetctl apply does,
// and prints the placement's status as it converges, then what became of the pre-existing
// workload and what to look at.
func Run(ctx context.Context, e Env) error {
	if e.Log == nil {
		e.Log = slog.New(slog.DiscardHandler)
	}
	quick := filepath.Join(e.ExamplesDir, quickstartDir)
	placement, err := placementIn(quick)
	if err != nil {
		return err
	}
	e.waitForMembers(ctx)

	existing, err := e.createExisting(ctx, filepath.Join(quick, existingMember), existingMember)
	if err != nil {
		return err
	}

	done := e.Step("Applying the example: fleetctl apply -f " + e.Rel(quick))
	if err := e.Fleetctl(ctx, "apply", "-f", quick); err != nil {
		done("failed")
		return fmt.Errorf("apply %s: %w", quick, err)
	}
	done("published")
	if e.Applied != nil {
		e.Applied()
	}

	crp, err := e.watchPlacement(ctx, placement)
	if err != nil {
		return err
	}
	e.reportTakeovers(ctx, placement, existing)
	e.printHints(crp)
	return nil
}

// placementIn returns the name of the one ClusterResourcePlacement in dir's files.
func placementIn(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return "", err
	}
	var names []string
	for _, f := range files {
		docs, err := decodeFile(f)
		if err != nil {
			return "", err
		}
		for _, d := range docs {
			if crp, ok := d.Object.(*api.ClusterResourcePlacement); ok {
				names = append(names, crp.Name)
			}
		}
	}
	if len(names) != 1 {
		return "", fmt.Errorf("%s holds %d ClusterResourcePlacements (%s); the example needs exactly one", dir, len(names), strings.Join(names, ", "))
	}
	return names[0], nil
}

func decodeFile(path string) ([]api.Document, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	docs, err := api.DecodeAll(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return docs, nil
}

// waitForMembers waits until the local members have joined and sent a heartbeat, so that the
// scheduler sees them all when the placement arrives. It only warns when they are late.
func (e Env) waitForMembers(ctx context.Context) {
	want := e.LocalMembers
	done := e.Step("Waiting for " + strings.Join(want, ", ") + " to report healthy")
	ctx, cancel := context.WithTimeout(ctx, membersTimeout)
	defer cancel()
	var missing []string
	for {
		missing = missing[:0]
		for _, name := range want {
			mc, err := e.Status.Member(ctx, name)
			if err != nil || !meta.IsStatusConditionTrue(mc.Status.Conditions, string(api.ConditionTypeMemberClusterJoined)) ||
				!meta.IsStatusConditionTrue(mc.Status.Conditions, string(api.ConditionTypeMemberClusterHealthy)) {
				missing = append(missing, name)
			}
		}
		if len(missing) == 0 {
			done("all healthy")
			return
		}
		select {
		case <-ctx.Done():
			done("not healthy yet: " + strings.Join(missing, ", ") + "; going on")
			return
		case <-time.After(pollEvery):
		}
	}
}
