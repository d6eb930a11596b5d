package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events/api"
)

// A placement of the suite selects one namespace holding its other objects: 1 Namespace,
// configMaps ConfigMaps and deployments Deployments (no replicas: with the members' controller
// managers they report available, as on a real cluster).
const (
	configMaps   = 95
	deployments  = 4
	objectsEach  = 1 + configMaps + deployments // 100
	suiteLabel   = "fault-suite"
	versionLabel = "fault-suite/version"
)

var (
	namespacesGVR  = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	configMapsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
)

// placement is one of the suite's placements: its name (also its namespace's) and the version
// of its objects the hub holds now.
type placement struct {
	name    string
	version int
}

// manifests are the hub objects of p at its version, and the placement itself: PickAll, a
// rolling update one cluster at a time.
func (p placement) manifests() string {
	var b strings.Builder
	v := p.versionLabel()
	fmt.Fprintf(&b, `apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels: {%s: "true", %s: %s}
`, p.name, suiteLabel, versionLabel, v)
	for i := range configMaps {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: config-%02d
  namespace: %s
  labels: {%s: "true", %s: %s}
data:
  version: %s
  payload: "object %d of placement %s, at %s: some text so that the work is not trivially small"
`, i, p.name, suiteLabel, versionLabel, v, v, i, p.name, v)
	}
	for i := range deployments {
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%d
  namespace: %s
  labels: {%s: "true", %s: %s}
spec:
  replicas: 0
  selector:
    matchLabels: {app: app-%d}
  template:
    metadata:
      labels: {app: app-%d}
      annotations: {%s: %s}
    spec:
      containers:
      - name: app
        image: registry.k8s.io/pause:3.10
`, i, p.name, suiteLabel, versionLabel, v, i, i, versionLabel, v)
	}
	fmt.Fprintf(&b, `---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: %s
spec:
  resourceSelectors:
  - group: ""
    version: v1
    kind: Namespace
    name: %s
  policy:
    placementType: PickAll
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 1
      unavailablePeriodSeconds: 1
`, p.name, p.name)
	return b.String()
}

func (p placement) versionLabel() string { return fmt.Sprintf("v%d", p.version) }

// placementStatus is `fleetctl get crp NAME -o json`, decoded.
func (s *stack) placementStatus(ctx context.Context, name string) (*api.ClusterResourcePlacement, error) {
	out, errOut, err := s.fleetctl(ctx, "", "get", "crp", name, "-o", "json")
	if err != nil {
		return nil, fmt.Errorf("fleetctl get crp %s -o json: %v %s", name, err, errOut)
	}
	var crp api.ClusterResourcePlacement
	if err := json.Unmarshal([]byte(out), &crp); err != nil {
		return nil, fmt.Errorf("fleetctl get crp %s -o json printed what is not a placement: %v\n%s", name, err, out)
	}
	return &crp, nil
}

// converged says what keeps p from being converged, or nil: fleetctl shows it scheduled,
// applied and available on every member at its newest resource snapshot, and every member
// holds every object of it at its version.
func (s *stack) converged(ctx context.Context, p placement) error {
	crp, err := s.placementStatus(ctx, p.name)
	if err != nil {
		return err
	}
	for _, typ := range []api.ClusterResourcePlacementConditionType{
		api.ClusterResourcePlacementScheduledConditionType,
		api.ClusterResourcePlacementAppliedConditionType,
		api.ClusterResourcePlacementAvailableConditionType,
	} {
		if err := conditionTrue(crp.Status.Conditions, string(typ), crp.Generation); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
	}
	// The newest snapshot, as the rollout recorded it; without the database (the standalone
	// stack), the one the status observes, and the members' objects say it is the newest.
	newest := crp.Status.ObservedResourceIndex
	if s.db != nil {
		if newest, err = s.newestSnapshot(ctx, p.name); err != nil {
			return err
		}
	}
	if crp.Status.ObservedResourceIndex != newest {
		return fmt.Errorf("%s: status observes resource snapshot %s, the newest is %s", p.name, crp.Status.ObservedResourceIndex, newest)
	}
	if len(crp.Status.PlacementStatuses) != len(s.members) {
		return fmt.Errorf("%s: status has %d clusters, want %d", p.name, len(crp.Status.PlacementStatuses), len(s.members))
	}
	for _, ps := range crp.Status.PlacementStatuses {
		if ps.ObservedResourceIndex != newest {
			return fmt.Errorf("%s: %s is at snapshot %s, want %s", p.name, ps.ClusterName, ps.ObservedResourceIndex, newest)
		}
		if err := conditionTrue(ps.Conditions, string(api.PerClusterAvailableConditionType), crp.Generation); err != nil {
			return fmt.Errorf("%s on %s: %w", p.name, ps.ClusterName, err)
		}
	}
	for _, m := range s.members {
		n, err := s.objectsAt(ctx, m, p)
		if err != nil {
			return err
		}
		if n != objectsEach {
			return fmt.Errorf("%s holds %d of the %d objects of %s at %s", m, n, objectsEach, p.name, p.versionLabel())
		}
	}
	return nil
}

