package change

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/fleetctl/input"
)

func load(t *testing.T, text string) []input.Document {
	t.Helper()
	docs, problems := input.Load([]input.Source{{Name: "in.yaml", Data: []byte(text)}})
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	return docs
}

func manifestOf(t *testing.T, c Change) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(c.Payload.(events.HubResourceUpserted).Manifest, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestHubManifests(t *testing.T) {
	docs := load(t, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  uid: 5b64f73b-ce6d-4ada-998e-db6f682155f6
  resourceVersion: "898"
  labels: {kubeadmiral.io/propagation-policy-name: pp, flotilla.dev/conflict-resolution: adopt}
spec: {replicas: 2}
status: {replicas: 2}
---
apiVersion: v1
kind: Namespace
metadata: {name: web}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: letsencrypt}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop, annotations: {kubeadmiral.io/conflict-resolution: adopt}}
spec: {clusterIP: 10.0.0.1, clusterIPs: [10.0.0.1]}
`)
	items, problems := ForApply(docs, Options{Namespace: "team"})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	var subjects []string
	for _, it := range items {
		subjects = append(subjects, it.Changes[0].Subject)
	}
	want := []string{
		"flotilla.hub.apps.Deployment.team.web",
		"flotilla.hub.core.Namespace.-.web",
		"flotilla.hub.rbac_authorization_k8s_io.ClusterRole.-.reader",
		"flotilla.hub.cert-manager_io.ClusterIssuer.-.letsencrypt",
		"flotilla.hub.core.Service.shop.web",
	}
	if !reflect.DeepEqual(subjects, want) {
		t.Errorf("subjects:\n%s\nwant:\n%s", strings.Join(subjects, "\n"), strings.Join(want, "\n"))
	}

	deploy := manifestOf(t, items[0].Changes[0])
	wantDeploy := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		// The namespace given, no server fields, and a stale adopt label
		// removed: the object does not ask for adoption.
		"metadata": map[string]any{"name": "web", "namespace": "team", "labels": map[string]any{"kubeadmiral.io/propagation-policy-name": "pp"}},
		"spec":     map[string]any{"replicas": float64(2)},
	}
	if !reflect.DeepEqual(deploy, wantDeploy) {
		t.Errorf("deployment manifest = %v\nwant %v", deploy, wantDeploy)
	}
	if !strings.Contains(strings.Join(items[0].Warnings, ""), "server-populated fields") {
		t.Errorf("no warning about removed fields: %v", items[0].Warnings)
	}
	// An adopt annotation without a KubeAdmiral policy label changes nothing.
	svc := manifestOf(t, items[4].Changes[0])
	if md := svc["metadata"].(map[string]any); md["labels"] != nil {
		t.Errorf("service got labels %v", md["labels"])
	}
	if spec := svc["spec"].(map[string]any); spec["clusterIP"] != nil || spec["clusterIPs"] != nil {
		t.Errorf("service kept its allocated cluster IP: %v", spec)
	}
}

func TestEnvelopesAreHubManifests(t *testing.T) {
	docs := load(t, `apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceEnvelope
metadata: {name: wrapped, namespace: app}
data:
  cm.yaml:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: inner, namespace: app}
`)
	items, problems := ForApply(docs, Options{})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if len(items[0].Warnings) > 0 {
		t.Errorf("warnings for a typed envelope: %v", items[0].Warnings)
	}
	c := items[0].Changes[0]
	if c.Type != events.TypeHubResourceUpserted || c.Subject != "flotilla.hub.placement_kubernetes-fleet_io.ResourceEnvelope.app.wrapped" {
		t.Errorf("change = %s on %s", c.Type, c.Subject)
	}
	m := manifestOf(t, c)
	if m["kind"] != "ResourceEnvelope" || m["data"].(map[string]any)["cm.yaml"].(map[string]any)["kind"] != "ConfigMap" {
		t.Errorf("manifest = %v", m)
	}
}

func TestPlacementsAndMembersAreSentWithoutServerFields(t *testing.T) {
	docs := load(t, `apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata:
  name: web
  generation: 4
  uid: "1234"
  resourceVersion: "9"
  creationTimestamp: "2026-01-01T00:00:00Z"
  labels: {team: a}
spec:
  resourceSelectors: [{group: "", version: v1, kind: Namespace, name: web}]
status:
  observedResourceIndex: "3"
---
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata: {name: m1, generation: 2}
spec: {}
status:
  properties:
    kubernetes-fleet.io/node-count: {value: "3", observationTime: "2026-01-01T00:00:00Z"}
