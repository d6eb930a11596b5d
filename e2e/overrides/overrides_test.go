package overrides_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
	"github.com/flotilla-dev/flotilla/harness/poll"
	"github.com/flotilla-dev/flotilla/harness/postgres"
	"github.com/flotilla-dev/flotilla/harness/servicetest"
	"github.com/flotilla-dev/flotilla/services/fleetctl/cli"
	"github.com/flotilla-dev/flotilla/services/rollout"
	"github.com/flotilla-dev/flotilla/services/scheduler"
	"github.com/flotilla-dev/flotilla/services/status"
)

func TestMain(m *testing.M) { os.Exit(postgres.RunMain(m)) }

// patience is long because CI runs this beside other packages on two cores.
const patience = 3 * time.Minute

// The fleet: two members in the east, one in the west, one in the test environment.
const members = `
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata: {name: member-1, labels: {region: east, env: prod}}
spec: {heartbeatPeriodSeconds: 600}
---
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata: {name: member-2, labels: {region: west, env: prod}}
spec: {heartbeatPeriodSeconds: 600}
---
apiVersion: cluster.kubernetes-fleet.io/v1
kind: MemberCluster
metadata: {name: member-3, labels: {env: test}}
spec: {heartbeatPeriodSeconds: 600}
`

// A namespace with a Deployment, placed on every member (a placement.kubernetes-fleet.io/v1
// placement, as the newer documentation writes it), with upstream documentation's
// overrides: a label from the cluster's name (v1alpha1, as the older docs write it), an
// image per region (v1), and the Deployment kept off the test environment.
const placed = `
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {app: shop}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ClusterResourcePlacement
metadata: {name: shop}
spec:
  resourceSelectors: [{group: "", version: v1, kind: Namespace, name: shop}]
  policy: {placementType: PickAll}
---
apiVersion: placement.kubernetes-fleet.io/v1alpha1
kind: ClusterResourceOverride
metadata: {name: shop-labels}
spec:
  placement: {name: shop}
  clusterResourceSelectors: [{group: "", version: v1, kind: Namespace, name: shop}]
  policy:
    overrideRules:
      - clusterSelector: {clusterSelectorTerms: []}
        jsonPatchOverrides:
          - {op: add, path: /metadata/labels/cluster-name, value: "${MEMBER-CLUSTER-NAME}"}
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ResourceOverride
metadata: {name: web-image, namespace: shop}
spec:
  placement: {name: shop}
  resourceSelectors: [{group: apps, version: v1, kind: Deployment, name: web}]
  policy:
    overrideRules:
      - clusterSelector:
          clusterSelectorTerms: [{labelSelector: {matchLabels: {env: prod}}}]
        jsonPatchOverrides:
          - {op: replace, path: /spec/template/spec/containers/0/image, value: "registry-${MEMBER-CLUSTER-LABEL-KEY-region}.example/nginx:1.27"}
      - clusterSelector:
          clusterSelectorTerms: [{labelSelector: {matchLabels: {env: test}}}]
        overrideType: Delete
`

