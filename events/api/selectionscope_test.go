package api

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDecodeSelectionScope(t *testing.T) {
	obj, err := Decode([]byte(`apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourcePlacement
metadata: {name: prod}
spec:
  resourceSelectors:
    - {group: "", version: v1, kind: Namespace, name: production, selectionScope: namespaceWithResourceSelectors}
    - {group: apps, version: v1, kind: Deployment, labelSelector: {matchLabels: {tier: frontend}}}
    - {group: rbac.authorization.k8s.io, version: v1, kind: ClusterRole, name: admin}
`))
	if err != nil {
		t.Fatal(err)
	}
	crp := obj.(*ClusterResourcePlacement)
	if errs := Validate(crp); len(errs) > 0 {
		t.Errorf("upstream's example is refused: %v", errs)
	}
	if got := crp.Spec.ResourceSelectors[0].SelectionScope; got != NamespaceWithResourceSelectors {
		t.Errorf("selectionScope read as %q, want the canonical spelling", got)
	}
	if got := crp.Spec.ResourceSelectors[1].EffectiveSelectionScope(); got != NamespaceWithResources {
		t.Errorf("the default scope is %q", got)
	}
}

func TestValidateSelectionScopeByUpstreamRules(t *testing.T) {
	ns := func(name string, scope SelectionScope) ClusterResourceSelector {
		return ClusterResourceSelector{Version: "v1", Kind: "Namespace", Name: name, SelectionScope: scope}
	}
	byLabel := ClusterResourceSelector{Version: "v1", Kind: "Namespace", SelectionScope: NamespaceWithResourceSelectors,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}
	tests := []struct {
		name      string
		selectors []ClusterResourceSelector
		want      []string
	}{
		{"NamespaceOnly with other namespaces", []ClusterResourceSelector{ns("a", NamespaceOnly), ns("b", "")}, nil},
		{"an unknown scope", []ClusterResourceSelector{ns("a", "Everything")},
			[]string{`spec.resourceSelectors[0].selectionScope: "Everything" is not supported; use NamespaceOnly, NamespaceWithResources or NamespaceWithResourceSelectors`}},
		{"by label", []ClusterResourceSelector{byLabel},
			[]string{"spec.resourceSelectors[0].selectionScope: namespace selector with NamespaceWithResourceSelectors mode must select by name (not by label)"}},
		{"two of them", []ClusterResourceSelector{ns("a", NamespaceWithResourceSelectors), ns("b", NamespaceWithResourceSelectors)},
			[]string{
				"spec.resourceSelectors[1].selectionScope: only one namespace selector with NamespaceWithResourceSelectors mode is allowed (resourceSelectors[0] has it)",
				"spec.resourceSelectors[0].selectionScope: when using NamespaceWithResourceSelectors mode, only one namespace selector is allowed (cannot mix with other namespace selectors)",
			}},
		{"mixed with another namespace selector", []ClusterResourceSelector{ns("a", ""), ns("b", NamespaceWithResourceSelectors)},
			[]string{"spec.resourceSelectors[1].selectionScope: when using NamespaceWithResourceSelectors mode, only one namespace selector is allowed (cannot mix with other namespace selectors)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crp := &ClusterResourcePlacement{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: PlacementSpec{ResourceSelectors: tt.selectors}}
			if got := Validate(crp).Fields(); !reflect.DeepEqual(got, tt.want) && len(got)+len(tt.want) > 0 {
				t.Errorf("Validate:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(tt.want, "\n     "))
			}
		})
	}
}
