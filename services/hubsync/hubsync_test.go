package hubsync_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/services/fleetctl/query"
	"github.com/flotilla-dev/flotilla/services/hubsync/crds"
)

// The hub's side of a placement: a namespace with a ConfigMap, selected by label.
const webHub = `
apiVersion: v1
kind: Namespace
metadata:
  name: web
  labels:
    app: web
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: web
data:
  color: green
`

func webCRP(name, maxUnavailable string) string {
	return `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: ` + name + `
spec:
  resourceSelectors:
    - group: ""
      kind: Namespace
      version: v1
      labelSelector:
        matchLabels:
          app: web
  policy:
    placementType: PickAll
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: ` + maxUnavailable + `
      unavailablePeriodSeconds: 1
`
}

// TestHubCluster is the hub cluster mode as a user meets it: member clusters and a placement
// applied with kubectl to a real API server reach the members through the bus; the hub shows
// their status as upstream Fleet does; an invalid placement is refused at apply time; a
// restarted hubsync and a second replica publish nothing twice; and deleting the placement on
// the hub deletes it.
func TestHubCluster(t *testing.T) {
	f := newFixture(t)
	f.startHubsync("replica-a")
	f.waitForPass("replica-a", 0)

	t.Run("members join from the hub", func(t *testing.T) {
		f.apply(f.memberClusters())
		poll.Every(t, step, patience, "the status service to know the members", func() error {
			ms, err := f.q.Members(t.Context(), "")
			if err != nil || len(ms) != len(f.members) {
				return fmt.Errorf("%d member(s), %v", len(ms), err)
			}
			return nil
		})
		f.startWorkers()
		poll.Every(t, step, patience, "the hub's MemberClusters to show Joined=True", func() error {
			for _, m := range f.members {
				u, err := f.hub.Resource(crds.Member.GVR()).Get(t.Context(), m, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if c, ok := conditionOf(u, string(api.ConditionTypeMemberClusterJoined)); !ok || c.Status != metav1.ConditionTrue {
					return fmt.Errorf("%s: Joined %+v", m, c)
				}
			}
			return nil
		})
		out, err := f.kubectl("", "get", "memberclusters")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubectl get memberclusters:\n%s", out)
		if !strings.HasPrefix(out, "NAME") || !strings.Contains(out, "JOINED") || !strings.Contains(out, "NODE-COUNT") {
			t.Errorf("kubectl get memberclusters shows no upstream columns:\n%s", out)
		}
	})

	t.Run("a placement applied to the hub reaches the members", func(t *testing.T) {
		f.apply(webHub + "---" + webCRP("web", "100%"))
		crp := f.availableAt("web")
		for _, m := range f.members {
			cm, err := kubernetesFor(f, m).CoreV1().ConfigMaps("web").Get(t.Context(), "settings", metav1.GetOptions{})
			if err != nil || cm.Data["color"] != "green" {
				t.Errorf("ConfigMap web/settings on %s: %v %v", m, cm.Data, err)
			}
		}
		statuses, _, _ := unstructured.NestedSlice(crp.Object, "status", "placementStatuses")
		var clusters []string
		for _, s := range statuses {
			clusters = append(clusters, fmt.Sprint(s.(map[string]any)["clusterName"]))
		}
		slices.Sort(clusters)
		if !slices.Equal(clusters, f.members) {
			t.Errorf("status.placementStatuses lists %v, want %v", clusters, f.members)
		}
		out, err := f.kubectl("", "get", "clusterresourceplacement.v1beta1.placement.kubernetes-fleet.io", "web", "-o", "jsonpath={.status.placementStatuses}")
		if err != nil {
			t.Fatal(err)
		}
		var fromJSONPath []api.ResourcePlacementStatus
		if err := json.Unmarshal([]byte(out), &fromJSONPath); err != nil || len(fromJSONPath) != len(f.members) {
			t.Errorf("kubectl get -o jsonpath={.status.placementStatuses} printed %v:\n%s", err, out)
		}
		// kubectl wait judges the condition's observedGeneration against the hub's generation.
		if out, err := f.kubectl("", "wait", "crp/web", "--for=condition=ClusterResourcePlacementAvailable", "--timeout=60s"); err != nil {
			t.Errorf("kubectl wait: %v", err)
		} else {
			t.Logf("kubectl wait: %s", strings.TrimSpace(out))
		}
	})

	t.Run("kubectl shows upstream's columns", func(t *testing.T) {
		out, err := f.kubectl("", "get", "crp")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("kubectl get crp:\n%s", out)
		header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
		want := []string{"NAME", "GEN", "SCHEDULED", "SCHEDULED-GEN", "AVAILABLE", "AVAILABLE-GEN", "AGE"}
		if !slices.Equal(header, want) {
			t.Errorf("kubectl get crp columns %v, want upstream's %v", header, want)
		}
		row := strings.Fields(strings.SplitN(out, "\n", 3)[1])
		if len(row) < 6 || row[0] != "web" || row[2] != "True" || row[4] != "True" || row[3] != row[1] || row[5] != row[1] {
			t.Errorf("kubectl get crp row %v, want web scheduled and available at its generation", row)
		}
	})

	t.Run("an invalid placement is refused at apply time with its field path", func(t *testing.T) {
		invalid := `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: broken
spec:
  resourceSelectors:
    - group: ""
      kind: Namespace
      version: v1
      name: web
  policy:
    placementType: PickN
`
		out, err := f.kubectl(invalid, "apply", "-f", "-")
		if err == nil {
			t.Fatalf("kubectl apply of a PickN placement without numberOfClusters succeeded:\n%s", out)
		}
		t.Logf("kubectl apply refused it:\n%s", out)
		if !strings.Contains(out, "spec.policy.numberOfClusters") {
			t.Errorf("the refusal does not name spec.policy.numberOfClusters:\n%s", out)
		}
		if _, err := f.placement("broken"); !apierrors.IsNotFound(err) {
			t.Errorf("the refused placement is on the hub: %v", err)
		}
		// An update that breaks Fleet's update rules is refused too.
		out, err = f.kubectl(strings.Replace(webCRP("web", "100%"), "PickAll", "PickN\n    numberOfClusters: 1", 1), "apply", "-f", "-")
		if err == nil || !strings.Contains(out, "spec.policy.placementType") {
			t.Errorf("changing placementType was not refused with its field path: %v\n%s", err, out)
		}
	})

	t.Run("a restart publishes nothing twice, and what was deleted meanwhile", func(t *testing.T) {
		f.apply(strings.Replace(webCRP("gone", "100%"), "app: web", "app: none", 1))
		poll.Every(t, step, patience, "placement gone to reach the status service", func() error {
			_, err := f.q.Placement(t.Context(), "gone")
			return err
		})
		before := f.subjectCounts()
		f.stopReplica("replica-a")
		// While no hubsync runs, a placement is deleted on the hub.
		if out, err := f.kubectl("", "delete", "crp", "gone"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		f.startHubsync("replica-b")
		p := f.waitForPass("replica-b", 0)
		if p.Published != 0 || p.Undone != 1 {
			t.Errorf("the restarted hubsync's first pass published %d and deleted %d, want only the deletion of gone", p.Published, p.Undone)
		}
		poll.Every(t, step, patience, "placement gone to be deleted", func() error {
			if _, err := f.q.Placement(t.Context(), "gone"); !errors.Is(err, query.ErrNotFound) {
				return fmt.Errorf("the status service still knows it: %v", err)
			}
			return nil
		})
		f.availableAt("web")
		after := f.subjectCounts()
		before["flotilla.placement.gone"]++ // its deletion, and nothing else
		if !maps.Equal(before, after) {
			t.Errorf("events per subject across a restart:\nbefore %v\nafter  %v", before, after)
		}
	})

	t.Run("a second replica publishes nothing twice", func(t *testing.T) {
		f.startHubsync("replica-c")
		before := f.subjectCounts()
		f.apply(webCRP("web", "50%"))
		crp := f.availableAt("web")
		if crp.GetGeneration() != 2 {
			t.Errorf("the hub's placement is at generation %d, want 2", crp.GetGeneration())
		}
		after := f.subjectCounts()
		for s, n := range after {
			want := before[s]
			if s == "flotilla.placement.web" {
				want++
			}
			if n != want {
				t.Errorf("%s holds %d event(s), want %d (one more for the placement's update only)", s, n, want)
			}
		}
		// The leader goes; the other replica takes over and publishes nothing again.
		n := f.passCount("replica-c")
		f.stopReplica("replica-b")
		if p := f.waitForPass("replica-c", n); p.Published != 0 || p.Undone != 0 {
			t.Errorf("the new leader's pass published %d and deleted %d, want nothing", p.Published, p.Undone)
		}
		if again := f.subjectCounts(); !maps.Equal(after, again) {
			t.Errorf("events per subject changed when the other replica took over:\nbefore %v\nafter  %v", after, again)
		}
	})

	t.Run("fleetctl refuses to change what the hub keeps", func(t *testing.T) {
		before := f.subjectCounts()
		for _, args := range [][]string{{"apply", "-f", "-"}, {"delete", "crp", "web"}} {
			out, err := f.fleetctl(webCRP("web", "25%"), args...)
			if err == nil || !strings.Contains(err.Error(), "kept on the hub cluster") {
				t.Errorf("fleetctl %s of the hub's placement: %v, want a refusal naming the hub\n%s", strings.Join(args, " "), err, out)
			}
			t.Logf("fleetctl %s: %v", strings.Join(args, " "), err)
		}
		if after := f.subjectCounts(); !maps.Equal(before, after) {
			t.Errorf("fleetctl published on the hub's subjects:\nbefore %v\nafter  %v", before, after)
		}
		// A placement of fleetctl's own goes through as before.
		if out, err := f.fleetctl(strings.Replace(webCRP("cli-web", "25%"), "app: web", "app: none", 1), "apply", "-f", "-"); err != nil {
			t.Errorf("fleetctl apply of its own placement: %v\n%s", err, out)
		}
		if _, err := f.fleetctl("", "delete", "crp", "cli-web"); err != nil {
			t.Errorf("fleetctl delete of its own placement: %v", err)
		}
	})

	t.Run("deleting the placement on the hub deletes it", func(t *testing.T) {
		if out, err := f.kubectl("", "delete", "crp", "web"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		poll.Every(t, step, patience, "the placement to be gone from the status service and the members", func() error {
			if _, err := f.q.Placement(t.Context(), "web"); !errors.Is(err, query.ErrNotFound) {
				return fmt.Errorf("the status service still knows web: %v", err)
			}
			for _, m := range f.members {
				_, err := kubernetesFor(f, m).CoreV1().ConfigMaps("web").Get(t.Context(), "settings", metav1.GetOptions{})
				if !apierrors.IsNotFound(err) {
					return fmt.Errorf("ConfigMap web/settings is still on %s (%v)", m, err)
				}
			}
			return nil
		})
	})
}
