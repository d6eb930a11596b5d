package selection_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/rollout/selection"
)

// obj builds a hub object from a manifest written as JSON.
func obj(t *testing.T, manifest string) selection.Object {
	t.Helper()
	o, err := selection.NewObject(json.RawMessage(manifest))
	if err != nil {
		t.Fatalf("NewObject(%s): %v", manifest, err)
	}
	return o
}

// hub is a store with two application namespaces, their contents, a few
// cluster-scoped objects and a custom kind.
func hub(t *testing.T) selection.Objects {
	return selection.Objects{
		obj(t, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"web-2","labels":{"app":"web-2"}}}`),
		obj(t, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"web-3","labels":{"app":"web-3"}}}`),
		obj(t, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"other"}}`),
		obj(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"web-2"}}`),
		obj(t, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"web-2"}}`),
		obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"envelope","namespace":"web-2",
			"annotations":{"kubernetes-fleet.io/envelope-configmap":"true"}},
			"data":{"quota.yaml":"apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: q\n"}}`),
		obj(t, `{"apiVersion":"placement.kubernetes-fleet.io/v1beta1","kind":"ResourceEnvelope","metadata":{"name":"wrapped","namespace":"web-2"},
			"data":{"cm.yaml":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"inner"}}}}`),
		// Objects every cluster makes for itself, and one a controller owns.
		obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kube-root-ca.crt","namespace":"web-2"}}`),
		obj(t, `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"default","namespace":"web-2"}}`),
		obj(t, `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-5b56","namespace":"web-2",
			"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"u1","controller":true}]}}`),
		obj(t, `{"apiVersion":"core.kubeadmiral.io/v1alpha1","kind":"PropagationPolicy","metadata":{"name":"web-pp","namespace":"web-2"},
			"spec":{"schedulingMode":"Duplicate"}}`),
		obj(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"api","namespace":"web-3"}}`),
		obj(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"db","namespace":"other"}}`),
		obj(t, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"reader","labels":{"tier":"read"}}}`),
		obj(t, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"writer","labels":{"tier":"write"}}}`),
		obj(t, `{"apiVersion":"placement.kubernetes-fleet.io/v1beta1","kind":"ClusterResourceEnvelope","metadata":{"name":"crds"},
			"data":{"pc.yaml":{"apiVersion":"scheduling.k8s.io/v1","kind":"PriorityClass","metadata":{"name":"high"},"value":1000}}}`),
		obj(t, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"web-2"}}`),
		obj(t, `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"g"}}`),
	}
}

func keys(objs []selection.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, selection.Key(o.ID))
	}
	return out
}

func TestSelect(t *testing.T) {
	ns := func(name string) api.ClusterResourceSelector {
		return api.ClusterResourceSelector{Version: "v1", Kind: "Namespace", Name: name}
	}
	tests := []struct {
		name      string
		selectors []api.ClusterResourceSelector
		want      []string
	}{{
		name:      "a namespace by name brings what is in it, envelopes as themselves, not what clusters make, hub policies or what controllers own",
		selectors: []api.ClusterResourceSelector{ns("web-2")},
		want: []string{
			"/v1/ConfigMap/web-2/envelope",
			"/v1/Namespace//web-2",
			"/v1/Service/web-2/web",
			"apps/v1/Deployment/web-2/web",
			"example.com/v1/Widget/web-2/w",
			"placement.kubernetes-fleet.io/v1beta1/ResourceEnvelope/web-2/wrapped",
		},
	}, {
		name: "namespaces by label",
		selectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace",
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web-3"}}}},
		want: []string{"/v1/Namespace//web-3", "apps/v1/Deployment/web-3/api"},
	}, {
		name: "label selector with an expression",
		selectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace",
			LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpExists}}}}},
		want: []string{
			"/v1/ConfigMap/web-2/envelope", "/v1/Namespace//web-2", "/v1/Namespace//web-3", "/v1/Service/web-2/web",
			"apps/v1/Deployment/web-2/web", "apps/v1/Deployment/web-3/api", "example.com/v1/Widget/web-2/w",
			"placement.kubernetes-fleet.io/v1beta1/ResourceEnvelope/web-2/wrapped",
		},
	}, {
		name: "cluster-scoped kinds directly, by label and by name",
		selectors: []api.ClusterResourceSelector{
			{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "read"}}},
			{Group: "placement.kubernetes-fleet.io", Version: "v1beta1", Kind: "ClusterResourceEnvelope", Name: "crds"},
			{Group: "example.com", Version: "v1", Kind: "Gadget"},
		},
		want: []string{
			"example.com/v1/Gadget//g",
			"placement.kubernetes-fleet.io/v1beta1/ClusterResourceEnvelope//crds",
			"rbac.authorization.k8s.io/v1/ClusterRole//reader",
		},
	}, {
		name:      "overlapping selectors select an object once",
		selectors: []api.ClusterResourceSelector{ns("web-3"), ns("web-3"), {Version: "v1", Kind: "Namespace", LabelSelector: &metav1.LabelSelector{}}},
		want: []string{
			"/v1/ConfigMap/web-2/envelope", "/v1/Namespace//other", "/v1/Namespace//web-2", "/v1/Namespace//web-3",
			"/v1/Service/web-2/web", "apps/v1/Deployment/other/db", "apps/v1/Deployment/web-2/web",
			"apps/v1/Deployment/web-3/api", "example.com/v1/Widget/web-2/w",
			"placement.kubernetes-fleet.io/v1beta1/ResourceEnvelope/web-2/wrapped",
		},
	}, {
		name:      "selectionScope NamespaceOnly: the namespace alone",
		selectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: "web-2", SelectionScope: api.NamespaceOnly}},
		want:      []string{"/v1/Namespace//web-2"},
	}, {
		name: "selectionScope NamespaceWithResourceSelectors: the namespace, what the other selectors select in it, and cluster-scoped objects",
		selectors: []api.ClusterResourceSelector{
			{Version: "v1", Kind: "Namespace", Name: "web-2", SelectionScope: api.NamespaceWithResourceSelectors},
			{Group: "apps", Version: "v1", Kind: "Deployment"},
			{Version: "v1", Kind: "ConfigMap", LabelSelector: &metav1.LabelSelector{}},
			{Group: "example.com", Version: "v1", Kind: "Widget", Name: "w"},
			{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "writer"},
		},
		want: []string{
			"/v1/ConfigMap/web-2/envelope",
			"/v1/Namespace//web-2",
			"apps/v1/Deployment/web-2/web",
			"example.com/v1/Widget/web-2/w",
			"rbac.authorization.k8s.io/v1/ClusterRole//writer",
		},
	}, {
		name:      "a namespace that is not in the hub selects nothing",
		selectors: []api.ClusterResourceSelector{ns("missing")},
		want:      nil,
	}, {
		name:      "another version of a kind selects nothing",
		selectors: []api.ClusterResourceSelector{{Group: "rbac.authorization.k8s.io", Version: "v1beta1", Kind: "ClusterRole"}},
		want:      nil,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := selection.Select(t.Context(), "", tt.selectors, hub(t))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(keys(got), tt.want) {
				t.Errorf("selected\n  %s\nwant\n  %s", strings.Join(keys(got), "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}

func TestSelectInvalid(t *testing.T) {
	tests := []struct {
		name      string
		selectors []api.ClusterResourceSelector
		want      []string // substrings of the problems, in order
	}{{
		name:      "a built-in namespaced kind",
		selectors: []api.ClusterResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", Name: "web"}},
		want:      []string{"resourceSelectors[0] (apps/v1 Deployment web): Deployment is a namespaced kind; a ClusterResourcePlacement selects cluster-scoped resources: select its Namespace"},
	}, {
		name:      "a custom kind the hub holds in a namespace",
		selectors: []api.ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: "web-2"}, {Group: "example.com", Version: "v1", Kind: "Widget"}},
		want:      []string{"resourceSelectors[1] (example.com/v1 Widget): Widget is a namespaced kind"},
	}, {
		name: "a label selector that does not parse, and both name and labels",
		selectors: []api.ClusterResourceSelector{
			{Version: "v1", Kind: "Namespace", LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: "Among", Values: []string{"x"}}}}},
			{Version: "v1", Kind: "Namespace", Name: "web-2", LabelSelector: &metav1.LabelSelector{}},
		},
		want: []string{`resourceSelectors[0] (v1 Namespace with a labelSelector): labelSelector: "Among" is not a valid label selector operator`,
			"resourceSelectors[1] (v1 Namespace web-2): set either name or labelSelector, not both"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := selection.Select(t.Context(), "", tt.selectors, hub(t))
			var invalid *selection.InvalidError
			if !errors.As(err, &invalid) {
				t.Fatalf("Select returned %v, want an *InvalidError", err)
			}
			if len(invalid.Problems) != len(tt.want) {
				t.Fatalf("problems %q, want %d", invalid.Problems, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(invalid.Problems[i], w) {
					t.Errorf("problem %d is %q, want it to contain %q", i, invalid.Problems[i], w)
				}
			}
		})
	}
}

// TestSelectNamespaceAware covers the selectors fleetctl makes of KubeAdmiral
// policies: they name selection.NamespaceLabel, and may then select
// namespaced kinds directly, within the namespaces they match.
func TestSelectNamespaceAware(t *testing.T) {
	const pp, cpp = "kubeadmiral.io/propagation-policy-name", "kubeadmiral.io/cluster-propagation-policy-name"
	store := selection.Objects{
		obj(t, `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a"}}`),
		obj(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"team-a","labels":{"`+pp+`":"web"}}}`),
		obj(t, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"team-a","labels":{"`+pp+`":"web"}}}`),
		obj(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"other","namespace":"team-a"}}`),
		// The same policy name in another namespace is another policy.
		obj(t, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"team-b","labels":{"`+pp+`":"web"}}}`),
		// What a controller owns is left to the controller, as in a selected namespace.
		obj(t, `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-5b56","namespace":"team-a","labels":{"`+pp+`":"web"},
			"ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":"u1","controller":true}]}}`),
		obj(t, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"team-a","labels":{"`+pp+`":"web"}}}`),
		obj(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","namespace":"team-c","labels":{"`+cpp+`":"infra"}}}`),
		obj(t, `{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"name":"reader","labels":{"`+cpp+`":"infra"}}}`),
	}
	inNamespace := func(group, version, kind string) api.ClusterResourceSelector {
		return api.ClusterResourceSelector{Group: group, Version: version, Kind: kind, LabelSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{pp: "web", selection.NamespaceLabel: "team-a"}}}
	}
	anyNamespace := func(group, version, kind string) api.ClusterResourceSelector {
		return api.ClusterResourceSelector{Group: group, Version: version, Kind: kind, LabelSelector: &metav1.LabelSelector{
			MatchLabels:      map[string]string{cpp: "infra"},
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: selection.NamespaceLabel, Operator: metav1.LabelSelectorOpExists}}}}
	}
	tests := []struct {
		name      string
		selectors []api.ClusterResourceSelector
		want      []string
	}{{
		name: "a propagation policy's kinds in its namespace only, not what controllers own",
		selectors: []api.ClusterResourceSelector{inNamespace("apps", "v1", "Deployment"), inNamespace("", "v1", "Service"),
			inNamespace("apps", "v1", "ReplicaSet"), inNamespace("example.com", "v1", "Widget")},
		want: []string{"/v1/Service/team-a/web", "apps/v1/Deployment/team-a/web", "example.com/v1/Widget/team-a/w"},
	}, {
		name:      "a cluster policy's namespaced and cluster-scoped kinds in every namespace",
		selectors: []api.ClusterResourceSelector{anyNamespace("", "v1", "ConfigMap"), anyNamespace("rbac.authorization.k8s.io", "v1", "ClusterRole")},
		want:      []string{"/v1/ConfigMap/team-c/cfg", "rbac.authorization.k8s.io/v1/ClusterRole//reader"},
	}, {
		name: "the key is matched as the namespace, not as a label",
		selectors: []api.ClusterResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment", LabelSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: selection.NamespaceLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"team-b"}}}}}},
		want: []string{"apps/v1/Deployment/team-b/web"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := selection.Select(t.Context(), "", tt.selectors, store)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(keys(got), tt.want) {
				t.Errorf("selected\n  %s\nwant\n  %s", strings.Join(keys(got), "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}

	// Without the key, a ClusterResourcePlacement's rule holds: the same
	// selector for a namespaced kind is invalid.
	plain := inNamespace("apps", "v1", "Deployment")
	delete(plain.LabelSelector.MatchLabels, selection.NamespaceLabel)
	var invalid *selection.InvalidError
	if _, err := selection.Select(t.Context(), "", []api.ClusterResourceSelector{plain}, store); !errors.As(err, &invalid) {
		t.Errorf("a selector of Deployments without %s: %v, want an *InvalidError", selection.NamespaceLabel, err)
	}
}

func TestNewObjectRejectsManifestsWithoutIdentity(t *testing.T) {
	for _, m := range []string{`{"kind":"Namespace","metadata":{"name":"x"}}`, `{"apiVersion":"v1","kind":"Namespace"}`, `[1]`} {
		if _, err := selection.NewObject(json.RawMessage(m)); err == nil {
			t.Errorf("NewObject(%s) succeeded, want an error", m)
		}
	}
}

func TestMayConcern(t *testing.T) {
	ns := func(name string) api.ClusterResourceSelector {
		return api.ClusterResourceSelector{Version: "v1", Kind: "Namespace", Name: name}
	}
	byLabel := api.ClusterResourceSelector{Version: "v1", Kind: "Namespace",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	role := api.ClusterResourceSelector{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "reader"}
	cm := api.ResourceIdentifier{Version: "v1", Kind: "ConfigMap", Namespace: "app", Name: "settings"}
	tests := []struct {
		name      string
		selectors []api.ClusterResourceSelector
		id        api.ResourceIdentifier
		want      bool
	}{
		{"an object in the selected namespace", []api.ClusterResourceSelector{ns("app")}, cm, true},
		{"an object in another namespace", []api.ClusterResourceSelector{ns("web")}, cm, false},
		{"namespaces selected by labels may include its namespace", []api.ClusterResourceSelector{byLabel}, cm, true},
		{"the selected namespace itself", []api.ClusterResourceSelector{ns("app")}, api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "app"}, true},
		{"another namespace object", []api.ClusterResourceSelector{ns("app")}, api.ResourceIdentifier{Version: "v1", Kind: "Namespace", Name: "web"}, false},
		{"a cluster-scoped object by name", []api.ClusterResourceSelector{role}, api.ResourceIdentifier{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "reader"}, true},
		{"a cluster-scoped object of another name", []api.ClusterResourceSelector{role}, api.ResourceIdentifier{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "admin"}, false},
		{"a kind no selector names", []api.ClusterResourceSelector{role}, cm, false},
		{"a namespace-aware selector of the kind",
			[]api.ClusterResourceSelector{{Group: "apps", Version: "v1", Kind: "Deployment",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{selection.NamespaceLabel: "default"}}}},
			api.ResourceIdentifier{Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "default", Name: "web"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := selection.MayConcern(tt.selectors, tt.id); got != tt.want {
				t.Errorf("MayConcern = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSelectEachNamesTheSelectorsThatPickNothing(t *testing.T) {
	selectors := []api.ClusterResourceSelector{
		{Version: "v1", Kind: "Namespace", Name: "web-3"},
		{Version: "v1", Kind: "Namespace", Name: "not-yet"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole",
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "none"}}},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole", Name: "reader"},
	}
	objs, unmatched, err := selection.SelectEach(t.Context(), "", selectors, hub(t))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2}; !slices.Equal(unmatched, want) {
		t.Errorf("unmatched %v, want %v", unmatched, want)
	}
	want := []string{"/v1/Namespace//web-3", "apps/v1/Deployment/web-3/api", "rbac.authorization.k8s.io/v1/ClusterRole//reader"}
	if got := keys(objs); !slices.Equal(got, want) {
		t.Errorf("selected %v, want %v (what the others pick, as Select)", got, want)
	}
	if _, unmatched, _ := selection.SelectEach(t.Context(), "", selectors[:1], hub(t)); unmatched != nil {
		t.Errorf("unmatched %v, want none", unmatched)
	}
}
