package applier_test

import (
	"fmt"
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

func previewConfigMap(ns, n, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\ndata:\n  x: %q\n", n, ns, value)
}

// A preview says, per object, what applying new manifests would do on a real member:
// no change, drift (IfNotDrifted), an update with its diff, a refused takeover, a
// creation (also in a namespace the placement creates), a deletion; and it changes
// nothing there.
func TestPreviewSaysWhatAnApplyWouldDoAndChangesNothing(t *testing.T) {
	a := newApplier(t)
	ns, fresh, placement := name(t, "ns"), name(t, "fresh"), name(t, "p")
	strategy := api.ApplyStrategy{WhenToTakeOver: api.WhenToTakeOverTypeNever, WhenToApply: api.WhenToApplyTypeIfNotDrifted}
	nsYAML := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n"
	if _, err := a.Apply(t.Context(), work(t, placement, strategy, fmt.Sprintf(nsYAML, ns),
		previewConfigMap(ns, "drifted", "1"), previewConfigMap(ns, "changed", "1"), previewConfigMap(ns, "gone", "1"))); err != nil {
		t.Fatal(err)
	}
	create(t, previewConfigMap(ns, "theirs", "9"))
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	drifted := get(t, cms, ns, "drifted")
	drifted.Object["data"] = map[string]any{"x": "2"}
	if _, err := client(t).Resource(cms).Namespace(ns).Update(t.Context(), drifted, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := versions(t, ns)

	w := work(t, placement, strategy, fmt.Sprintf(nsYAML, ns), previewConfigMap(ns, "drifted", "1"), previewConfigMap(ns, "changed", "2"),
		previewConfigMap(ns, "theirs", "1"), previewConfigMap(ns, "new", "1"), fmt.Sprintf(nsYAML, fresh), previewConfigMap(fresh, "in-fresh", "1"))
	got, err := a.Preview(t.Context(), &events.MemberPreviewRequest{Cluster: member, Placement: placement, Manifests: w.Manifests, ApplyStrategy: strategy})
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]string{}
	for _, o := range got.Objects {
		outcomes[o.Namespace+"/"+o.Name] = o.Outcome
		switch o.Name {
		case "drifted", "changed", "theirs":
			if len(o.Diffs) != 1 || o.Diffs[0].Path != "/data/x" {
				t.Errorf("%s: diffs %+v, want /data/x", o.Name, o.Diffs)
			}
		}
		if o.Name == "changed" && (o.Diffs[0].ValueInMember != "1" || o.Diffs[0].ValueInHub != "2") {
			t.Errorf("the update of changed shows %+v, want 1 on the member and 2 from the hub", o.Diffs[0])
		}
	}
	want := map[string]string{
		"/" + ns:            events.PreviewNoChange,
		ns + "/drifted":     events.PreviewDrift,
		ns + "/changed":     events.PreviewUpdate,
		ns + "/theirs":      events.PreviewRefusedTakeOver,
		ns + "/new":         events.PreviewCreate,
		"/" + fresh:         events.PreviewCreate,
		fresh + "/in-fresh": events.PreviewCreate,
		ns + "/gone":        events.PreviewDelete,
	}
	if !maps.Equal(outcomes, want) {
		t.Errorf("outcomes %v\nwant %v", outcomes, want)
	}
	if after := versions(t, ns); !maps.Equal(before, after) {
		t.Errorf("the member changed: resourceVersions %v, were %v", after, before)
	}
	if get(t, cms, ns, "new") != nil || get(t, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", fresh) != nil {
		t.Error("the preview created objects")
	}

	if _, err := a.Preview(t.Context(), &events.MemberPreviewRequest{Cluster: "member-2", Placement: placement}); err == nil {
		t.Error("a preview for another cluster was answered")
	}
}

// versions maps each ConfigMap of ns, and ns, to its resourceVersion.
func versions(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	list, err := client(t).Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range list.Items {
		out[u.GetName()] = u.GetResourceVersion()
	}
	n := get(t, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", ns)
	out["namespace"] = n.GetResourceVersion()
	return out
}
