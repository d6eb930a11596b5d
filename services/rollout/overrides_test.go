package rollout_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/revision"
	"github.com/flotilla-dev/flotilla/services/rollout"
)

func (f *fixture) member(name string, labels map[string]string, typ string) {
	f.t.Helper()
	subj, _ := events.MemberSubject(name)
	m := api.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: api.MemberClusterSpec{HeartbeatPeriodSeconds: 60}}
	if typ == events.TypeMemberUpdated {
		f.publish(typ, subj, events.MemberUpdated{Member: m})
		return
	}
	f.publish(typ, subj, events.MemberJoined{Member: m})
}

func (f *fixture) override(p events.OverrideUpserted) {
	f.t.Helper()
	subj, err := events.OverrideSubject(p.Key())
	if err != nil {
		f.t.Fatal(err)
	}
	f.publish(events.TypeOverrideUpserted, subj, p)
}

func jsonPatch(op api.JSONPatchOverrideOperator, path, value string) api.JSONPatchOverride {
	return api.JSONPatchOverride{Operator: op, Path: path, Value: runtime.RawExtension{Raw: []byte(value)}}
}

// manifestField reads a field of the manifest of kind in a work, by JSON keys.
func manifestField(t *testing.T, w events.WorkDesired, kind string, path ...string) any {
	t.Helper()
	for _, m := range w.Manifests {
		var obj map[string]any
		if err := json.Unmarshal(m, &obj); err != nil {
			t.Fatal(err)
		}
		if obj["kind"] != kind {
			continue
		}
		var v any = obj
		for _, p := range path {
			switch c := v.(type) {
			case map[string]any:
				v = c[p]
			case []any:
				var i int
				fmt.Sscan(p, &i)
				v = c[i]
			}
		}
		return v
	}
	return nil
}