`)
	items, problems := ForApply(docs, Options{})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	// The member comes first: placements are published after what they may read.
	crp := items[1].Changes[0].Payload.(events.PlacementUpserted).Placement
	if crp.Generation != 0 || crp.UID != "" || crp.ResourceVersion != "" || !crp.CreationTimestamp.IsZero() || crp.Status.ObservedResourceIndex != "" {
		t.Errorf("placement keeps server fields: %+v %+v", crp.ObjectMeta, crp.Status)
	}
	if crp.Labels["team"] != "a" || crp.Spec.Policy.PlacementType != api.PickAllPlacementType {
		t.Errorf("placement lost what the user set: %+v", crp)
	}
	m := items[0].Changes[0].Payload.(events.MemberJoined).Member
	if m.Generation != 0 || len(m.Status.Properties) != 0 || m.Spec.HeartbeatPeriodSeconds != 60 {
		t.Errorf("member = %+v", m)
	}
	if items[0].Changes[0].Type != events.TypeMemberJoined || items[0].Changes[0].Subject != "flotilla.member.m1" {
		t.Errorf("member change = %+v", items[0].Changes[0])
	}
}

func TestForDelete(t *testing.T) {
	docs, problems := input.Decode([]input.Source{{Name: "in.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
---
apiVersion: core.kubeadmiral.io/v1alpha1
kind: ClusterPropagationPolicy
metadata: {name: infra}
spec: {schedulingMode: Duplicate}
---
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata: {name: m1}
spec: {heartbeatPeriodSeconds: 9999}
---
apiVersion: v1
kind: Secret
metadata: {generateName: s-}
`)}})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	items, problems := ForDelete(docs, events.LeaveDelete, Options{})
	if len(problems) != 1 || problems[0].String() != "in.yaml: document 4 (Secret, line 15): metadata.name: is required to delete an object" {
		t.Errorf("problems = %v", problems)
	}
	var got []string
	for _, it := range items {
		for _, c := range it.Changes {
			got = append(got, c.Type+" "+c.Subject)
		}
	}
	want := []string{
		events.TypeHubResourceDeleted + " flotilla.hub.core.ConfigMap.default.cfg",
		events.TypePlacementDeleted + " flotilla.placement.cpp_infra",
		events.TypePlacementDeleted + " flotilla.placement.cpp-adopt_infra",
		events.TypeMemberLeft + " flotilla.member.m1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if lp := items[2].Changes[0].Payload.(events.MemberLeft).LeavePolicy; lp != events.LeaveDelete {
		t.Errorf("leave policy = %q", lp)
	}
}

func TestClusterScoped(t *testing.T) {
	for gk, want := range map[schema.GroupKind]bool{
		{Kind: "Namespace"}:                             true,
		{Group: "apps", Kind: "Deployment"}:             false,
		{Group: "example.com", Kind: "Widget"}:          false,
		{Group: "example.com", Kind: "ClusterWidget"}:   true,
		{Group: "storage.k8s.io", Kind: "StorageClass"}: true,
	} {
		if got := ClusterScoped(gk); got != want {
			t.Errorf("ClusterScoped(%v) = %v, want %v", gk, got, want)
		}
	}
}

func TestObjectName(t *testing.T) {
	if got := ObjectName(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, "web"); got != "deployment.apps/web" {
		t.Errorf("ObjectName = %s", got)
	}
	if got := ObjectName(schema.GroupVersionKind{Version: "v1", Kind: "Service"}, "web"); got != "service/web" {
		t.Errorf("ObjectName = %s", got)
	}
}

// TestObjectsKubernetesCannotStoreAreRefused: a hub object over 1.5 MiB is refused before
// anything is published, with its size and the limit; one just under it is accepted.
func TestObjectsKubernetesCannotStoreAreRefused(t *testing.T) {
	cm := func(n int) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big, namespace: shop}\ndata:\n  x: " + strings.Repeat("x", n) + "\n"
	}
	if items, problems := ForApply(load(t, cm(api.MaxObjectBytes-200)), Options{}); len(problems) > 0 || len(items) != 1 {
		t.Fatalf("an object under the limit: %v", problems)
	}
	_, problems := ForApply(load(t, cm(api.MaxObjectBytes)), Options{})
	if len(problems) != 1 {
		t.Fatalf("problems = %v, want one", problems)
	}
	msg := problems[0].String()
	for _, want := range []string{"ConfigMap big", "1.50 MiB", "at most 1.5 MiB"} {
		if !strings.Contains(msg, want) {
			t.Errorf("problem %q does not say %q", msg, want)
		}
	}
}

