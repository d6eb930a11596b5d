package scenarios

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
)

// The overrides of upstream's documentation, on the members' labels (member-1 and member-4
// east, member-2 west, member-3 central): the namespace and what is in it get a label with
// the member's name (a ClusterResourceOverride, v1alpha1 as the older documentation writes
// it), the Deployment an image for its region and, in the east, more replicas (a
// ResourceOverride, v1), the ConfigMap is kept off the central region (Delete), and a
// ConfigMap a ResourceEnvelope wraps gets its member's region.
const overridesScenario = `
apiVersion: v1
kind: Namespace
metadata:
  name: override-demo
  labels: {app: override-demo}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: override-demo
  labels: {app: web}
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: canary
  namespace: override-demo
  labels: {app: web}
data:
  mode: canary
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceEnvelope
metadata:
  name: wrapped
  namespace: override-demo
data:
  settings.yaml:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: wrapped-settings
      labels: {app: web}
    data:
      region: unknown
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: crp-overrides
spec:
  resourceSelectors:
  - group: ""
    version: v1
    kind: Namespace
    name: override-demo
  policy:
    placementType: PickAll
---
apiVersion: placement.kubernetes-fleet.io/v1alpha1
kind: ClusterResourceOverride
metadata:
  name: override-demo-labels
spec:
  placement:
    name: crp-overrides
  clusterResourceSelectors:
  - group: ""
    version: v1
    kind: Namespace
    name: override-demo
  policy:
    overrideRules:
    - clusterSelector:
        clusterSelectorTerms: []
      jsonPatchOverrides:
      - op: add
        path: /metadata/labels/cluster-name
        value: "${MEMBER-CLUSTER-NAME}"
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ResourceOverride
metadata:
  name: web-per-region
  namespace: override-demo
spec:
  placement:
    name: crp-overrides
  resourceSelectors:
  - group: apps
    version: v1
    kind: Deployment
    name: web
  policy:
    overrideRules:
    - clusterSelector:
        clusterSelectorTerms:
        - labelSelector:
            matchExpressions:
            - {key: region, operator: Exists}
      jsonPatchOverrides:
      - op: replace
        path: /spec/template/spec/containers/0/image
        value: "registry.${MEMBER-CLUSTER-LABEL-KEY-region}.example/nginx:1.27"
    - clusterSelector:
        clusterSelectorTerms:
        - labelSelector:
            matchLabels: {region: east}
      jsonPatchOverrides:
      - op: replace
        path: /spec/replicas
        value: 2
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceOverride
metadata:
  name: wrapped-region
  namespace: override-demo
spec:
  placement:
    name: crp-overrides
  resourceSelectors:
  - group: ""
    version: v1
    kind: ConfigMap
    name: wrapped-settings
  policy:
    overrideRules:
    - clusterSelector:
        clusterSelectorTerms: []
      jsonPatchOverrides:
      - op: replace
        path: /data/region
        value: "${MEMBER-CLUSTER-LABEL-KEY-region}"
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceOverride
metadata:
  name: canary-not-central
  namespace: override-demo
spec:
  placement:
    name: crp-overrides
  resourceSelectors:
  - group: ""
    version: v1
    kind: ConfigMap
    name: canary
  policy:
    overrideRules:
    - clusterSelector:
        clusterSelectorTerms:
        - labelSelector:
            matchLabels: {region: central}
      overrideType: Delete
`

