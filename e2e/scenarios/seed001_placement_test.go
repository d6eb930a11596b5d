package scenarios

import (
	"context"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/seeds"
)

// The members' labels (standalone.LocalMemberLabels): every member is production and
// critical-allowed; member-1 and member-4 are east, member-2 west, member-3 central;
// member-1 and member-3 have critical-level 1, member-2 and member-4 critical-level 2.

// namespaceWithSettings is a hub namespace with a ConfigMap in it, what the seed's
// placements select.
func namespaceWithSettings(name string) string {
	return fmt.Sprintf(`
apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: %[1]s
data:
  tier: %[1]s
`, name)
}

// TestSeed001PickAllWithRequiredAffinity: PickAll with a required affinity places the
// namespace on every production member, and only there.
func TestSeed001PickAllWithRequiredAffinity(t *testing.T) {
	s := fleetFor(t)
	s.relabel(t, "member-4", map[string]string{"environment": "staging"})
	s.deleteAtEnd(t, "crp-1")

	s.apply(t, namespaceWithSettings("prod-deployment")+"---\n"+seeds.Read(t, "001-1.yaml"))
	crp := s.converged(t, "crp-1", 1)
	production := []string{"member-1", "member-2", "member-3"}
	if got := scheduledClusters(crp); !slices.Equal(got, production) {
		t.Fatalf("crp-1 is placed on %v, want the production members %v", got, production)
	}
	for _, c := range production {
		if msg := meta.FindStatusCondition(clusterStatus(crp, c).Conditions, string(api.PerClusterScheduledConditionType)).Message; msg != api.ScheduledMessage(c, 0, 0) {
			t.Errorf("%s Scheduled message %q", c, msg)
		}
		s.expectSettings(t, c, "prod-deployment", true)
	}
	s.expectSettings(t, "member-4", "prod-deployment", false)
	wantSelected := []api.ResourceIdentifier{
		{Version: "v1", Kind: "Namespace", Name: "prod-deployment"},
		{Version: "v1", Kind: "ConfigMap", Name: "settings", Namespace: "prod-deployment"},
	}
	if !sameResources(crp.Status.SelectedResources, wantSelected) {
		t.Errorf("selectedResources = %+v, want %+v", crp.Status.SelectedResources, wantSelected)
	}
}

// TestSeed001PickFixed: PickFixed places on the named members; a name that is no member is
// reported, and the policy is not fulfilled.
func TestSeed001PickFixed(t *testing.T) {
	s := fleetFor(t)
	s.deleteAtEnd(t, "crp-2")
	s.apply(t, namespaceWithSettings("test-deployment")+`---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: crp-2
spec:
  policy:
    placementType: PickFixed
    clusterNames:
    - member-1
    - member-2
    - cluster9
  resourceSelectors:
    - group: ""
      kind: Namespace
      name: test-deployment
      version: v1
`)
	crp := s.placementWhen(t, "crp-2", "crp-2 to be applied on member-1 and member-2", func(crp *api.ClusterResourcePlacement) error {
		for _, c := range []string{"member-1", "member-2"} {
			ps := clusterStatus(crp, c)
			if ps == nil {
				return fmt.Errorf("no status for %s", c)
			}
			if err := conditionTrue(ps.Conditions, string(api.PerClusterAppliedConditionType), crp.Generation); err != nil {
				return fmt.Errorf("%s: %v", c, err)
			}
		}
		if clusterStatus(crp, "cluster9") == nil {
			return fmt.Errorf("cluster9 is not reported (statuses for %v)", scheduledClusters(crp))
		}
		return nil
	})
	if got := scheduledClusters(crp); !slices.Equal(got, []string{"member-1", "member-2"}) {
		t.Errorf("crp-2 is placed on %v, want member-1 and member-2", got)
	}
	missing := meta.FindStatusCondition(clusterStatus(crp, "cluster9").Conditions, string(api.PerClusterScheduledConditionType))
	if missing == nil || missing.Status != metav1.ConditionFalse || missing.Reason != api.ScheduleFailedReason || missing.Message != "no member cluster has this name" {
		t.Errorf("cluster9 is reported with Scheduled %+v, want False (%s): no member cluster has this name", missing, api.ScheduleFailedReason)
	}
	c := meta.FindStatusCondition(crp.Status.Conditions, string(api.ClusterResourcePlacementScheduledConditionType))
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != api.SchedulingPolicyUnfulfilledReason {
		t.Errorf("ClusterResourcePlacementScheduled = %+v, want False (%s)", c, api.SchedulingPolicyUnfulfilledReason)
	} else {
		t.Logf("ClusterResourcePlacementScheduled: %s", c.Message)
	}
	for _, m := range s.memberNames() {
		s.expectSettings(t, m, "test-deployment", m == "member-1" || m == "member-2")
	}
}

