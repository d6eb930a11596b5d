package hubsync

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// hubObjects reads manifests as the hub's informers hold them, with server fields.
func hubObjects(t *testing.T, manifests ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for i, m := range manifests {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(m), &u.Object); err != nil {
			t.Fatal(err)
		}
		u.SetResourceVersion("1")
		u.SetUID("uid")
		u.SetGeneration(int64(i + 1))
		u.SetCreationTimestamp(metav1.Now())
		out = append(out, u)
	}
	return out
}

var (
	nsWeb      = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: web\n  labels: {app: web}\n"
	cmWeb      = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: web\ndata: {color: green}\n"
	nsOther    = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: other\n"
	cmSystem   = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-info\n  namespace: kube-system\n"
	crpWeb     = "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata:\n  name: web\n  annotations: {kubectl.kubernetes.io/last-applied-configuration: '{}'}\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, labelSelector: {matchLabels: {app: web}}}\n"
	crpInvalid = "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata:\n  name: broken\nspec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: other}\n  policy: {placementType: PickN}\n"
)

func known(kinds ...string) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, k := range kinds {
		gk := schema.ParseGroupKind(k)
		out[gk] = true
	}
	return out
}

// TestComputeSelectsWhatPlacementsSelect: a placement and the hub objects it selects (its
// namespace and what is in it) are wanted; other objects are not, system namespaces never are,
// and an invalid placement is a problem with its field path, publishing nothing.
func TestComputeSelectsWhatPlacementsSelect(t *testing.T) {
	snap := Snapshot{Objects: hubObjects(t, nsWeb, cmWeb, nsOther, cmSystem, crpWeb, crpInvalid),
		Known: known("Namespace", "ConfigMap", "ClusterResourcePlacement.placement.kubernetes-fleet.io")}
	d, err := Compute(t.Context(), snap, NewConversions())
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for s := range d.Wants {
		subjects = append(subjects, s)
	}
	slices.Sort(subjects)
	want := []string{"flotilla.hub.core.ConfigMap.web.settings", "flotilla.hub.core.Namespace.-.web", "flotilla.placement.web"}
	if !slices.Equal(subjects, want) {
		t.Errorf("wanted subjects %v, want %v", subjects, want)
	}
	p := d.Wants["flotilla.placement.web"]
	up, ok := p.Change.Payload.(events.PlacementUpserted)
	if !ok || p.Record.Class != ClassPlacement || p.Record.Undo.Type != events.TypePlacementDeleted {
		t.Fatalf("placement want %+v", p)
	}
	if _, ok := up.Placement.Annotations[api.LastAppliedConfigAnnotation]; ok || up.Placement.Spec.Policy == nil {
		t.Errorf("the placement is published as fleetctl would: defaulted, without kubectl's annotation: %+v", up.Placement.ObjectMeta)
	}
	if len(d.Problems) != 1 || d.Problems[0].Source != "placement.kubernetes-fleet.io/ClusterResourcePlacement//broken" ||
		d.Problems[0].Detail != "spec.policy.numberOfClusters: required when placementType is PickN" {
		t.Errorf("problems %+v", d.Problems)
	}
	for _, source := range []string{"/Namespace//other", "placement.kubernetes-fleet.io/ClusterResourcePlacement//broken", "/ConfigMap/kube-system/cluster-info"} {
		if !d.Present[source] {
			t.Errorf("%s is on the hub but not present", source)
		}
	}
}

