package kubeadmiral

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/harness/golden"
	"github.com/flotilla-dev/flotilla/harness/seeds"
)

func decodePolicy(t *testing.T, text string) Policy {
	t.Helper()
	obj, err := api.Decode([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if errs := api.Validate(obj); len(errs) > 0 {
		t.Fatalf("the test policy is invalid: %v", errs)
	}
	p, ok := PolicyOf(obj)
	if !ok {
		t.Fatalf("%T is not a policy", obj)
	}
	return p
}

// TestSeed004 converts seed 004's PropagationPolicy: the two placements
// select the policy's labelled objects of the default kinds, split by the
// adopt label, on the one listed cluster.
func TestSeed004(t *testing.T) {
	conv, errs := Convert(decodePolicy(t, seeds.Read(t, "004-3.reindented.yaml")))
	if len(errs) > 0 {
		t.Fatalf("Convert: %v", errs)
	}
	if len(conv.Warnings) != 0 {
		t.Errorf("warnings = %q, want none", conv.Warnings)
	}
	if conv.Keep.Name != "pp.default.nginx-pp" || conv.Adopt.Name != "pp-adopt.default.nginx-pp" {
		t.Errorf("names = %s, %s", conv.Keep.Name, conv.Adopt.Name)
	}
	if got := conv.Keep.Spec.Strategy.ApplyStrategy.WhenToTakeOver; got != api.WhenToTakeOverTypeNever {
		t.Errorf("keep placement whenToTakeOver = %s, want Never", got)
	}
	if got := conv.Adopt.Spec.Strategy.ApplyStrategy.WhenToTakeOver; got != api.WhenToTakeOverTypeAlways {
		t.Errorf("adopt placement whenToTakeOver = %s, want Always", got)
	}
	// The seed's Deployment and Service are selected by the adopting
	// placement, in the policy's namespace only: the selectors name
	// NamespaceLabel, which lets the rollout select namespaced kinds.
	for _, kind := range []string{"Deployment", "Service"} {
		found := false
		for _, s := range conv.Adopt.Spec.ResourceSelectors {
			if s.Kind == kind && reflect.DeepEqual(s.LabelSelector.MatchLabels, map[string]string{
				api.PropagationPolicyNameLabel: "nginx-pp", AdoptLabel: AdoptValue, NamespaceLabel: "default"}) {
				found = true
			}
		}
		if !found {
			t.Errorf("the adopting placement does not select %s objects of namespace default labelled for nginx-pp and adoption", kind)
		}
	}
	for _, s := range conv.Keep.Spec.ResourceSelectors {
		if got := s.LabelSelector.MatchLabels[NamespaceLabel]; got != "default" {
			t.Errorf("the keeping placement's %s selector matches namespace %q, want default", s.Kind, got)
		}
	}
	out, err := yaml.Marshal(conv.Placements())
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "testdata/seed-004-3.placements.yaml", out)
}

func TestPolicyMapping(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     string
		want     api.PlacementPolicy
		warnings []string
	}{
		{
			name: "no clusters named: all clusters",
			spec: `schedulingMode: Duplicate`,
			want: api.PlacementPolicy{PlacementType: api.PickAllPlacementType},
		},
		{
			name: "cluster list and selector are ANDed in one term",
			spec: `
schedulingMode: Duplicate
clusterSelector: {region: eu}
placement: [{cluster: a}, {cluster: b}]`,
			want: api.PlacementPolicy{PlacementType: api.PickAllPlacementType, Affinity: required(
				term(map[string]string{"region": "eu"}, req(api.MemberNameLabel, metav1.LabelSelectorOpIn, "a", "b")))},
		},
		{
			name: "affinity terms stay ORed, each with the selector; metadata.name matches the member name",
			spec: `
schedulingMode: Duplicate
clusterSelector: {region: eu}
clusterAffinity:
- matchExpressions: [{key: tier, operator: In, values: [gold]}]
- matchFields: [{key: metadata.name, operator: NotIn, values: [c]}]
  matchExpressions: [{key: spot, operator: DoesNotExist, values: []}]`,
			want: api.PlacementPolicy{PlacementType: api.PickAllPlacementType, Affinity: required(
				term(map[string]string{"region": "eu"}, req("tier", metav1.LabelSelectorOpIn, "gold")),
				term(map[string]string{"region": "eu"}, req("spot", metav1.LabelSelectorOpDoesNotExist), req(api.MemberNameLabel, metav1.LabelSelectorOpNotIn, "c")))},
		},
		{
			name: "maxClusters picks N, weights prefer clusters",
			spec: `
schedulingMode: Divide
maxClusters: 2
placement:
- cluster: a
  preferences: {weight: 3}
- cluster: b`,
			want: api.PlacementPolicy{PlacementType: api.PickNPlacementType, NumberOfClusters: new(int32(2)), Affinity: &api.Affinity{ClusterAffinity: &api.ClusterAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &api.ClusterSelector{ClusterSelectorTerms: []api.ClusterSelectorTerm{
					term(nil, req(api.MemberNameLabel, metav1.LabelSelectorOpIn, "a", "b"))}},
				PreferredDuringSchedulingIgnoredDuringExecution: []api.PreferredClusterSelector{{Weight: 3, Preference: api.ClusterSelectorTerm{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{api.MemberNameLabel: "a"}}}}},
			}}},
			warnings: []string{"schedulingMode Divide: Flotilla places the whole object on every chosen cluster; replicas are not divided between clusters"},
		},
		{
			name: "tolerations of NoSchedule are kept, NoExecute ones dropped",
			spec: `
schedulingMode: Duplicate
tolerations:
- {key: gpu, operator: Exists, effect: NoSchedule}
- {key: maintenance, operator: Equal, value: "true", effect: NoExecute}`,
			want: api.PlacementPolicy{PlacementType: api.PickAllPlacementType, Tolerations: []api.Toleration{
				{Key: "gpu", Operator: api.TolerationOpExists, Effect: api.TaintEffectNoSchedule}}},
			warnings: []string{"spec.tolerations[1]: effect NoExecute is ignored: member clusters have NoSchedule taints only"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := "apiVersion: core.kubeadmiral.io/v1alpha1\nkind: PropagationPolicy\nmetadata: {name: p, namespace: team}\nspec:\n" + indent(tc.spec)
			conv, errs := Convert(decodePolicy(t, text))
			if len(errs) > 0 {
				t.Fatalf("Convert: %v", errs)
			}
			for _, crp := range conv.Placements() {
				got := *crp.Spec.Policy
				want := tc.want
				api.SetDefaults(&api.ClusterResourcePlacement{Spec: api.PlacementSpec{Policy: &want}})
				if !reflect.DeepEqual(got, want) {
					gy, _ := yaml.Marshal(got)
					wy, _ := yaml.Marshal(want)
					t.Errorf("%s policy:\n%s\nwant:\n%s", crp.Name, gy, wy)
				}
			}
			if !reflect.DeepEqual(conv.Warnings, tc.warnings) {
				t.Errorf("warnings = %q, want %q", conv.Warnings, tc.warnings)
			}
		})
	}
}