// TestSeed001PickNWithAffinities: PickN of 3 among the critical-allowed members, preferring
// critical-level 1, written as the seed writes it (a single preferred term given as an
// object, its preference as a one-element list, and critical-level: 1 as a number). member-2
// is made not critical-allowed: the three left are chosen, and only the preferred ones score.
func TestSeed001PickNWithAffinities(t *testing.T) {
	s := fleetFor(t)
	s.relabel(t, "member-2", map[string]string{"critical-allowed": "false"})
	s.deleteAtEnd(t, "crp-affinity")
	s.apply(t, namespaceWithSettings("critical-app")+`---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: crp-affinity
spec:
  resourceSelectors:
    - group: ""
      kind: Namespace
      name: critical-app
      version: v1
  policy:
    placementType: PickN
    numberOfClusters: 3
    affinity:
        clusterAffinity:
            preferredDuringSchedulingIgnoredDuringExecution:
              weight: 20
              preference:
              - labelSelector:
                  matchLabels:
                    critical-level: 1
            requiredDuringSchedulingIgnoredDuringExecution:
                clusterSelectorTerms:
                - labelSelector:
                    matchLabels:
                      critical-allowed: "true"
`)
	crp := s.converged(t, "crp-affinity", 1)
	want := []string{"member-1", "member-3", "member-4"}
	if got := scheduledClusters(crp); !slices.Equal(got, want) {
		t.Fatalf("crp-affinity is placed on %v, want the critical-allowed members %v", got, want)
	}
	for c, score := range map[string]int32{"member-1": 20, "member-3": 20, "member-4": 0} {
		if msg := meta.FindStatusCondition(clusterStatus(crp, c).Conditions, string(api.PerClusterScheduledConditionType)).Message; msg != api.ScheduledMessage(c, score, 0) {
			t.Errorf("%s Scheduled message %q, want affinity score %d", c, msg, score)
		}
	}
	for _, m := range s.memberNames() {
		s.expectSettings(t, m, "critical-app", m != "member-2")
	}
}

// TestSeed001PickNWithTopologySpread: PickN of 3 spread across regions must take one
// member per region, though two members are east. (The seed's maxSkew is 2; with four members
// only 1 shows the spread.)
func TestSeed001PickNWithTopologySpread(t *testing.T) {
	s := fleetFor(t)
	s.deleteAtEnd(t, "crp-spread")
	s.apply(t, namespaceWithSettings("video-app")+`---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: crp-spread
spec:
  resourceSelectors:
    - group: ""
      kind: Namespace
      name: video-app
      version: v1
  policy:
    placementType: PickN
    numberOfClusters: 3
    topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: region
      whenUnsatisfiable: DoNotSchedule
    - maxSkew: 2
      topologyKey: updateDay
      whenUnsatisfiable: ScheduleAnyway
`)
	crp := s.converged(t, "crp-spread", 1)
	regions := map[string]string{}
	for _, c := range scheduledClusters(crp) {
		regions[s.labels(t, c)["region"]] = c
	}
	if len(scheduledClusters(crp)) != 3 || len(regions) != 3 {
		t.Errorf("crp-spread is placed on %v, want one member in each of east, west and central", scheduledClusters(crp))
	}
}