// TestComputeConvertsOnlyWhatChanged: an object whose resource version did not change is not
// converted again.
func TestComputeConvertsOnlyWhatChanged(t *testing.T) {
	objs := hubObjects(t, nsWeb, crpWeb)
	cache := NewConversions()
	snap := Snapshot{Objects: objs, Known: known("Namespace")}
	if _, err := Compute(t.Context(), snap, cache); err != nil {
		t.Fatal(err)
	}
	cache.sweep()
	key := "/Namespace//web@v1"
	first := cache.byVersion[key]
	objs[0].SetLabels(map[string]string{"app": "other"}) // the same resource version: not read again
	d, _ := Compute(t.Context(), snap, cache)
	if _, ok := d.Wants["flotilla.hub.core.Namespace.-.web"]; !ok || cache.byVersion[key].version != first.version {
		t.Errorf("a converted object was read again without a new resource version")
	}
	objs[0].SetResourceVersion("2")
	d, _ = Compute(t.Context(), snap, cache)
	if _, ok := d.Wants["flotilla.hub.core.Namespace.-.web"]; ok {
		t.Errorf("the namespace no longer carries app: web, yet it is selected")
	}
}

// TestHubStatusCountsTheHubsGenerations: conditions the status service observed for the
// placement's current spec are the hub object's generation; older ones are as many behind;
// before the status service has the hub's spec, every condition is older than the hub's.
func TestHubStatusCountsTheHubsGenerations(t *testing.T) {
	hub := hubObjects(t, crpWeb)[0]
	hub.SetGeneration(3)
	obj, err := decodeFleetObject(hub.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	crp := obj.(*api.ClusterResourcePlacement)
	api.SetDefaults(crp)
	crp.Generation = 7 // Flotilla's count: the placement was deleted and created again
	crp.Status.Conditions = []metav1.Condition{
		{Type: "ClusterResourcePlacementScheduled", ObservedGeneration: 7},
		{Type: "ClusterResourcePlacementAvailable", ObservedGeneration: 6},
	}
	crp.Status.PlacementStatuses = []api.ResourcePlacementStatus{{ClusterName: "member-1",
		Conditions: []metav1.Condition{{Type: "Applied", ObservedGeneration: 7}}}}
	st := HubStatus(crp, hub)
	if g := st.Conditions[0].ObservedGeneration; g != 3 {
		t.Errorf("Scheduled for the current spec: observedGeneration %d, want the hub's 3", g)
	}
	if g := st.Conditions[1].ObservedGeneration; g != 2 {
		t.Errorf("Available for the spec before: observedGeneration %d, want 2", g)
	}
	if g := st.PlacementStatuses[0].Conditions[0].ObservedGeneration; g != 3 {
		t.Errorf("per-cluster Applied: observedGeneration %d, want 3", g)
	}
	if crp.Status.Conditions[0].ObservedGeneration != 7 {
		t.Errorf("HubStatus changed the status service's placement")
	}
	crp.Spec.Policy.PlacementType = api.PickNPlacementType // the status service is behind the hub
	if g := HubStatus(crp, hub).Conditions[0].ObservedGeneration; g != 2 {
		t.Errorf("a status for another spec: observedGeneration %d, want 2 (older than the hub's 3)", g)
	}
}

// TestComputeCarriesPropagationPolicies: a KubeAdmiral PropagationPolicy on the hub becomes
// the two placements fleetctl makes of it, and the objects labelled for it are selected, with
// the adopt label fleetctl gives an object that asks to be adopted.
func TestComputeCarriesPropagationPolicies(t *testing.T) {
	pp := "apiVersion: core.kubeadmiral.io/v1alpha1\nkind: PropagationPolicy\nmetadata:\n  name: nginx-pp\n  namespace: default\n" +
		"spec:\n  schedulingMode: Duplicate\n  placement:\n  - cluster: member-1\n"
	deploy := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: my-nginx\n  namespace: default\n" +
		"  labels: {kubeadmiral.io/propagation-policy-name: nginx-pp}\n  annotations: {kubeadmiral.io/conflict-resolution: adopt}\n" +
		"spec:\n  selector: {matchLabels: {run: my-nginx}}\n  template:\n    metadata: {labels: {run: my-nginx}}\n    spec: {containers: [{name: nginx, image: nginx}]}\n"
	other := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unrelated\n  namespace: default\n"
	snap := Snapshot{Objects: hubObjects(t, pp, deploy, other), Known: known("PropagationPolicy.core.kubeadmiral.io", "Deployment.apps", "ConfigMap")}
	d, err := Compute(t.Context(), snap, NewConversions())
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for s := range d.Wants {
		subjects = append(subjects, s)
	}
	slices.Sort(subjects)
	want := []string{"flotilla.hub.apps.Deployment.default.my-nginx", "flotilla.placement.pp-adopt_default_nginx-pp", "flotilla.placement.pp_default_nginx-pp"}
	if !slices.Equal(subjects, want) || len(d.Problems) > 0 {
		t.Errorf("wanted subjects %v (problems %v), want %v", subjects, d.Problems, want)
	}
	for _, s := range want[1:] {
		if r := d.Wants[s].Record; r.Source != "core.kubeadmiral.io/PropagationPolicy/default/nginx-pp" || r.Undo.Type != events.TypePlacementDeleted {
			t.Errorf("%s: record %+v, want the policy as its source and a deletion to undo it", s, r)
		}
	}
}

// TestComputeCarriesResourcePlacements: a ResourcePlacement on the hub is published under its
// placement key, beside a ClusterResourcePlacement of the same name, as fleetctl apply
// publishes it; it selects the objects of its own namespace only; its record's source is
// the namespaced object and its undo deletes the placement by its key.
func TestComputeCarriesResourcePlacements(t *testing.T) {
	crpNamespaceOnly := "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ClusterResourcePlacement\nmetadata:\n  name: web\n" +
		"spec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: Namespace, name: web, selectionScope: NamespaceOnly}\n"
	rp := "apiVersion: placement.kubernetes-fleet.io/v1beta1\nkind: ResourcePlacement\nmetadata:\n  name: web\n  namespace: web\n" +
		"spec:\n  resourceSelectors:\n  - {group: '', version: v1, kind: ConfigMap}\n"
	cmOther := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: other\ndata: {color: red}\n"
	snap := Snapshot{Objects: hubObjects(t, nsWeb, cmWeb, nsOther, cmOther, crpNamespaceOnly, rp),
		Known: known("Namespace", "ConfigMap", "ClusterResourcePlacement.placement.kubernetes-fleet.io", "ResourcePlacement.placement.kubernetes-fleet.io")}
	d, err := Compute(t.Context(), snap, NewConversions())
	if err != nil {
		t.Fatal(err)
	}
	rpSubject, err := events.PlacementSubject(api.PlacementKey("web", "web"))
	if err != nil {
		t.Fatal(err)
	}
	var subjects []string
	for s := range d.Wants {
		subjects = append(subjects, s)
	}
	slices.Sort(subjects)
	want := []string{"flotilla.hub.core.ConfigMap.web.settings", "flotilla.hub.core.Namespace.-.web", "flotilla.placement.web", rpSubject}
	slices.Sort(want)
	if !slices.Equal(subjects, want) || len(d.Problems) > 0 {
		t.Fatalf("wanted subjects %v (problems %v), want %v", subjects, d.Problems, want)
	}
	w := d.Wants[rpSubject]
	up, ok := w.Change.Payload.(events.PlacementUpserted)
	if !ok || up.Placement.Name != "web..web" || up.Placement.Namespace != "web" || up.Placement.Kind != api.ResourcePlacementKind {
		t.Errorf("the ResourcePlacement is published as %+v, want under its key web..web", w.Change.Payload)
	}
	if w.Record.Source != "placement.kubernetes-fleet.io/ResourcePlacement/web/web" || w.Record.Class != ClassPlacement ||
		w.Record.Undo.Type != events.TypePlacementDeleted || string(w.Record.Undo.Payload) != `{"name":"web..web"}` {
		t.Errorf("the ResourcePlacement's record %+v, want its own source and a deletion of web..web", w.Record)
	}
	crp := d.Wants["flotilla.placement.web"]
	if crp.Record.Source != "placement.kubernetes-fleet.io/ClusterResourcePlacement//web" || string(crp.Record.Undo.Payload) != `{"name":"web"}` {
		t.Errorf("the ClusterResourcePlacement's record %+v", crp.Record)
	}
}
