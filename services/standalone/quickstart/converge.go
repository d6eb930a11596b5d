package quickstart

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/printer"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
)

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