// TestSeed001RollingUpdateKeepsWithinMaxUnavailable: a hub change rolls out one cluster at a
// time with maxUnavailable 1. A change that does not become available (here the Deployment
// is paused mid-change: on real nodes a crash-looping image does the same) stops at the
// first cluster, the others keep the previous version and say why; the next change repairs
// the first and rolls on to the others.
func TestSeed001RollingUpdateKeepsWithinMaxUnavailable(t *testing.T) {
	s := fleetFor(t)
	s.deleteAtEnd(t, "crp-rolling")
	clusters := []string{"member-1", "member-2", "member-3"}
	s.apply(t, rollingDeployment(1, false)+`---
apiVersion: v1
kind: Namespace
metadata:
  name: rolling-app
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: crp-rolling
spec:
  resourceSelectors:
    - group: ""
      kind: Namespace
      name: rolling-app
      version: v1
  policy:
    placementType: PickFixed
    clusterNames: [member-1, member-2, member-3]
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 1
      unavailablePeriodSeconds: 1
`)
	first := s.converged(t, "crp-rolling", 1)
	for _, c := range clusters {
		s.expectRevision(t, c, "1", false)
	}

	// The change that never becomes available.
	s.apply(t, rollingDeployment(2, true))
	stalled := s.placementWhen(t, "crp-rolling", "the rollout to stop after one cluster", func(crp *api.ClusterResourcePlacement) error {
		if crp.Status.ObservedResourceIndex == first.Status.ObservedResourceIndex {
			return fmt.Errorf("no new resource snapshot yet (index %s)", crp.Status.ObservedResourceIndex)
		}
		var updated, waiting []string
		for _, c := range clusters {
			ps := clusterStatus(crp, c)
			if ps == nil {
				return fmt.Errorf("no status for %s", c)
			}
			rs := meta.FindStatusCondition(ps.Conditions, string(api.PerClusterRolloutStartedConditionType))
			switch {
			case ps.ObservedResourceIndex == crp.Status.ObservedResourceIndex:
				if av := meta.FindStatusCondition(ps.Conditions, string(api.PerClusterAvailableConditionType)); av == nil || av.Status != metav1.ConditionFalse {
					return fmt.Errorf("%s holds the new snapshot and is not reported unavailable yet", c)
				}
				updated = append(updated, c)
			case rs != nil && rs.Status == metav1.ConditionFalse && rs.Reason == api.RolloutNotStartedYetReason && strings.Contains(rs.Message, "maxUnavailable 1 of 3"):
				waiting = append(waiting, c)
			default:
				return fmt.Errorf("%s is at index %s with RolloutStarted %+v", c, ps.ObservedResourceIndex, rs)
			}
		}
		if len(updated) != 1 || len(waiting) != 2 {
			return fmt.Errorf("updated %v, waiting %v", updated, waiting)
		}
		return nil
	})
	for _, c := range clusters {
		ps := clusterStatus(stalled, c)
		if ps.ObservedResourceIndex == stalled.Status.ObservedResourceIndex {
			t.Logf("%s took the change and is not available: %s", c, meta.FindStatusCondition(ps.Conditions, string(api.PerClusterAvailableConditionType)).Message)
			s.expectRevision(t, c, "2", true)
		} else {
			t.Logf("%s waits: %s", c, meta.FindStatusCondition(ps.Conditions, string(api.PerClusterRolloutStartedConditionType)).Message)
			s.expectRevision(t, c, "1", false)
		}
	}
	if c := meta.FindStatusCondition(stalled.Status.Conditions, string(api.ClusterResourcePlacementRolloutStartedConditionType)); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("ClusterResourcePlacementRolloutStarted = %+v, want False while two clusters wait", c)
	}

	// The repair rolls out everywhere. (A hub change leaves the placement's generation as it
	// is; the stalled state is not converged, so converged waits for the repair.)
	s.apply(t, rollingDeployment(3, false))
	done := s.converged(t, "crp-rolling", 1)
	for _, c := range clusters {
		if got := clusterStatus(done, c).ObservedResourceIndex; got != done.Status.ObservedResourceIndex {
			t.Errorf("%s holds snapshot %s, want %s", c, got, done.Status.ObservedResourceIndex)
		}
		s.expectRevision(t, c, "3", false)
	}
}

