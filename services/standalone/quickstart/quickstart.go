// Package quickstart is the quick-start demo the standalone process runs with --example: it
// creates a workload directly on member-1, as if it ran there before Flotilla, applies
// deploy/examples/quickstart as fleetctl apply does, prints the placement's conditions as they
// change until it converges, and reports how the pre-existing workload was taken over.
package quickstart

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/printer"
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

var (
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	replicaSetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
)

// Env is what the demo needs from the process that runs it.
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

// existingObject is a member object created before the placement, as it was then.
type existingObject struct {
	resource    *unstructured.Unstructured
	generation  int64
	uid         string
	replicaSets []string // for a Deployment: its ReplicaSets; the same ones later mean no restart
	earlier     bool     // it was there already, from an earlier run
}

// createExisting creates the objects in dir's files directly on member, with client-go, as
// if they had been running there before Flotilla. Objects already there are left alone.
func (e Env) createExisting(ctx context.Context, dir, member string) ([]existingObject, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, err
	}
	rc := e.RESTConfig(member)
	if rc == nil {
		return nil, fmt.Errorf("the example needs the local member %s", member)
	}
	c, mapper, err := clients(rc)
	if err != nil {
		return nil, fmt.Errorf("member %s: %w", member, err)
	}
	done := e.Step(fmt.Sprintf("Creating a pre-existing workload directly on %s (%s), as if it ran there before Flotilla", member, e.Rel(dir)))
	var out []existingObject
	for _, f := range files {
		docs, err := decodeFile(f)
		if err != nil {
			done("failed")
			return nil, err
		}
		for _, d := range docs {
			u, ok := d.Object.(*unstructured.Unstructured)
			if !ok {
				done("failed")
				return nil, fmt.Errorf("%s: a %T is not a Kubernetes object for a member", f, d.Object)
			}
			obj, err := createOnMember(ctx, c, mapper, u)
			if err != nil {
				done("failed")
				return nil, fmt.Errorf("create %s on %s: %w", objectName(u), member, err)
			}
			out = append(out, *obj)
			switch {
			case obj.earlier:
				e.Linef("%s is already there (from an earlier run)", objectName(u))
			case obj.generation != 0:
				e.Linef("created %s (generation %d)", objectName(u), obj.generation)
			default:
				e.Linef("created %s", objectName(u))
			}
		}
	}
	for i := range out {
		if out[i].resource.GetKind() == "Deployment" {
			out[i].replicaSets = replicaSetsOf(ctx, c, out[i].resource, true)
		}
	}
	done("done")
	return out, nil
}

func clients(rc *rest.Config) (dynamic.Interface, *restmapper.DeferredDiscoveryRESTMapper, error) {
	c, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, nil, err
	}
	return c, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)), nil
}

func resourceFor(c dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == "namespace" {
		ns := u.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		return c.Resource(m.Resource).Namespace(ns), nil
	}
	return c.Resource(m.Resource), nil
}

