package manifest_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

func raw(t *testing.T, docs ...string) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, d := range docs {
		j, err := yaml.YAMLToJSON([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, j)
	}
	return out
}

func TestParseStripsWhatMustNotTravel(t *testing.T) {
	objs := manifest.Parse(raw(t, `
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: app
  uid: 1234
  resourceVersion: "99"
  creationTimestamp: "2023-08-30T02:27:01Z"
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: x, uid: abc}]
  labels:
    run: web
    flotilla.dev/managed-by: flotilla
    placement.flotilla.dev/other: owner
    kubeadmiral.io/propagation-policy-name: nginx-pp
  annotations:
    kubeadmiral.io/conflict-resolution: adopt
    kubectl.kubernetes.io/last-applied-configuration: "{}"
    team: blue
spec:
  clusterIP: 10.96.72.40
  clusterIPs: [10.96.72.40]
  ports: [{port: 80}]
status:
  loadBalancer: {}
`))
	if len(objs) != 1 || objs[0].Err != nil {
		t.Fatalf("parse: %+v", objs)
	}
	u := objs[0].Object
	for _, f := range [][]string{
		{"status"}, {"metadata", "uid"}, {"metadata", "resourceVersion"}, {"metadata", "creationTimestamp"},
		{"metadata", "ownerReferences"}, {"spec", "clusterIP"}, {"spec", "clusterIPs"},
	} {
		if _, found := u.Object[f[0]]; found && len(f) == 1 {
			t.Errorf("%v kept", f)
		}
		if len(f) == 2 {
			if m, ok := u.Object[f[0]].(map[string]any); ok {
				if _, found := m[f[1]]; found {
					t.Errorf("%v kept", f)
				}
			}
		}
	}
	if got := u.GetLabels(); len(got) != 1 || got["run"] != "web" {
		t.Errorf("labels = %v, want only run=web", got)
	}
	if got := u.GetAnnotations(); len(got) != 1 || got["team"] != "blue" {
		t.Errorf("annotations = %v, want only team=blue", got)
	}
	if objs[0].Wave != manifest.WaveService || objs[0].Hash == "" {
		t.Errorf("wave %d hash %q", objs[0].Wave, objs[0].Hash)
	}
}

func TestParseFailuresStayAlone(t *testing.T) {
	objs := manifest.Parse(append(raw(t,
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: gen-, namespace: x}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\ndata: {k: v}\n",
		"kind: ConfigMap\nmetadata: {name: b}\n",
	), json.RawMessage(`{not json`)))
	want := []string{"", api.ManifestFoundGenerateNameReason, api.ManifestDuplicatedReason, api.ManifestDecodingErredReason, api.ManifestDecodingErredReason}
	if len(objs) != len(want) {
		t.Fatalf("got %d objects, want %d", len(objs), len(want))
	}
	for i, o := range objs {
		if o.Reason != want[i] || (want[i] != "") != (o.Err != nil) {
			t.Errorf("object %d: reason %q err %v, want %q", i, o.Reason, o.Err, want[i])
		}
		if o.Index != i {
			t.Errorf("object %d has index %d", i, o.Index)
		}
	}
}