// Through the services: each member's work is its own, the status says which overrides
// apply where (and Overridden as upstream does), fleetctl gets the overrides as applied,
// and refuses, before publishing anything, an override of an object another one already
// selects, naming both.
func TestOverridesThroughTheServices(t *testing.T) {
	env := servicetest.New(t)
	opts := env.Options()
	env.Run("scheduler", func(ctx context.Context) error { return scheduler.Run(ctx, scheduler.Config{Options: opts}) })
	env.Run("rollout", func(ctx context.Context) error { return rollout.Run(ctx, rollout.Config{Options: opts}) })
	env.Run("status", func(ctx context.Context) error { return status.Run(ctx, status.Config{Options: opts}) })
	w := playWorkers(t, env)
	fleetctl := func(stdin string, args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := cli.Run(t.Context(), append([]string{"--nats", env.NATSURL}, args...), cli.Options{
			In: strings.NewReader(stdin), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
		return out.String(), errOut.String(), err
	}
	apply := func(yaml string) {
		t.Helper()
		if out, errOut, err := fleetctl(yaml, "apply", "-f", "-"); err != nil {
			t.Fatalf("fleetctl apply: %v\n%s%s", err, out, errOut)
		}
	}
	apply(members)
	apply(placed)

	crp := waitPlacement(t, fleetctl, "every member applied or overridden", func(crp *api.ClusterResourcePlacement) error {
		if len(crp.Status.PlacementStatuses) != 3 {
			return fmt.Errorf("%d clusters", len(crp.Status.PlacementStatuses))
		}
		for _, ps := range crp.Status.PlacementStatuses {
			if c := meta.FindStatusCondition(ps.Conditions, "Available"); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("%s: %v", ps.ClusterName, conditionList(ps.Conditions))
			}
		}
		return nil
	})
	for _, ps := range crp.Status.PlacementStatuses {
		c := meta.FindStatusCondition(ps.Conditions, "Overridden")
		if c == nil {
			t.Errorf("%s: no Overridden condition: %v", ps.ClusterName, conditionList(ps.Conditions))
			continue
		}
		if c.Reason != api.OverriddenSucceededReason || !equal(ps.ApplicableClusterResourceOverrides, []string{"shop-labels-0"}) ||
			!equal(ps.ApplicableResourceOverrides, []api.NamespacedName{{Name: "web-image-0", Namespace: "shop"}}) {
			t.Errorf("%s: Overridden %s, applicable %v and %v", ps.ClusterName, c.Reason, ps.ApplicableClusterResourceOverrides, ps.ApplicableResourceOverrides)
		}
	}
	if c := meta.FindStatusCondition(crp.Status.Conditions, "ClusterResourcePlacementOverridden"); c.Reason != api.OverriddenSucceededReason ||
		c.Message != "The selected resources are successfully overridden in 3 cluster(s)" {
		t.Errorf("ClusterResourcePlacementOverridden = %s: %s", c.Reason, c.Message)
	}

	// What each member was sent.
	for cluster, want := range map[string]string{"member-1": "registry-east.example/nginx:1.27", "member-2": "registry-west.example/nginx:1.27", "member-3": ""} {
		work := w.latest(cluster, "shop")
		ns, deploy := find(work, "Namespace"), find(work, "Deployment")
		if got := nested(ns, "metadata", "labels", "cluster-name"); got != cluster {
			t.Errorf("the namespace on %s has cluster-name %v", cluster, got)
		}
		if want == "" {
			if deploy != nil {
				t.Errorf("%s (env test) was sent the Deployment its override deletes there", cluster)
			}
			continue
		}
		if got := nested(deploy, "spec", "template", "spec", "containers", "image"); got != want {
			t.Errorf("image on %s = %v, want %s", cluster, got, want)
		}
		if got := nested(deploy, "metadata", "labels", "cluster-name"); got != cluster {
			t.Errorf("the Deployment on %s has cluster-name %v (a namespace's ClusterResourceOverride applies to what is in it)", cluster, got)
		}
	}

	// fleetctl shows the placement, members and overrides in the version they were written in.
	if crp.APIVersion != "placement.kubernetes-fleet.io/v1" {
		t.Errorf("the placement written in v1 shows as %s", crp.APIVersion)
	}
	if out, _, err := fleetctl("", "get", "memberclusters.v1.cluster.kubernetes-fleet.io", "member-3", "-o", "yaml"); err != nil ||
		!strings.Contains(out, "apiVersion: cluster.kubernetes-fleet.io/v1\n") {
		t.Errorf("fleetctl get member-3 -o yaml: %v\n%s", err, out)
	}
	out, errOut, err := fleetctl("", "get", "cro", "shop-labels", "-o", "yaml")
	if err != nil || !strings.Contains(out, "apiVersion: placement.kubernetes-fleet.io/v1alpha1") || !strings.Contains(out, "overrideType: JSONPatch") {
		t.Errorf("fleetctl get cro shop-labels -o yaml: %v %s\n%s", err, errOut, out)
	}
	if out, _, err := fleetctl("", "get", "ro", "-A"); err != nil || !strings.Contains(out, "shop        web-image") {
		t.Errorf("fleetctl get ro -A: %v\n%s", err, out)
	}

	// A second ResourceOverride of the Deployment is refused before anything is published.
	second := `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceOverride
metadata: {name: web-replicas, namespace: shop}
spec:
  resourceSelectors: [{group: apps, version: v1, kind: Deployment, name: web}]
  policy:
    overrideRules:
      - clusterSelector: {clusterSelectorTerms: []}
        jsonPatchOverrides: [{op: replace, path: /spec/replicas, value: 5}]
`
	out, errOut, err = fleetctl(second, "apply", "-f", "-")
	if err == nil || !strings.Contains(errOut, "the resource has been selected by both web-replicas and web-image") ||
		!strings.Contains(errOut, "spec.resourceSelectors[0]") {
		t.Errorf("fleetctl apply of a second override of the Deployment: err %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	if published(t, env, api.OverrideKey{Kind: api.ResourceOverrideKind, Namespace: "shop", Name: "web-replicas"}) {
		t.Error("the refused override was published")
	}

	// A patch that cannot apply on one cluster fails that cluster only, with the reason. (It is
	// the last cluster the rollout reaches: one that fails counts as unavailable, and with the
	// default maxUnavailable of 25% the others would wait for it, as upstream's do.)
	apply(`
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceOverride
metadata: {name: web-image, namespace: shop}
spec:
  placement: {name: shop}
  resourceSelectors: [{group: apps, version: v1, kind: Deployment, name: web}]
  policy:
    overrideRules:
      - clusterSelector:
          clusterSelectorTerms: [{labelSelector: {matchLabels: {env: test}}}]
        jsonPatchOverrides:
          - {op: replace, path: /spec/template/spec/containers/1/image, value: "nginx:test"}
`)
	crp = waitPlacement(t, fleetctl, "member-3's overrides failed, the others' applied", func(crp *api.ClusterResourcePlacement) error {
		if c := clusterCondition(crp, "member-3", "Overridden"); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("member-3 Overridden %+v", c)
		}
		for _, other := range []string{"member-1", "member-2"} {
			if c := clusterCondition(crp, other, "Available"); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("%s Available %+v", other, c)
			}
		}
		// member-1 stays Available on its earlier work until the new one reaches it.
		if got := nested(find(w.latest("member-1", "shop"), "Deployment"), "spec", "template", "spec", "containers", "image"); got != "nginx" {
			return fmt.Errorf("image sent to member-1, which no rule selects now = %v, want the hub's nginx", got)
		}
		return nil
	})
	c := clusterCondition(crp, "member-3", "Overridden")
	wantMsg := `Failed to apply the override rules on the resources: ResourceOverrideSnapshot "web-image-1" failed to apply on Deployment "web" in namespace "shop": ` +
		`overrideRules[0].jsonPatchOverrides[0] (replace /spec/template/spec/containers/1/image): the path does not exist in the object`
	if c.Reason != api.OverriddenFailedReason || c.Message != wantMsg {
		t.Errorf("member-3 Overridden = %s: %s\nwant %s", c.Reason, c.Message, wantMsg)
	}
	if pc := meta.FindStatusCondition(crp.Status.Conditions, "ClusterResourcePlacementOverridden"); pc == nil || pc.Reason != api.OverriddenFailedReason ||
		pc.Message != "Failed to override resources in 1 cluster(s)" {
		t.Errorf("ClusterResourcePlacementOverridden = %+v", pc)
	}
	if find(w.latest("member-3", "shop"), "Deployment") != nil {
		t.Error("member-3 was sent the work its overrides failed on")
	}

	// Deleting the override rolls the placement out without it.
	if out, errOut, err := fleetctl("", "delete", "ro", "web-image", "-n", "shop"); err != nil {
		t.Fatalf("fleetctl delete ro: %v\n%s%s", err, out, errOut)
	}
	waitPlacement(t, fleetctl, "the placement rolled out without the ResourceOverride", func(crp *api.ClusterResourcePlacement) error {
		for _, ps := range crp.Status.PlacementStatuses {
			if len(ps.ApplicableResourceOverrides) > 0 || clusterCondition(crp, ps.ClusterName, "Available") == nil {
				return fmt.Errorf("%s: %v, %v", ps.ClusterName, ps.ApplicableResourceOverrides, conditionList(ps.Conditions))
			}
		}
		if got := nested(find(w.latest("member-3", "shop"), "Deployment"), "spec", "template", "spec", "containers", "image"); got != "nginx" {
			return fmt.Errorf("image sent to member-3 without the override = %v, want the hub's nginx", got)
		}
		return nil
	})
	if _, _, err := fleetctl("", "get", "ro", "web-image", "-n", "shop"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("fleetctl get ro web-image after delete: %v", err)
	}
}

