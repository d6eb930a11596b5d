package api

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const rpYAML = `apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourcePlacement
metadata:
  name: app-config
  namespace: team-a
spec:
  resourceSelectors:
    - group: ""
      version: v1
      kind: ConfigMap
      name: app-config
  policy:
    placementType: PickN
    numberOfClusters: 2
`

func TestResourcePlacementDecodesAndValidates(t *testing.T) {
	obj, err := Decode([]byte(rpYAML))
	if err != nil {
		t.Fatal(err)
	}
	rp, ok := obj.(*ClusterResourcePlacement)
	if !ok || rp.Kind != ResourcePlacementKind || rp.Namespace != "team-a" || rp.Name != "app-config" {
		t.Fatalf("decoded %T %+v", obj, obj)
	}
	if errs := Validate(rp); len(errs) > 0 {
		t.Fatalf("a valid ResourcePlacement is refused: %v", errs)
	}
	internal := InternalPlacement(rp)
	if internal.Name != "team-a..app-config" || rp.Name != "app-config" {
		t.Fatalf("internal name %q (user's object now %q)", internal.Name, rp.Name)
	}
	if errs := ValidatePlacement(internal); len(errs) > 0 {
		t.Errorf("the internal form is refused: %v", errs)
	}
	if again := InternalPlacement(internal); again.Name != internal.Name {
		t.Errorf("InternalPlacement twice = %q", again.Name)
	}

	internal.Status.Conditions = []metav1.Condition{
		{Type: string(ClusterResourcePlacementAppliedConditionType), Status: metav1.ConditionTrue},
		{Type: string(ClusterResourcePlacementScheduledConditionType), Status: metav1.ConditionTrue},
	}
	internal.Kind = ClusterResourcePlacementKind // as a reply may carry it
	ext := ExternalPlacement(internal)
	if ext.Kind != ResourcePlacementKind || ext.Namespace != "team-a" || ext.Name != "app-config" {
		t.Errorf("external = %s %s/%s", ext.Kind, ext.Namespace, ext.Name)
	}
	var types []string
	for _, c := range ext.Status.Conditions {
		types = append(types, c.Type)
	}
	if !slices.Equal(types, []string{"ResourcePlacementApplied", "ResourcePlacementScheduled"}) {
		t.Errorf("condition types = %v", types)
	}
	if internal.Status.Conditions[0].Type != "ClusterResourcePlacementApplied" {
		t.Error("ExternalPlacement changed its argument's conditions")
	}

	crp := &ClusterResourcePlacement{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	if InternalPlacement(crp) != crp || ExternalPlacement(crp) != crp || crp.IsResourcePlacement() {
		t.Error("a ClusterResourcePlacement is not left as it is")
	}
}

func TestResourcePlacementRules(t *testing.T) {
	for _, tt := range []struct {
		name, edit string
		want       []string
	}{
		{"no namespace", "  namespace: team-a\n=>", []string{"metadata.namespace: is required: a ResourcePlacement is namespaced"}},
		{"bad namespace", "namespace: team-a=>namespace: Team.A", []string{`metadata.namespace: "Team.A" is not a valid namespace`}},
		{"a Namespace selected", "kind: ConfigMap\n      name: app-config=>kind: Namespace\n      name: team-a",
			[]string{"spec.resourceSelectors[0].kind: a ResourcePlacement cannot select Namespaces: it places resources of its own namespace \"team-a\", which must exist on the clusters (place it with a ClusterResourcePlacement, selectionScope: NamespaceOnly)"}},
		{"a selection scope", "      name: app-config\n=>      name: app-config\n      selectionScope: NamespaceOnly\n",
			[]string{"spec.resourceSelectors[0].selectionScope: applies to Namespace selectors, which a ResourcePlacement does not have"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			from, to, _ := strings.Cut(tt.edit, "=>")
			obj, err := Decode([]byte(strings.Replace(rpYAML, from, to, 1)))
			if err != nil {
				t.Fatal(err)
			}
			got := Validate(obj).Error()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("errors = %s\nwant %s", got, w)
				}
			}
		})
	}
	// A ClusterResourcePlacement stays cluster-scoped.
	obj, err := Decode([]byte(strings.Replace(rpYAML, "kind: ResourcePlacement", "kind: ClusterResourcePlacement", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if got := Validate(obj).Error(); !strings.Contains(got, "metadata.namespace: must be empty: ClusterResourcePlacement is cluster-scoped") {
		t.Errorf("a ClusterResourcePlacement with a namespace: %s", got)
	}
}

func TestOverrideNamesResourcePlacement(t *testing.T) {
	o := Override{Key: OverrideKey{Kind: ResourceOverrideKind, Namespace: "team-a", Name: "ro"},
		Placement: &PlacementRef{Name: "app-config", Scope: NamespaceScoped}}
	if o.PlacementKey() != "team-a..app-config" || !o.ForPlacement("team-a..app-config") || o.ForPlacement("app-config") {
		t.Errorf("a Namespaced reference: key %q", o.PlacementKey())
	}
	o.Placement.Scope = ClusterScoped
	if !o.ForPlacement("app-config") || o.ForPlacement("team-a..app-config") {
		t.Error("a Cluster reference names the ClusterResourcePlacement")
	}
}