// newestSnapshot is the index of p's newest resource snapshot, as the rollout recorded it.
func (s *stack) newestSnapshot(ctx context.Context, name string) (string, error) {
	var idx *int
	err := s.db.QueryRow(ctx, `select max(snapshot_index) from resource_snapshots where placement = $1`, name).Scan(&idx)
	if err != nil {
		return "", fmt.Errorf("newest snapshot of %s: %w", name, err)
	}
	if idx == nil {
		return "", fmt.Errorf("%s has no resource snapshot yet", name)
	}
	return fmt.Sprint(*idx), nil
}

// objectsAt counts the objects of p that member holds at p's version.
func (s *stack) objectsAt(ctx context.Context, member string, p placement) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c := s.clients[member]
	sel := metav1.ListOptions{LabelSelector: versionLabel + "=" + p.versionLabel()}
	n := 0
	ns, err := c.Resource(namespacesGVR).Get(ctx, p.name, metav1.GetOptions{})
	switch {
	case err == nil && ns.GetLabels()[versionLabel] == p.versionLabel():
		n++
	case err != nil && !apierrors.IsNotFound(err):
		return 0, fmt.Errorf("%s: namespace %s: %w", member, p.name, err)
	}
	for _, gvr := range []schema.GroupVersionResource{configMapsGVR, deploymentsGVR} {
		list, err := c.Resource(gvr).Namespace(p.name).List(ctx, sel)
		if err != nil {
			return 0, fmt.Errorf("%s: list %s in %s: %w", member, gvr.Resource, p.name, err)
		}
		n += len(list.Items)
	}
	return n, nil
}

// conditionTrue says what is wrong unless the condition is True for the generation.
func conditionTrue(conds []metav1.Condition, typ string, generation int64) error {
	c := meta.FindStatusCondition(conds, typ)
	switch {
	case c == nil:
		return fmt.Errorf("no %s condition yet", typ)
	case c.ObservedGeneration < generation:
		return fmt.Errorf("%s is observed for generation %d, the placement is at %d", typ, c.ObservedGeneration, generation)
	case c.Status != metav1.ConditionTrue:
		return fmt.Errorf("%s is %s (%s: %s)", typ, c.Status, c.Reason, c.Message)
	}
	return nil
}

// waitConverged waits until every placement has converged and returns when it saw that.
func (s *stack) waitConverged(t *testing.T, ps []placement) time.Time {
	t.Helper()
	begin := time.Now()
	deadline := begin.Add(patience)
	var said string
	var saidAt time.Time
	for {
		err := s.allConverged(t.Context(), ps)
		if err == nil {
			return time.Now()
		}
		// What the fleet waits for, when it changes (at most every 5 s): the timeline of a
		// slow recovery.
		if why := err.Error(); why != said && time.Since(saidAt) > 5*time.Second {
			t.Logf("+%s not converged: %s", time.Since(begin).Round(100*time.Millisecond), why)
			said, saidAt = why, time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the placements did not converge within %s: %v", patience, err)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("the test ended while waiting for the placements to converge: %v", err)
		case <-time.After(time.Second):
		}
	}
}

func (s *stack) allConverged(ctx context.Context, ps []placement) error {
	for _, p := range ps {
		if err := s.converged(ctx, p); err != nil {
			return err
		}
	}
	return nil
}