// rollingDeployment is the hub's Deployment of the rolling update scenario at a revision,
// optionally paused.
func rollingDeployment(revision int, paused bool) string {
	return fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: rolling-app
spec:
  replicas: 1
  paused: %t
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
      annotations: {e2e.flotilla.dev/revision: "%d"}
    spec:
      containers:
      - name: web
        image: nginx:1.27
`, paused, revision)
}

// expectRevision checks the rolling scenario's Deployment on a member.
func (s *stack) expectRevision(t *testing.T, member, revision string, paused bool) {
	t.Helper()
	d, err := s.member(member).AppsV1().Deployments("rolling-app").Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Errorf("Deployment rolling-app/web on %s: %v", member, err)
		return
	}
	if got := d.Spec.Template.Annotations["e2e.flotilla.dev/revision"]; got != revision || d.Spec.Paused != paused {
		t.Errorf("Deployment rolling-app/web on %s is at revision %s (paused %t), want %s (paused %t)", member, got, d.Spec.Paused, revision, paused)
	}
}

// TestSeed001ScaleOutAddsWithoutMoving: raising numberOfClusters adds clusters and leaves
// the chosen ones where they are, even when the clusters have changed since so that a fresh
// choice would be different.
func TestSeed001ScaleOutAddsWithoutMoving(t *testing.T) {
	s := fleetFor(t)
	scaleCRP := func(n int) string {
		return fmt.Sprintf(`
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: crp-scale
spec:
  resourceSelectors:
    - group: ""
      kind: Namespace
      name: scale-app
      version: v1
  policy:
    placementType: PickN
    numberOfClusters: %d
    affinity:
      clusterAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 50
          preference:
            labelSelector:
              matchLabels:
                e2e-scale: preferred
`, n)
	}
	// Other tests' relabels are undone when they end; these are undone after the placement
	// is deleted.
	s.deleteAtEnd(t, "crp-scale")
	s.apply(t, namespaceWithSettings("scale-app")+"---"+scaleCRP(2))
	crp := s.converged(t, "crp-scale", 1)
	before := scheduledClusters(crp)
	if !slices.Equal(before, []string{"member-1", "member-2"}) {
		t.Fatalf("crp-scale is placed on %v; with no member preferred, ties go by name: want member-1 and member-2", before)
	}
	uids := map[string]types.UID{}
	for _, c := range before {
		uids[c] = s.expectSettings(t, c, "scale-app", true)
	}

	// member-3 and member-4 become the preferred ones: chosen afresh, they would win.
	s.relabel(t, "member-3", map[string]string{"e2e-scale": "preferred"})
	s.relabel(t, "member-4", map[string]string{"e2e-scale": "preferred"})
	s.apply(t, scaleCRP(3))
	// Scheduled (fulfilled), applied and available for the new generation: three clusters.
	crp = s.converged(t, "crp-scale", 2)
	if got := scheduledClusters(crp); !slices.Equal(got, []string{"member-1", "member-2", "member-3"}) {
		t.Errorf("after scaling out crp-scale is on %v, want member-1 and member-2 kept and the best of the others, member-3, added", got)
	}
	for c, uid := range uids {
		if got := s.expectSettings(t, c, "scale-app", true); got != uid {
			t.Errorf("namespace scale-app on %s was recreated by the scale-out (uid %s, was %s)", c, got, uid)
		}
	}
	s.expectSettings(t, "member-3", "scale-app", true)
}

// TestSeed001MemberLeavesAndIsReplaced: a member that leaves the fleet is replaced by another
// one for the placements it held, without touching their other clusters. With the default
// leave policy (Keep, as upstream Fleet) what was placed on it stays there.
func TestSeed001MemberLeavesAndIsReplaced(t *testing.T) {
	s := fleetFor(t)
	t.Cleanup(func() {
		// Join member-4 again as it first joined, and remove what it kept.
		ctx := context.Background() // the test's context ends before its cleanup
		if out, err := s.kubectl(ctx, "", "apply", "-f", s.memberClusterFile("member-4")); err != nil {
			t.Errorf("join member-4 again: %v\n%s", err, out)
		}
		if err := s.member("member-4").CoreV1().Namespaces().Delete(ctx, "leave-app", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("remove namespace leave-app from member-4: %v", err)
		}
	})
	s.deleteAtEnd(t, "crp-leave")
	s.apply(t, namespaceWithSettings("leave-app")+`---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: crp-leave
spec:
  resourceSelectors:
    - group: ""
      kind: Namespace
      name: leave-app
      version: v1
  policy:
    placementType: PickN
    numberOfClusters: 2
    affinity:
      clusterAffinity:
        preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 20
          preference:
            labelSelector:
              matchLabels:
                region: east
`)
	crp := s.converged(t, "crp-leave", 1)
	if got := scheduledClusters(crp); !slices.Equal(got, []string{"member-1", "member-4"}) {
		t.Fatalf("crp-leave is placed on %v, want the east members member-1 and member-4", got)
	}
	kept := s.expectSettings(t, "member-1", "leave-app", true)

	// The member leaves as on a Fleet hub: its MemberCluster is deleted there.
	out := s.onHub(t, "", "delete", "membercluster", "member-4")
	t.Logf("kubectl delete membercluster member-4:\n%s", strings.TrimSpace(out))
	crp = s.placementWhen(t, "crp-leave", "crp-leave to be placed again without member-4", func(crp *api.ClusterResourcePlacement) error {
		got := scheduledClusters(crp)
		if len(got) != 2 || slices.Contains(got, "member-4") {
			return fmt.Errorf("placed on %v", got)
		}
		for _, typ := range []api.ClusterResourcePlacementConditionType{api.ClusterResourcePlacementAppliedConditionType, api.ClusterResourcePlacementAvailableConditionType} {
			if err := conditionTrue(crp.Status.Conditions, string(typ), crp.Generation); err != nil {
				return err
			}
		}
		return nil
	})
	got := scheduledClusters(crp)
	if got[0] != "member-1" {
		t.Errorf("crp-leave moved off member-1 when member-4 left: placed on %v", got)
	}
	if got := s.expectSettings(t, "member-1", "leave-app", true); got != kept {
		t.Errorf("namespace leave-app on member-1 was recreated when member-4 left")
	}
	replacement := got[1]
	t.Logf("member-4 was replaced by %s", replacement)
	s.expectSettings(t, replacement, "leave-app", true)
	// Keep: the member that left still runs what was placed on it.
	s.expectSettings(t, "member-4", "leave-app", true)
}

// relabel changes labels of a member as a user of the hub does, by applying its MemberCluster
// there again with them, and waits until `fleetctl get members` shows them. The member's
// original MemberCluster is applied again when the test ends.
func (s *stack) relabel(t *testing.T, member string, labels map[string]string) {
	t.Helper()
	path := s.memberClusterFile(member)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var mc api.MemberCluster
	if err := yaml.Unmarshal(data, &mc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	maps.Copy(mc.Labels, labels)
	changed, err := yaml.Marshal(mc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := s.kubectl(context.Background(), "", "apply", "-f", path); err != nil {
			t.Errorf("restore the labels of %s: %v\n%s", member, err, out)
		}
	})
	s.onHub(t, string(changed), "apply", "-f", "-")
	poll.Every(t, step, patience, member+" to show its new labels", func() error {
		if got := s.labels(t, member); !containsLabels(got, labels) {
			return fmt.Errorf("labels %v", got)
		}
		return nil
	})
}

// labels are a member's labels as `fleetctl get members NAME -o json` shows them.
func (s *stack) labels(t *testing.T, member string) map[string]string {
	out, _, err := s.fleetctl(t.Context(), "", "get", "members", member, "-o", "json")
	if err != nil {
		return nil
	}
	var mc api.MemberCluster
	if yaml.Unmarshal([]byte(out), &mc) != nil {
		return nil
	}
	return mc.Labels
}

func containsLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// expectSettings checks whether a member holds the namespace and its settings ConfigMap, and
// returns the namespace's uid.
func (s *stack) expectSettings(t *testing.T, member, namespace string, present bool) types.UID {
	t.Helper()
	ns, err := s.member(member).CoreV1().Namespaces().Get(t.Context(), namespace, metav1.GetOptions{})
	switch {
	case !present && apierrors.IsNotFound(err):
		return ""
	case !present && err == nil && ns.DeletionTimestamp == nil:
		t.Errorf("namespace %s is on %s, which the placement does not select", namespace, member)
		return ""
	case !present:
		return ""
	case err != nil:
		t.Errorf("namespace %s on %s: %v", namespace, member, err)
		return ""
	}
	if _, err := s.member(member).CoreV1().ConfigMaps(namespace).Get(t.Context(), "settings", metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap %s/settings on %s: %v", namespace, member, err)
	}
	return ns.UID
}

// sameResources compares resource lists regardless of order.
func sameResources(a, b []api.ResourceIdentifier) bool {
	key := func(r api.ResourceIdentifier) string {
		return strings.Join([]string{r.Group, r.Version, r.Kind, r.Namespace, r.Name}, "/")
	}
	ka, kb := make([]string, 0, len(a)), make([]string, 0, len(b))
	for _, r := range a {
		ka = append(ka, key(r))
	}
	for _, r := range b {
		kb = append(kb, key(r))
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return reflect.DeepEqual(ka, kb)
}