func TestEnvelopes(t *testing.T) {
	objs := manifest.Parse(raw(t, `
apiVersion: v1
kind: ConfigMap
metadata:
  name: env
  namespace: app
  annotations: {kubernetes-fleet.io/envelope-configmap: "true"}
data:
  a.yaml: |
    apiVersion: v1
    kind: ResourceQuota
    metadata: {name: q, namespace: app}
    ---
    apiVersion: v1
    kind: LimitRange
    metadata: {name: l, namespace: app}
  b.yaml: "not: [a manifest"
`, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ResourceEnvelope
metadata: {name: renv, namespace: app}
data:
  cm.yaml: {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}
  other.yaml: {apiVersion: v1, kind: ConfigMap, metadata: {name: d, namespace: elsewhere}}
`, `
apiVersion: placement.kubernetes-fleet.io/v1beta1
kind: ClusterResourceEnvelope
metadata: {name: cenv}
data:
  pc.yaml: {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: high}, value: 1000}
`, `
apiVersion: v1
kind: ConfigMap
metadata: {name: plain, namespace: app}
data: {a.yaml: "kind: Namespace"}
`))
	type want struct {
		kind, name, ns string
		env            api.EnvelopeIdentifier
		failed         bool
	}
	cm := api.EnvelopeIdentifier{Name: "env", Namespace: "app", Type: api.ConfigMapEnvelopeType}
	re := api.EnvelopeIdentifier{Name: "renv", Namespace: "app", Type: api.ResourceEnvelopeType}
	ce := api.EnvelopeIdentifier{Name: "cenv", Type: api.ClusterResourceEnvelopeType}
	wants := []want{
		{"ResourceQuota", "q", "app", cm, false},
		{"LimitRange", "l", "app", cm, false},
		{"", "b.yaml", "", cm, true},
		{"ConfigMap", "c", "app", re, false}, // namespace defaults to the envelope's
		{"ConfigMap", "d", "elsewhere", re, true},
		{"PriorityClass", "high", "", ce, false},
		{"ConfigMap", "plain", "app", api.EnvelopeIdentifier{}, false}, // not annotated: not an envelope
	}
	if len(objs) != len(wants) {
		t.Fatalf("got %d objects: %+v", len(objs), objs)
	}
	for i, w := range wants {
		o := objs[i]
		var env api.EnvelopeIdentifier
		if o.Resource.Envelope != nil {
			env = *o.Resource.Envelope
		}
		if o.Resource.Kind != w.kind || o.Resource.Name != w.name || o.Resource.Namespace != w.ns || env != w.env || (o.Err != nil) != w.failed {
			t.Errorf("object %d = %+v (envelope %+v, err %v), want %+v", i, o.Resource, env, o.Err, w)
		}
	}
	if objs[3].Object.GetNamespace() != "app" {
		t.Error("ResourceEnvelope content did not get the envelope's namespace")
	}
}

func TestWaves(t *testing.T) {
	kinds := []schema.GroupKind{
		{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"},
		{Group: "example.com", Kind: "Widget"},
		{Group: "apps", Kind: "Deployment"},
		{Kind: "Service"},
		{Kind: "ConfigMap"},
		{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"},
		{Kind: "Namespace"},
	}
	waves := manifest.ByWave(kinds, manifest.WaveOf)
	var got []string
	for _, w := range waves {
		var names []string
		for _, gk := range w {
			names = append(names, gk.Kind)
		}
		got = append(got, strings.Join(names, "+"))
	}
	want := "CustomResourceDefinition+Namespace ConfigMap Service Deployment Widget MutatingWebhookConfiguration"
	for wave := range manifest.NumWaves {
		for _, p := range manifest.Prerequisites(wave) {
			if p >= wave {
				t.Errorf("wave %d waits for wave %d, which does not come before it", wave, p)
			}
		}
	}
	if slices.Contains(manifest.Prerequisites(manifest.WaveWorkload), manifest.WaveService) {
		t.Error("workloads wait for services; they need not")
	}
	if !slices.Contains(manifest.Prerequisites(manifest.WaveWorkload), manifest.WaveConfig) {
		t.Error("workloads do not wait for their configuration")
	}
	if strings.Join(got, " ") != want {
		t.Errorf("waves = %v\nwant    %s", got, want)
	}
}

func TestOwnerLabels(t *testing.T) {
	long := strings.Repeat("a", 100) + ".example"
	for _, p := range []string{"web-2-crp", long} {
		key := manifest.OwnerLabel(p)
		name := strings.TrimPrefix(key, manifest.OwnerLabelPrefix)
		if len(name) > 63 {
			t.Errorf("owner label name %q is longer than 63", name)
		}
		labels := map[string]string{manifest.ManagedByLabel: manifest.ManagedByValue, key: manifest.OwnerValue}
		if !manifest.OwnedBy(labels, p) || manifest.OwnedBy(labels, p+"x") {
			t.Errorf("OwnedBy wrong for %q", p)
		}
		if delete(labels, manifest.ManagedByLabel); manifest.OwnedBy(labels, p) {
			t.Error("owned without the managed-by label")
		}
	}
	if manifest.OwnerLabel(long) == manifest.OwnerLabel(long+"b") {
		t.Error("long names collide")
	}
}