func TestConvertErrorsNameThePolicyField(t *testing.T) {
	text := `apiVersion: core.kubeadmiral.io/v1alpha1
kind: ClusterPropagationPolicy
metadata:
  name: p
  annotations:
    flotilla.dev/kinds: "monitoring.coreos.com/v1/ServiceMonitor, Deployment"
spec:
  schedulingMode: Duplicate
  clusterAffinity:
  - matchExpressions:
    - {key: cpus, operator: Gt, values: ["8"]}
    matchFields:
    - {key: metadata.labels, operator: Exists}
`
	_, errs := Convert(decodePolicy(t, text))
	want := []string{
		`metadata.annotations[flotilla.dev/kinds]: "Deployment" is not group/version/Kind or version/Kind (for example apps/v1/Deployment or v1/Namespace)`,
		`spec.clusterAffinity[0].matchExpressions[0].operator: "Gt" is not supported: Flotilla compares cluster labels with In, NotIn, Exists and DoesNotExist; compare numeric cluster properties with a ClusterResourcePlacement's propertySelector instead`,
		`spec.clusterAffinity[0].matchFields[0].key: "metadata.labels" is not supported: Flotilla matches the cluster field metadata.name only; use matchExpressions on cluster labels`,
	}
	if got := errs.Fields(); !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestClusterPolicyKinds(t *testing.T) {
	p := Policy{Kind: api.ClusterPropagationPolicyKind, Name: "infra",
		Annotations: map[string]string{KindsAnnotation: "monitoring.coreos.com/v1/ServiceMonitor, v1/Namespace"}}
	conv, errs := Convert(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if conv.Keep.Name != "cpp.infra" || conv.Adopt.Name != "cpp-adopt.infra" {
		t.Errorf("names = %s, %s", conv.Keep.Name, conv.Adopt.Name)
	}
	kinds := map[string]bool{}
	for _, s := range conv.Keep.Spec.ResourceSelectors {
		kinds[s.Group+"/"+s.Version+"/"+s.Kind] = true
		if got := s.LabelSelector.MatchLabels[api.ClusterPropagationPolicyNameLabel]; got != "infra" {
			t.Errorf("selector %s matches %v, want the cluster policy label", s.Kind, s.LabelSelector.MatchLabels)
		}
		// Every namespace, and cluster-scoped objects too (their namespace is empty).
		want := []metav1.LabelSelectorRequirement{
			{Key: NamespaceLabel, Operator: metav1.LabelSelectorOpExists},
			{Key: AdoptLabel, Operator: metav1.LabelSelectorOpDoesNotExist},
		}
		if !reflect.DeepEqual(s.LabelSelector.MatchExpressions, want) {
			t.Errorf("keep selector %s has expressions %v, want any namespace and no adoptable objects", s.Kind, s.LabelSelector.MatchExpressions)
		}
		if _, ok := s.LabelSelector.MatchLabels[NamespaceLabel]; ok {
			t.Errorf("keep selector %s is limited to a namespace: %v", s.Kind, s.LabelSelector.MatchLabels)
		}
	}
	for _, k := range []string{"apps/v1/Deployment", "rbac.authorization.k8s.io/v1/ClusterRole", "monitoring.coreos.com/v1/ServiceMonitor", "/v1/Namespace"} {
		if !kinds[k] {
			t.Errorf("kind %s not selected; selected %v", k, kinds)
		}
	}
}

func TestLongNamesStayValidAndDistinct(t *testing.T) {
	long := strings.Repeat("a", 55)
	p1 := Policy{Kind: api.PropagationPolicyKind, Namespace: "team", Name: long + "-one"}
	p2 := Policy{Kind: api.PropagationPolicyKind, Namespace: "team", Name: long + "-two"}
	k1, a1 := p1.PlacementNames()
	k2, a2 := p2.PlacementNames()
	for _, n := range []string{k1, a1, k2, a2} {
		if len(n) > 63 {
			t.Errorf("%s is %d characters", n, len(n))
		}
	}
	if k1 == k2 || a1 == a2 || k1 == a1 {
		t.Errorf("names collide: %s %s %s %s", k1, a1, k2, a2)
	}
	conv, errs := Convert(p1)
	if len(errs) > 0 {
		t.Fatalf("Convert: %v", errs)
	}
	if errs := api.ValidatePlacement(conv.Adopt); len(errs) > 0 {
		t.Errorf("placement invalid: %v", errs)
	}
}

func TestPolicyNameMustFitALabel(t *testing.T) {
	_, errs := Convert(Policy{Kind: api.PropagationPolicyKind, Namespace: "team", Name: strings.Repeat("a", 64)})
	want := []string{"metadata.name: must be at most 63 characters to be the value of the label kubeadmiral.io/propagation-policy-name that selects the policy's objects, not 64"}
	if got := errs.Fields(); !reflect.DeepEqual(got, want) {
		t.Errorf("errors = %q, want %q", got, want)
	}
}

func indent(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n") + "\n"
}

func req(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
}

func term(labels map[string]string, reqs ...metav1.LabelSelectorRequirement) api.ClusterSelectorTerm {
	return api.ClusterSelectorTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: labels, MatchExpressions: reqs}}
}

func required(terms ...api.ClusterSelectorTerm) *api.Affinity {
	return &api.Affinity{ClusterAffinity: &api.ClusterAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &api.ClusterSelector{ClusterSelectorTerms: terms}}}
}
