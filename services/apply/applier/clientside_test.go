package applier_test

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events/api"
)

// TestClientSideApplyMergesAsKubectlApply: ClientSideApply is done as a forced
// server-side apply, which gives what kubectl apply's three-way merge gives
// without the last-applied annotation (the field manager's record of what it
// applied plays its part): a field the hub sets wins over a member-side edit,
// a field the hub stopped setting is removed, and a field only the member set
// is kept.
func TestClientSideApplyMergesAsKubectlApply(t *testing.T) {
	a := newApplier(t)
	placement, ns := name(t, "crp"), name(t, "")
	csa := api.ApplyStrategy{Type: api.ApplyStrategyTypeClientSideApply}
	cm := func(data string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: %s}\ndata: {%s}\n", ns, data)
	}
	mustApply(t, a, placement, csa, nsYAML(ns), cm(`a: "1", b: "1"`))
	edit(t, configMaps, ns, "settings", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, "edited", "data", "a")
		_ = unstructured.SetNestedField(u.Object, "member", "data", "c")
	})

	mustApply(t, a, placement, csa, nsYAML(ns), cm(`a: "1"`))
	data, _, _ := unstructured.NestedStringMap(get(t, configMaps, ns, "settings").Object, "data")
	if want := map[string]string{"a": "1", "c": "member"}; fmt.Sprint(data) != fmt.Sprint(want) {
		t.Errorf("data = %v, want %v: the hub's a, b removed with the manifest, the member's c kept", data, want)
	}
	if ann := get(t, configMaps, ns, "settings").GetAnnotations(); ann["kubectl.kubernetes.io/last-applied-configuration"] != "" {
		t.Errorf("a last-applied annotation was written: %v", ann)
	}
}