func createOnMember(ctx context.Context, c dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper, u *unstructured.Unstructured) (*existingObject, error) {
	ri, err := resourceFor(c, mapper, u)
	if err != nil {
		return nil, err
	}
	got, err := ri.Create(ctx, u, metav1.CreateOptions{FieldManager: "quickstart-before-flotilla"})
	earlier := apierrors.IsAlreadyExists(err)
	if earlier {
		got, err = ri.Get(ctx, u.GetName(), metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	return &existingObject{resource: got, generation: got.GetGeneration(), uid: string(got.GetUID()), earlier: earlier}, nil
}

// replicaSetsOf lists the ReplicaSets a Deployment owns; wait gives the deployment controller
// a little time to make the first one.
func replicaSetsOf(ctx context.Context, c dynamic.Interface, deploy *unstructured.Unstructured, wait bool) []string {
	rs := c.Resource(replicaSetsGVR).Namespace(deploy.GetNamespace())
	deadline := time.Now().Add(time.Minute)
	for {
		list, err := rs.List(ctx, metav1.ListOptions{})
		var names []string
		if err == nil {
			for _, item := range list.Items {
				for _, ref := range item.GetOwnerReferences() {
					if ref.UID == deploy.GetUID() {
						names = append(names, item.GetName())
					}
				}
			}
		}
		if len(names) > 0 || !wait || time.Now().After(deadline) || ctx.Err() != nil {
			slices.Sort(names)
			return names
		}
		time.Sleep(pollEvery)
	}
}

func objectName(u *unstructured.Unstructured) string {
	s := u.GetKind() + " "
	if ns := u.GetNamespace(); ns != "" {
		s += ns + "/"
	}
	return s + u.GetName()
}

// watchPlacement prints every change of the placement's conditions until it is applied on
// every cluster it was scheduled to (and available, or given up on availability), or the
// timeout passes.
func (e Env) watchPlacement(ctx context.Context, name string) (*api.ClusterResourcePlacement, error) {
	done := e.Step(fmt.Sprintf("Watching placement %s converge (fleetctl get crp %s)", name, name))
	ctx, cancel := context.WithTimeout(ctx, convergeTimeout)
	defer cancel()
	start := time.Now()
	seen := map[string]string{}
	var last *api.ClusterResourcePlacement
	for {
		crp, err := e.Status.Placement(ctx, name)
		switch {
		case err == nil:
			last = crp
			e.printTransitions(crp, seen, time.Since(start))
			if Converged(crp, e.Available) {
				what := "applied"
				if e.Available {
					what = "applied and available"
				}
				done(fmt.Sprintf("placement %s is %s on %s", name, what, strings.Join(clustersOf(crp), ", ")))
				return crp, nil
			}
		case !errors.Is(err, query.ErrNotFound):
			e.Log.Warn("query placement", "placement", name, "err", err)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				done("not converged yet")
				return last, fmt.Errorf("placement %s has not converged after %s; see fleetctl describe crp %s", name, convergeTimeout, name)
			}
			done("stopped")
			return last, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// Converged reports whether the placement is scheduled, applied on every cluster it is
// scheduled to, and, when available is set, available there too (members without nodes never
// run a pod, so their Deployments never become available).
func Converged(crp *api.ClusterResourcePlacement, available bool) bool {
	want := []api.ClusterResourcePlacementConditionType{api.ClusterResourcePlacementScheduledConditionType, api.ClusterResourcePlacementAppliedConditionType}
	if available {
		want = append(want, api.ClusterResourcePlacementAvailableConditionType)
	}
	for _, t := range want {
		c := meta.FindStatusCondition(crp.Status.Conditions, string(t))
		if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != crp.Generation {
			return false
		}
	}
	return len(crp.Status.PlacementStatuses) > 0
}

func clustersOf(crp *api.ClusterResourcePlacement) []string {
	var out []string
	for _, ps := range crp.Status.PlacementStatuses {
		out = append(out, ps.ClusterName)
	}
	return out
}

// printTransitions prints the conditions that changed since seen, and failed placements.
func (e Env) printTransitions(crp *api.ClusterResourcePlacement, seen map[string]string, at time.Duration) {
	line := func(who string, c metav1.Condition) {
		key := who + "/" + c.Type
		state := string(c.Status) + "/" + c.Reason
		if seen[key] == state {
			return
		}
		seen[key] = state
		t := strings.TrimPrefix(c.Type, "ClusterResourcePlacement")
		e.Linef("%6.1fs  %-10s %-17s %-7s %s: %s", at.Seconds(), who, t, c.Status, c.Reason, oneLine(c.Message))
	}
	for _, c := range crp.Status.Conditions {
		line("placement", c)
	}
	for _, ps := range crp.Status.PlacementStatuses {
		for _, c := range ps.Conditions {
			line(ps.ClusterName, c)
		}
		for _, f := range ps.FailedPlacements {
			key := ps.ClusterName + "/failed/" + printer.Resource(f.ResourceIdentifier)
			state := f.Condition.Type + "/" + f.Condition.Reason
			if seen[key] == state {
				continue
			}
			seen[key] = state
			e.Linef("%6.1fs  %-10s %s %s %s: %s", at.Seconds(), ps.ClusterName, printer.Resource(f.ResourceIdentifier),
				f.Condition.Type, f.Condition.Reason, oneLine(f.Condition.Message))
		}
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// reportTakeovers prints what happened to the pre-existing workload: the takeover decisions
// the apply worker recorded, and whether the Deployment was restarted.
func (e Env) reportTakeovers(ctx context.Context, placement string, existing []existingObject) {
	takeovers, err := e.Status.Takeovers(ctx, events.TakeoverQuery{Placement: placement})
	if err != nil {
		e.Linef("takeover decisions: %v", err)
	}
	if len(takeovers) > 0 {
		e.Printf("==> Takeover decisions (fleetctl takeovers --placement %s)\n", placement)
		for _, t := range takeovers {
			e.Linef("%s  %s: %s (whenToTakeOver %s, %s)", t.Cluster, printer.Resource(t.Resource), t.Outcome, t.Mode, t.Comparison)
		}
	}
	rc := e.RESTConfig(existingMember)
	if rc == nil {
		return
	}
	c, _, err := clients(rc)
	if err != nil {
		return
	}
	for _, x := range existing {
		if x.resource.GetKind() != "Deployment" || x.earlier {
			continue
		}
		now, err := c.Resource(deploymentsGVR).Namespace(x.resource.GetNamespace()).Get(ctx, x.resource.GetName(), metav1.GetOptions{})
		if err != nil {
			continue
		}
		rs := replicaSetsOf(ctx, c, now, false)
		restarted := now.GetGeneration() != x.generation || string(now.GetUID()) != x.uid || !slices.Equal(rs, x.replicaSets)
		if restarted {
			e.Linef("%s on %s changed when it was taken over: generation %d -> %d, ReplicaSets %v -> %v",
				objectName(now), existingMember, x.generation, now.GetGeneration(), x.replicaSets, rs)
			continue
		}
		e.Linef("%s on %s was taken over without a restart: generation %d before and after, same ReplicaSet (%s)",
			objectName(now), existingMember, now.GetGeneration(), strings.Join(rs, ", "))
	}
}