func TestOverridesBecomeOverrideEvents(t *testing.T) {
	const text = `apiVersion: placement.kubernetes-fleet.io/v1alpha1
kind: ClusterResourceOverride
metadata: {name: labels, uid: 5b64f73b-ce6d-4ada-998e-db6f682155f6}
spec:
  clusterResourceSelectors: [{group: "", version: v1, kind: Namespace, name: app}]
  policy:
    overrideRules: [{clusterSelector: {}, jsonPatchOverrides: [{op: add, path: /metadata/labels/a, value: b}]}]
---
apiVersion: placement.kubernetes-fleet.io/v1
kind: ResourceOverride
metadata: {name: image}
spec:
  resourceSelectors: [{group: apps, version: v1, kind: Deployment, name: web}]
  policy:
    overrideRules: [{clusterSelector: {}, overrideType: Delete}]
`
	docs, problems := input.LoadIn([]input.Source{{Name: "in.yaml", Data: []byte(text)}}, "shop")
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	items, problems := ForApply(docs, Options{Namespace: "shop"})
	if len(problems) > 0 || len(items) != 2 {
		t.Fatalf("ForApply = %+v, %v", items, problems)
	}
	cro := items[0].Changes[0]
	if cro.Type != events.TypeOverrideUpserted || cro.Subject != "flotilla.override.ClusterResourceOverride.-.labels" ||
		items[0].Object != "clusterresourceoverride.placement.kubernetes-fleet.io/labels" {
		t.Errorf("the ClusterResourceOverride: %s on %s (%s)", cro.Type, cro.Subject, items[0].Object)
	}
	p := cro.Payload.(events.OverrideUpserted)
	if p.ClusterResourceOverride.UID != "" || p.ClusterResourceOverride.APIVersion != "placement.kubernetes-fleet.io/v1alpha1" {
		t.Errorf("published %+v: want the server fields gone and the version written kept", p.ClusterResourceOverride.TypeMeta)
	}
	if ro := items[1].Changes[0]; ro.Subject != "flotilla.override.ResourceOverride.shop.image" {
		t.Errorf("the ResourceOverride without a namespace travels on %s, want -n's namespace", ro.Subject)
	}

	deletes, problems := ForDelete(docs, "", Options{Namespace: "other"})
	if len(problems) > 0 || len(deletes) != 2 {
		t.Fatalf("ForDelete = %+v, %v", deletes, problems)
	}
	want := events.OverrideDeleted{Override: api.OverrideKey{Kind: api.ResourceOverrideKind, Namespace: "shop", Name: "image"}}
	if got := deletes[1].Changes[0]; got.Type != events.TypeOverrideDeleted || !reflect.DeepEqual(got.Payload, want) {
		t.Errorf("deleting the ResourceOverride: %s %+v, want %+v", got.Type, got.Payload, want)
	}
}

// A file that lists its placement before its overrides and objects, and a staged run
// before its placement, publishes what a placement reads first, then the placement,
// then what names it; each step keeps the file's order.
func TestApplyPublishesInDependencyOrder(t *testing.T) {
	items, problems := ForApply(load(t, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateRun
metadata: {name: run}
spec: {placementName: shop, resourceSnapshotIndex: "0", stagedRolloutStrategyName: stages}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: shop}
spec:
  resourceSelectors: [{group: "", version: v1, kind: Namespace, name: shop}]
---
apiVersion: placement.kubernetes-fleet.io/v1alpha1
kind: ClusterResourceOverride
metadata: {name: labels}
spec:
  placement: {name: shop}
  clusterResourceSelectors: [{group: "", version: v1, kind: Namespace, name: shop}]
  policy:
    overrideRules: [{clusterSelector: {}, jsonPatchOverrides: [{op: add, path: /metadata/labels/a, value: b}]}]
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterStagedUpdateStrategy
metadata: {name: stages}
spec:
  stages: [{name: all, labelSelector: {}}]
`), Options{})
	if len(problems) > 0 {
		t.Fatalf("problems: %v", problems)
	}
	var got []string
	for _, it := range items {
		got = append(got, it.Object)
	}
	want := []string{
		"clusterresourceoverride.placement.kubernetes-fleet.io/labels",
		"namespace/shop",
		"clusterstagedupdatestrategy.placement.kubernetes-fleet.io/stages",
		"clusterresourceplacement.placement.kubernetes-fleet.io/shop",
		"clusterstagedupdaterun.placement.kubernetes-fleet.io/run",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("published in the order\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