// Overrides make each cluster's work its own: a label from the cluster's name on the
// Namespace and what is in it (a ClusterResourceOverride), an image from the cluster's
// region label (a ResourceOverride). An override change is a new snapshot rolled out under
// the placement's maxUnavailable; a cluster the overrides cannot apply to keeps its work and
// says why, the others are not concerned; a label change reaches the cluster's work; and an
// override selecting what another of its kind selects is refused.
func TestOverridesMakeEachClustersWorkItsOwn(t *testing.T) {
	f := newFixture(t, rollout.Config{})
	f.start()
	f.member("member-1", map[string]string{"region": "east"}, events.TypeMemberJoined)
	f.member("member-2", map[string]string{"region": "west"}, events.TypeMemberJoined)
	f.member("member-3", nil, events.TypeMemberJoined)
	f.hub(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"app","labels":{"team":"web"}}}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"app","labels":{"app":"web"}},
		  "spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"web","image":"nginx"}]}}}}`)
	f.place(rolling(crp("web", namespace("app")), intstr.FromInt32(1), intstr.FromInt32(0), 60))
	f.schedule("web", 1, []string{"member-1", "member-2"}, nil)
	for _, c := range []string{"member-1", "member-2"} {
		f.report(f.waitWork(c, "web", 0), applied, available)
	}
	f.waitReady("web", "member-1", "member-2")

	ref := &api.PlacementRef{Name: "web"}
	f.override(events.OverrideUpserted{ClusterResourceOverride: &api.ClusterResourceOverride{
		ObjectMeta: metav1.ObjectMeta{Name: "app-labels"},
		Spec: api.ClusterResourceOverrideSpec{Placement: ref,
			ClusterResourceSelectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: "app"}},
			Policy: &api.OverridePolicy{OverrideRules: []api.OverrideRule{{ClusterSelector: &api.ClusterSelector{},
				JSONPatchOverrides: []api.JSONPatchOverride{jsonPatch("add", "/metadata/labels/cluster", `"${MEMBER-CLUSTER-NAME}"`)}}}}},
	}})
	f.override(events.OverrideUpserted{ResourceOverride: &api.ResourceOverride{
		ObjectMeta: metav1.ObjectMeta{Name: "web-image", Namespace: "app"},
		Spec: api.ResourceOverrideSpec{Placement: ref,
			ResourceSelectors: []api.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}},
			Policy: &api.OverridePolicy{OverrideRules: []api.OverrideRule{{ClusterSelector: &api.ClusterSelector{},
				JSONPatchOverrides: []api.JSONPatchOverride{
					jsonPatch("replace", "/spec/template/spec/containers/0/image", `"nginx:${MEMBER-CLUSTER-LABEL-KEY-region}"`)}}}}},
	}})

	// The overrides are a new snapshot, rolled out one cluster at a time (maxUnavailable 1).
	w1 := f.waitWork("member-1", "web", 1)
	if ws := f.works("member-2", "web"); ws[len(ws)-1].ResourceIndex != 0 {
		t.Errorf("member-2 was updated while member-1 was not available yet (maxUnavailable 1)")
	}
	f.report(w1, applied, available)
	w2 := f.waitWork("member-2", "web", 1)
	f.report(w2, applied, available)
	for _, w := range []events.WorkDesired{w1, w2} {
		region := map[string]string{"member-1": "east", "member-2": "west"}[w.Cluster]
		if got := manifestField(t, w, "Deployment", "spec", "template", "spec", "containers", "0", "image"); got != "nginx:"+region {
			t.Errorf("image on %s = %v, want nginx:%s", w.Cluster, got, region)
		}
		for _, kind := range []string{"Namespace", "Deployment"} {
			if got := manifestField(t, w, kind, "metadata", "labels", "cluster"); got != w.Cluster {
				t.Errorf("%s on %s has label cluster=%v", kind, w.Cluster, got)
			}
		}
	}
	p := f.waitProgress("web", "both clusters started with the overrides", func(p revision.Progress) error {
		if len(started(p)) != 2 {
			return fmt.Errorf("started %v", started(p))
		}
		return nil
	})
	wantApplied := &events.ClusterOverrides{ClusterResourceOverrides: []string{"app-labels-0"},
		ResourceOverrides: []api.NamespacedName{{Name: "web-image-0", Namespace: "app"}}}
	if got := clusterOf(p, "member-1").Overrides; !got.Equal(wantApplied) {
		t.Errorf("member-1's overrides in the progress = %s, want %s", mustJSON(got), mustJSON(wantApplied))
	}

	// member-3 has no region label: its overrides fail and it is sent nothing; the others keep theirs.
	f.schedule("web", 1, []string{"member-1", "member-2", "member-3"}, nil)
	p = f.waitProgress("web", "member-3's overrides failed", func(p revision.Progress) error {
		if o := clusterOf(p, "member-3").Overrides; o == nil || o.Failed == "" {
			return fmt.Errorf("member-3: %+v", clusterOf(p, "member-3"))
		}
		return nil
	})
	want := `ResourceOverrideSnapshot "web-image-0" failed to apply on Deployment "web" in namespace "app": ` +
		`overrideRules[0].jsonPatchOverrides[0] (replace /spec/template/spec/containers/0/image): label key region not found on cluster member-3`
	if got := clusterOf(p, "member-3"); got.Overrides.Failed != want || !got.Started {
		t.Errorf("member-3 = %s, want started with the failure %q", mustJSON(got), want)
	}
	if ws := f.works("member-3", "web"); len(ws) != 0 {
		t.Errorf("member-3 was sent work its overrides failed on: %d events", len(ws))
	}

	// Given the label, member-3 gets its work with its region.
	f.member("member-3", map[string]string{"region": "central"}, events.TypeMemberUpdated)
	w3 := f.waitWork("member-3", "web", 1)
	if got := manifestField(t, w3, "Deployment", "spec", "template", "spec", "containers", "0", "image"); got != "nginx:central" {
		t.Errorf("image on member-3 = %v, want nginx:central", got)
	}
	f.report(w3, applied, available)
	f.waitReady("web", "member-1", "member-2", "member-3")

	// A second ResourceOverride of the same Deployment is refused: no new snapshot, nothing stored.
	f.override(events.OverrideUpserted{ResourceOverride: &api.ResourceOverride{
		ObjectMeta: metav1.ObjectMeta{Name: "web-replicas", Namespace: "app"},
		Spec: api.ResourceOverrideSpec{Placement: ref,
			ResourceSelectors: []api.ResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}},
			Policy: &api.OverridePolicy{OverrideRules: []api.OverrideRule{{ClusterSelector: &api.ClusterSelector{},
				JSONPatchOverrides: []api.JSONPatchOverride{jsonPatch("replace", "/spec/replicas", "3")}}}}},
	}})
	// A sentinel: the rollout has read past the refused override. (The namespace's
	// ClusterResourceOverride applies to it too: it has labels to add to.)
	f.hub(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"after","namespace":"app","labels":{"a":"b"}}}`)
	w4 := f.waitWork("member-1", "web", 2)
	var stored int
	if err := f.Pool.QueryRow(t.Context(), `select count(*) from rollout_overrides where name = 'web-replicas'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 || manifestField(t, w4, "Deployment", "spec", "replicas") != 1.0 {
		t.Errorf("the conflicting override was taken: %d rows, replicas %v", stored, manifestField(t, w4, "Deployment", "spec", "replicas"))
	}
	if n := len(f.snapshots("web")); n != 3 || !strings.HasPrefix(f.snapshots("web")[2].Hash, "sha256:") {
		t.Errorf("%d snapshots, want 3 (the first, the overrides, the ConfigMap)", n)
	}
}
