package override

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// Fixtures: a namespace with a Deployment, as a placement selecting the namespace has them.
var (
	nsApp  = `{"apiVersion":"v1","kind":"Namespace","metadata":{"labels":{"team":"web"},"name":"app"}}`
	deploy = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"app":"web"},"name":"web","namespace":"app"},` +
		`"spec":{"replicas":1,"template":{"spec":{"containers":[{"image":"nginx:1","name":"web"}]}}}}`
	east   = Cluster{Name: "member-1", Labels: map[string]string{"region": "east", "env": "prod"}}
	west   = Cluster{Name: "member-2", Labels: map[string]string{"region": "west", "env": "test"}}
	bare   = Cluster{Name: "member-3", Labels: map[string]string{}}
	anyone = &api.ClusterSelector{}
)

func manifests(ms ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(ms))
	for i, m := range ms {
		out[i] = json.RawMessage(m)
	}
	return out
}

func where(labels map[string]string) *api.ClusterSelector {
	return &api.ClusterSelector{ClusterSelectorTerms: []api.ClusterSelectorTerm{{LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}}}
}

func patch(op api.JSONPatchOverrideOperator, path, value string) api.JSONPatchOverride {
	p := api.JSONPatchOverride{Operator: op, Path: path}
	if value != "" {
		p.Value = runtime.RawExtension{Raw: []byte(value)}
	}
	return p
}

func rule(sel *api.ClusterSelector, patches ...api.JSONPatchOverride) api.OverrideRule {
	return api.OverrideRule{ClusterSelector: sel, OverrideType: api.JSONPatchOverrideType, JSONPatchOverrides: patches}
}

func deleteRule(sel *api.ClusterSelector) api.OverrideRule {
	return api.OverrideRule{ClusterSelector: sel, OverrideType: api.DeleteOverrideType}
}

func cro(name string, index int64, target api.ResourceIdentifier, rules ...api.OverrideRule) Snapshot {
	return Snapshot{Index: index, Override: api.Override{Key: api.OverrideKey{Kind: api.ClusterResourceOverrideKind, Name: name},
		Targets: []api.ResourceIdentifier{target}, Rules: rules}}
}

func ro(name string, target api.ResourceIdentifier, rules ...api.OverrideRule) Snapshot {
	return Snapshot{Override: api.Override{Key: api.OverrideKey{Kind: api.ResourceOverrideKind, Namespace: target.Namespace, Name: name},
		Targets: []api.ResourceIdentifier{target}, Rules: rules}}
}

var (
	theNamespace  = api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "app"}
	theDeployment = api.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "app", Name: "web"}
)

// field reads a value of the manifest of kind in res by a dotted path.
func field(t *testing.T, res Result, kind, path string) any {
	t.Helper()
	for _, m := range res.Manifests {
		var obj map[string]any
		if err := json.Unmarshal(m, &obj); err != nil {
			t.Fatal(err)
		}
		if obj["kind"] != kind {
			continue
		}
		var v any = obj
		for _, p := range strings.Split(path, ".") {
			if list, ok := v.([]any); ok && len(list) > 0 {
				v = list[0] // the first item of a list
			}
			m, _ := v.(map[string]any)
			v = m[p]
		}
		return v
	}
	t.Fatalf("no %s among the manifests", kind)
	return nil
}

func TestNoOverrideForTheClusterLeavesTheManifestsAlone(t *testing.T) {
	in := manifests(nsApp, deploy)
	overrides := []Snapshot{
		ro("prod-only", theDeployment, rule(where(map[string]string{"env": "prod"}), patch("replace", "/spec/replicas", "3"))),
		ro("nobody", theDeployment, rule(nil, patch("replace", "/spec/replicas", "5"))),
	}
	res := Apply(in, overrides, west)
	if res.Err != nil || res.Changed || res.Applied != nil {
		t.Fatalf("Apply on a cluster no rule selects = %+v", res)
	}
	if !reflect.DeepEqual(res.Manifests, in) {
		t.Errorf("manifests changed: %s", res.Manifests)
	}
}

func TestLabelPerClusterFromItsNameOnTheNamespaceAndWhatIsInIt(t *testing.T) {
	o := cro("example-cro", 2, theNamespace, rule(anyone, patch("add", "/metadata/labels/cluster-name", `"${MEMBER-CLUSTER-NAME}"`)))
	for _, c := range []Cluster{east, west} {
		res := Apply(manifests(nsApp, deploy), []Snapshot{o}, c)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		for _, kind := range []string{"Namespace", "Deployment"} {
			if got := field(t, res, kind, "metadata.labels.cluster-name"); got != c.Name {
				t.Errorf("%s on %s: label cluster-name = %v, want %s", kind, c.Name, got, c.Name)
			}
		}
		want := &events.ClusterOverrides{ClusterResourceOverrides: []string{"example-cro-2"}}
		if !res.Changed || !res.Applied.Equal(want) {
			t.Errorf("changed %v, applied %+v, want %+v", res.Changed, res.Applied, want)
		}
	}
}

func TestImagePerRegionFromALabel(t *testing.T) {
	o := ro("image-per-region", theDeployment,
		rule(anyone, patch("replace", "/spec/template/spec/containers/0/image", `"registry.${MEMBER-CLUSTER-LABEL-KEY-region}.example/nginx:1"`)))
	res := Apply(manifests(nsApp, deploy), []Snapshot{o}, east)
	if got := field(t, res, "Deployment", "spec.template.spec.containers.image"); got != "registry.east.example/nginx:1" {
		t.Errorf("image on east = %v", got)
	}
	if got := res.Applied.ResourceOverrides; !reflect.DeepEqual(got, []api.NamespacedName{{Name: "image-per-region-0", Namespace: "app"}}) {
		t.Errorf("applicable resource overrides = %+v", got)
	}
	// A cluster without the label fails, saying which override, object, patch and label.
	res = Apply(manifests(nsApp, deploy), []Snapshot{o}, bare)
	want := `ResourceOverrideSnapshot "image-per-region-0" failed to apply on Deployment "web" in namespace "app": ` +
		`overrideRules[0].jsonPatchOverrides[0] (replace /spec/template/spec/containers/0/image): label key region not found on cluster member-3`
	if res.Err == nil || res.Err.Error() != want {
		t.Errorf("Apply on a cluster without the label: err = %v, want %q", res.Err, want)
	}
	if res.Manifests != nil || res.Applied == nil {
		t.Errorf("a failed override returns manifests %s and applied %+v; want none and the overrides tried", res.Manifests, res.Applied)
	}
}

func TestResourceOverrideWinsAndTheLastRuleWins(t *testing.T) {
	overrides := []Snapshot{
		cro("ns-wide", 0, theNamespace, rule(anyone, patch("replace", "/spec/replicas", "2"))),
		ro("mine", theDeployment,
			rule(anyone, patch("replace", "/spec/replicas", "3")),
			rule(where(map[string]string{"region": "east"}), patch("replace", "/spec/replicas", "4"))),
	}
	// Given in any order, the ClusterResourceOverride applies first.
	res := Apply(manifests(deploy), []Snapshot{overrides[1], overrides[0]}, west)
	if got := field(t, res, "Deployment", "spec.replicas"); got != 3.0 {
		t.Errorf("replicas on west = %v, want the ResourceOverride's 3", got)
	}
	res = Apply(manifests(deploy), overrides, east)
	if got := field(t, res, "Deployment", "spec.replicas"); got != 4.0 {
		t.Errorf("replicas on east = %v, want the last rule's 4", got)
	}
}

func TestDeleteKeepsTheObjectOffOneCluster(t *testing.T) {
	o := ro("not-on-test", theDeployment, deleteRule(where(map[string]string{"env": "test"})))
	if res := Apply(manifests(nsApp, deploy), []Snapshot{o}, west); len(res.Manifests) != 1 || !res.Changed || res.Err != nil {
		t.Errorf("on west (env test) = %d manifests, changed %v, err %v; want the namespace only", len(res.Manifests), res.Changed, res.Err)
	}
	if res := Apply(manifests(nsApp, deploy), []Snapshot{o}, east); len(res.Manifests) != 2 || res.Changed {
		t.Errorf("on east = %d manifests, changed %v; want both unchanged", len(res.Manifests), res.Changed)
	}
}

func TestAPatchOnAMissingPathFailsTheCluster(t *testing.T) {
	o := ro("bad-path", theDeployment, rule(anyone, patch("replace", "/spec/template/spec/containers/3/image", `"x"`)))
	res := Apply(manifests(deploy), []Snapshot{o}, east)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "(replace /spec/template/spec/containers/3/image): the path does not exist in the object") {
		t.Errorf("err = %v", res.Err)
	}
	o = ro("no-labels", theDeployment, rule(anyone, patch("add", "/spec/selector/matchLabels/x", `"y"`)))
	if res := Apply(manifests(deploy), []Snapshot{o}, east); res.Err == nil {
		t.Error("an add under a parent that does not exist succeeded")
	}
}

func TestJSONPatchOperations(t *testing.T) {
	doc := `{"a":{"b~c/d":1},"list":[1,2,3]}`
	tests := []struct {
		op          api.JSONPatchOverrideOperator
		path, value string
		want        string
	}{
		{"add", "/list/1", "9", `{"a":{"b~c/d":1},"list":[1,9,2,3]}`},
		{"add", "/list/-", "9", `{"a":{"b~c/d":1},"list":[1,2,3,9]}`},
		{"add", "/list/3", "9", `{"a":{"b~c/d":1},"list":[1,2,3,9]}`},
		{"remove", "/list/0", "", `{"a":{"b~c/d":1},"list":[2,3]}`},
		{"replace", "/a/b~0c~1d", `{"x":true}`, `{"a":{"b~c/d":{"x":true}},"list":[1,2,3]}`},
		{"remove", "/a/b~0c~1d", "", `{"a":{},"list":[1,2,3]}`},
		{"add", "/a/new", `"v"`, `{"a":{"b~c/d":1,"new":"v"},"list":[1,2,3]}`},
	}
	for _, tt := range tests {
		v, _ := decode([]byte(doc))
		var value any
		if tt.value != "" {
			value, _ = decode([]byte(tt.value))
		}
		got, err := applyPatch(v, tt.op, tt.path, value)
		if err != nil {
			t.Errorf("%s %s: %v", tt.op, tt.path, err)
			continue
		}
		if b, _ := json.Marshal(got); string(b) != tt.want {
			t.Errorf("%s %s = %s, want %s", tt.op, tt.path, b, tt.want)
		}
	}
	for _, bad := range []struct {
		op   api.JSONPatchOverrideOperator
		path string
	}{{"add", "/list/4"}, {"replace", "/list/3"}, {"remove", "/nope"}, {"replace", "/a/x"}, {"add", "/list/01"}, {"add", "/nope/x"}} {
		v, _ := decode([]byte(doc))
		if _, err := applyPatch(v, bad.op, bad.path, 1); err == nil {
			t.Errorf("%s %s succeeded", bad.op, bad.path)
		}
	}
}

// Objects an envelope wraps are overridden as if they were placed directly.
func TestOverridesApplyInsideEnvelopes(t *testing.T) {
	resourceEnvelope := `{"apiVersion":"placement.kubernetes-fleet.io/v1beta1","kind":"ResourceEnvelope","metadata":{"name":"ingress","namespace":"app"},` +
		`"data":{"deploy.yaml":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":1}}}}`
	configMapEnvelope := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"annotations":{"kubernetes-fleet.io/envelope-configmap":"true"},"name":"env","namespace":"app"},` +
		`"data":{"quota.yaml":"apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: quota\n  namespace: app\nspec:\n  hard:\n    pods: \"10\"\n"}}`
	quota := api.ResourceIdentifier{Version: "v1", Kind: "ResourceQuota", Namespace: "app", Name: "quota"}
	overrides := []Snapshot{
		ro("replicas", theDeployment, rule(where(map[string]string{"env": "prod"}), patch("replace", "/spec/replicas", "3"))),
		ro("quota", quota, rule(anyone, patch("replace", "/spec/hard/pods", `"${MEMBER-CLUSTER-LABEL-KEY-region}"`)), deleteRule(where(map[string]string{"env": "test"}))),
	}
	in := manifests(nsApp, resourceEnvelope, configMapEnvelope)
	if got := Applicable("any", in, overrides); len(got) != 2 {
		t.Errorf("Applicable finds %d overrides of wrapped objects, want 2", len(got))
	}

	res := Apply(in, overrides, east)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var re struct {
		Data map[string]struct {
			Spec struct{ Replicas int } `json:"spec"`
		} `json:"data"`
	}
	if err := json.Unmarshal(res.Manifests[1], &re); err != nil || re.Data["deploy.yaml"].Spec.Replicas != 3 {
		t.Errorf("the wrapped Deployment on east: %s (%v), want replicas 3", res.Manifests[1], err)
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(res.Manifests[2], &cm); err != nil || !strings.Contains(cm.Data["quota.yaml"], `"pods":"east"`) {
		t.Errorf("the wrapped ResourceQuota on east: %s (%v), want pods east", res.Manifests[2], err)
	}

	// Deleting the only object of an envelope leaves the envelope off the cluster.
	res = Apply(in, overrides, west)
	if res.Err != nil || len(res.Manifests) != 2 || string(res.Manifests[1]) != resourceEnvelope {
		t.Errorf("on west: %d manifests (%s), err %v; want the namespace and the unchanged ResourceEnvelope", len(res.Manifests), res.Manifests, res.Err)
	}
	// A failure names the envelope.
	res = Apply(in, overrides, bare)
	if res.Err == nil || !strings.Contains(res.Err.Error(), `ResourceQuota "quota" in namespace "app" (in ConfigMap app/env)`) {
		t.Errorf("on a cluster without region: err %v, want the wrapped object and its envelope named", res.Err)
	}
}

func TestApplicableKeepsTheOverridesOfThePlacementsObjects(t *testing.T) {
	forOther := cro("for-other", 0, theNamespace, rule(anyone, patch("add", "/metadata/labels/a", `"b"`)))
	forOther.Placement = &api.PlacementRef{Name: "other", Scope: api.ClusterScoped}
	forMine := ro("for-mine", theDeployment, rule(anyone, patch("add", "/metadata/labels/a", `"b"`)))
	forMine.Placement = &api.PlacementRef{Name: "mine", Scope: api.ClusterScoped}
	everyone := cro("by-namespace", 0, theNamespace, rule(anyone, patch("add", "/metadata/labels/a", `"b"`)))
	elsewhere := ro("elsewhere", api.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "other", Name: "web"})
	atV1beta1 := ro("any-version", api.ResourceIdentifier{Group: "apps", Version: "v1beta1", Kind: "Deployment", Namespace: "app", Name: "web"})

	got := Applicable("mine", manifests(deploy), []Snapshot{forOther, forMine, everyone, elsewhere, atV1beta1})
	var names []string
	for _, o := range got {
		names = append(names, o.Key.String())
	}
	want := []string{"ClusterResourceOverride by-namespace", "ResourceOverride app/any-version", "ResourceOverride app/for-mine"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("Applicable = %v, want %v", names, want)
	}
}