// TestOverridesDifferPerMember: one placement, and on each member the objects as its
// overrides make them: its own name as a label, its region's image, east's replicas, no
// canary ConfigMap in the central region, and its region in the enveloped ConfigMap. The
// status says which overrides apply on each member, and Overridden is OverriddenSucceeded.
func TestOverridesDifferPerMember(t *testing.T) {
	s := fleetFor(t)
	s.deleteAtEnd(t, "crp-overrides")
	t.Cleanup(func() {
		for _, args := range [][]string{{"delete", "cro", "override-demo-labels"},
			{"delete", "ro", "web-per-region", "canary-not-central", "wrapped-region", "-n", "override-demo"}} {
			if out, errOut, err := s.fleetctl(context.Background(), "", args...); err != nil {
				t.Errorf("fleetctl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
			}
		}
	})
	s.apply(t, overridesScenario)
	crp := s.converged(t, "crp-overrides", 1)

	members := []string{"member-1", "member-2", "member-3", "member-4"}
	if got := scheduledClusters(crp); !slices.Equal(got, members) {
		t.Fatalf("crp-overrides is placed on %v, want every member", got)
	}
	if c := meta.FindStatusCondition(crp.Status.Conditions, string(api.ClusterResourcePlacementOverriddenConditionType)); c.Reason != api.OverriddenSucceededReason {
		t.Errorf("ClusterResourcePlacementOverridden = %s: %s", c.Reason, c.Message)
	}
	region := map[string]string{"member-1": "east", "member-2": "west", "member-3": "central", "member-4": "east"}
	for _, m := range members {
		ps := clusterStatus(crp, m)
		if c := meta.FindStatusCondition(ps.Conditions, string(api.PerClusterOverriddenConditionType)); c.Reason != api.OverriddenSucceededReason {
			t.Errorf("%s Overridden = %s: %s", m, c.Reason, c.Message)
		}
		wantRO := []api.NamespacedName{{Name: "web-per-region-0", Namespace: "override-demo"}, {Name: "wrapped-region-0", Namespace: "override-demo"}}
		if region[m] == "central" {
			wantRO = append([]api.NamespacedName{{Name: "canary-not-central-0", Namespace: "override-demo"}}, wantRO...)
		}
		if !slices.Equal(ps.ApplicableClusterResourceOverrides, []string{"override-demo-labels-0"}) || !slices.Equal(ps.ApplicableResourceOverrides, wantRO) {
			t.Errorf("%s lists %v and %v, want [override-demo-labels-0] and %v", m, ps.ApplicableClusterResourceOverrides, ps.ApplicableResourceOverrides, wantRO)
		}
		s.expectOverridden(t, m, region[m])
	}
}

// expectOverridden checks the objects on a member as its overrides make them.
func (s *stack) expectOverridden(t *testing.T, member, region string) {
	t.Helper()
	k := s.member(member)
	poll.Every(t, step, patience, "the overridden objects on "+member, func() error {
		ns, err := k.CoreV1().Namespaces().Get(t.Context(), "override-demo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := ns.Labels["cluster-name"]; got != member {
			return fmt.Errorf("namespace override-demo has label cluster-name=%q", got)
		}
		d, err := k.AppsV1().Deployments("override-demo").Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		wantImage, wantReplicas := "registry."+region+".example/nginx:1.27", int32(1)
		if region == "east" {
			wantReplicas = 2
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != wantImage {
			return fmt.Errorf("Deployment web has image %s, want %s", got, wantImage)
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != wantReplicas {
			return fmt.Errorf("Deployment web has %v replicas, want %d", d.Spec.Replicas, wantReplicas)
		}
		if got := d.Labels["cluster-name"]; got != member {
			return fmt.Errorf("Deployment web has label cluster-name=%q (the namespace's override applies to what is in it)", got)
		}
		wrapped, err := k.CoreV1().ConfigMaps("override-demo").Get(t.Context(), "wrapped-settings", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("the enveloped ConfigMap: %w", err)
		}
		if wrapped.Data["region"] != region || wrapped.Labels["cluster-name"] != member {
			return fmt.Errorf("the enveloped ConfigMap has region %q and label cluster-name=%q", wrapped.Data["region"], wrapped.Labels["cluster-name"])
		}
		_, err = k.CoreV1().ConfigMaps("override-demo").Get(t.Context(), "canary", metav1.GetOptions{})
		switch {
		case region == "central" && !apierrors.IsNotFound(err):
			return fmt.Errorf("ConfigMap canary in the central region: %v, want none (Delete override)", err)
		case region != "central" && err != nil:
			return fmt.Errorf("ConfigMap canary: %w", err)
		}
		return nil
	})
}