// workers plays the apply workers: it reads every work sent and reports it applied and available.
type workers struct {
	mu   sync.Mutex
	sent map[string]events.WorkDesired
}

func playWorkers(t *testing.T, env *servicetest.Env) *workers {
	t.Helper()
	w := &workers{sent: map[string]events.WorkDesired{}}
	cons, err := env.JS.OrderedConsumer(t.Context(), bus.StreamWork, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		ev, err := bus.DecodeJetStream(m)
		if err != nil || ev.Type() != events.TypeWorkDesired {
			return
		}
		work, err := events.DecodeAs[events.WorkDesired](ev)
		if err != nil {
			t.Errorf("work on %s: %v", m.Subject(), err)
			return
		}
		w.mu.Lock()
		w.sent[work.Cluster+"/"+work.Placement] = *work
		w.mu.Unlock()
		subj, _ := events.WorkStatusSubject(work.Cluster, work.Placement)
		ok := events.Condition{Status: "True", Reason: "Applied"}
		env.Publish(events.TypeWorkReported, subj, events.WorkReported{Cluster: work.Cluster, Placement: work.Placement,
			ResourceIndex: work.ResourceIndex, Generation: work.Generation, ObservedAt: time.Now().UTC(),
			Applied:   events.Condition{Status: "True", Reason: api.ApplySucceededReason, Message: "applied"},
			Available: events.Condition{Status: "True", Reason: api.AvailableReason, Message: "available"},
			Manifests: []events.ManifestResult{{Resource: api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "shop"}, Applied: ok, Available: ok}},
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return w
}

func (w *workers) latest(cluster, placement string) []map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []map[string]any
	for _, m := range w.sent[cluster+"/"+placement].Manifests {
		var obj map[string]any
		_ = json.Unmarshal(m, &obj)
		out = append(out, obj)
	}
	return out
}

func find(manifests []map[string]any, kind string) map[string]any {
	for _, m := range manifests {
		if m["kind"] == kind {
			return m
		}
	}
	return nil
}

// nested reads a field by keys, taking the first item of a list on the way.
func nested(obj map[string]any, path ...string) any {
	var v any = obj
	for _, p := range path {
		if list, ok := v.([]any); ok && len(list) > 0 {
			v = list[0]
		}
		m, _ := v.(map[string]any)
		v = m[p]
	}
	return v
}

type runner func(stdin string, args ...string) (string, string, error)

func waitPlacement(t *testing.T, fleetctl runner, what string, check func(*api.ClusterResourcePlacement) error) *api.ClusterResourcePlacement {
	t.Helper()
	var crp *api.ClusterResourcePlacement
	poll.Every(t, 200*time.Millisecond, patience, what, func() error {
		out, errOut, err := fleetctl("", "get", "crp", "shop", "-o", "json")
		if err != nil {
			return fmt.Errorf("%v %s", err, errOut)
		}
		crp = &api.ClusterResourcePlacement{}
		if err := json.Unmarshal([]byte(out), crp); err != nil {
			return err
		}
		return check(crp)
	})
	return crp
}

func clusterCondition(crp *api.ClusterResourcePlacement, cluster, typ string) *metav1.Condition {
	for _, ps := range crp.Status.PlacementStatuses {
		if ps.ClusterName == cluster {
			return meta.FindStatusCondition(ps.Conditions, typ)
		}
	}
	return nil
}

func conditionList(cs []metav1.Condition) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Type+"="+string(c.Status)+"/"+c.Reason)
	}
	return out
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// published reports whether an event about the override is on the bus.
func published(t *testing.T, env *servicetest.Env, k api.OverrideKey) bool {
	t.Helper()
	s, err := env.JS.Stream(t.Context(), bus.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	subject, err := events.OverrideSubject(k)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.GetLastMsgForSubject(t.Context(), subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}
