package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/scheduler/framework"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func TestCompilePolicyRejectsInvalidPolicies(t *testing.T) {
	for _, tc := range []struct {
		name, policy string
		says         []string
	}{
		{"unknown type", `{placementType: PickSome}`, []string{`unknown placement type "PickSome"`}},
		{"PickN without N", `{placementType: PickN}`, []string{"PickN needs a number of clusters"}},
		{"negative N", `{placementType: PickN, numberOfClusters: -1}`, []string{"must not be negative"}},
		{"N outside PickN", `{placementType: PickAll, numberOfClusters: 2}`, []string{"only PickN takes a number of clusters"}},
		{"names outside PickFixed", `{placementType: PickN, numberOfClusters: 1, clusterNames: [a]}`, []string{"only PickFixed takes cluster names"}},
		{"affinity with PickFixed", `
placementType: PickFixed
clusterNames: [a]
affinity: {clusterAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {clusterSelectorTerms: [{labelSelector: {matchLabels: {a: b}}}]}}}`,
			[]string{"PickFixed takes no affinity"}},
		{"spread outside PickN", `{placementType: PickAll, topologySpreadConstraints: [{topologyKey: region}]}`, []string{"only PickN takes topology spread constraints"}},
		{"bad spread", `
placementType: PickN
numberOfClusters: 1
topologySpreadConstraints: [{maxSkew: 0, topologyKey: "", whenUnsatisfiable: Never}]`,
			[]string{"maxSkew: must be at least 1", "topologyKey: must not be empty", `unknown action "Never"`}},
		{"bad property selector", `
affinity:
  clusterAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      clusterSelectorTerms:
      - propertySelector: {matchExpressions: [{name: n, operator: Gt, values: ["lots"]}]}
      - propertySelector: {matchExpressions: [{name: n, operator: In, values: ["1"]}]}
      - propertySelector: {matchExpressions: [{name: n, operator: Eq, values: ["1", "2"]}]}`,
			[]string{`"lots" is not a quantity`, `unknown operator "In"`, "want exactly one value, got 2"}},
		{"bad label selector", `
affinity:
  clusterAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      clusterSelectorTerms: [{labelSelector: {matchExpressions: [{key: a, operator: Near}]}}]`,
			[]string{"clusterSelectorTerms[0]: labelSelector"}},
		{"bad preference", `
placementType: PickN
numberOfClusters: 1
affinity:
  clusterAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 101
      preference: {propertySorter: {name: n, sortOrder: Sideways}}`,
			[]string{"weight: must be within [-100, 100]", `unknown sort order "Sideways"`}},
		{"bad toleration", `{tolerations: [{operator: Equal, value: x}, {key: k, operator: Maybe}]}`,
			[]string{"an empty key needs operator Exists", `unknown operator "Maybe"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p api.PlacementPolicy
			if err := yaml.UnmarshalStrict([]byte(tc.policy), &p); err != nil {
				t.Fatal(err)
			}
			_, err := CompilePolicy(&p)
			if err == nil {
				t.Fatal("compiled")
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
}

func TestCompilePolicyDefaults(t *testing.T) {
	p, err := CompilePolicy(nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Type != framework.PickAll || len(p.Required) != 0 {
		t.Errorf("nil policy compiled to %+v, want PickAll over everything", p)
	}
	n := policy(t, `
placementType: PickN
numberOfClusters: 2
topologySpreadConstraints: [{topologyKey: region}]
tolerations: [{key: gpu, value: "true"}]`)
	want := framework.SpreadConstraint{MaxSkew: 1, TopologyKey: "region", WhenUnsatisfiable: framework.DoNotSchedule}
	if len(n.Spread) != 1 || n.Spread[0] != want {
		t.Errorf("spread = %+v, want %+v", n.Spread, want)
	}
	f := policy(t, `{placementType: PickFixed, clusterNames: [b, a, b]}`)
	if strings.Join(f.ClusterNames, ",") != "a,b" {
		t.Errorf("cluster names = %v, want a,b", f.ClusterNames)
	}
}

func TestPolicyKey(t *testing.T) {
	key := func(doc string) string {
		t.Helper()
		return policy(t, doc).Key
	}
	base := key(`{placementType: PickN, numberOfClusters: 2, topologySpreadConstraints: [{topologyKey: region}]}`)
	for _, tc := range []struct {
		name, doc string
		same      bool
	}{
		{"numberOfClusters is not part of the key", `{placementType: PickN, numberOfClusters: 5, topologySpreadConstraints: [{topologyKey: region}]}`, true},
		{"spelled-out defaults", `{placementType: PickN, numberOfClusters: 2, topologySpreadConstraints: [{topologyKey: region, maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]}`, true},
		{"another max skew", `{placementType: PickN, numberOfClusters: 2, topologySpreadConstraints: [{topologyKey: region, maxSkew: 2}]}`, false},
		{"no spread", `{placementType: PickN, numberOfClusters: 2}`, false},
	} {
		if got := key(tc.doc) == base; got != tc.same {
			t.Errorf("%s: same key = %v, want %v", tc.name, got, tc.same)
		}
	}
	if key(`{}`) != key(`{placementType: PickAll}`) {
		t.Error("PickAll spelled out changes the key")
	}
	if key(`{placementType: PickFixed, clusterNames: [a, b]}`) != key(`{placementType: PickFixed, clusterNames: [b, a]}`) {
		t.Error("the order of cluster names changes the key")
	}
	if PolicyKey(nil) != key(`{}`) {
		t.Error("a nil policy and an empty one differ")
	}
}

func TestMemberSpecFrom(t *testing.T) {
	var mc api.MemberCluster
	err := yaml.UnmarshalStrict([]byte(`
apiVersion: cluster.kubernetes-fleet.io/v1beta1
kind: MemberCluster
metadata:
  name: kind-cluster-1
  labels: {region: east}
spec:
  heartbeatPeriodSeconds: 30
  taints:
  - {key: test-key1, value: test-value1, effect: NoSchedule}
status:
  properties:
    kubernetes-fleet.io/node-count: {value: "3", observationTime: "2025-01-01T00:00:00Z"}
    resources.kubernetes-fleet.io/allocatable-cpu: {value: "5", observationTime: "2025-01-01T00:00:00Z"}
`), &mc)
	if err != nil {
		t.Fatal(err)
	}
	mc.Status.ResourceUsage.Allocatable = api.ResourceList{"cpu": resource.MustParse("4"), "memory": resource.MustParse("16Gi")}
	mc.Status.ResourceUsage.ObservationTime = metav1.Now()

	spec := MemberSpecFrom(&mc)
	spec.Joined, spec.LastHeartbeat = true, now
	m, err := framework.NewMember(spec)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "kind-cluster-1" || m.Labels["region"] != "east" || m.HeartbeatPeriod != 30*time.Second {
		t.Errorf("member = %+v", m.MemberSpec)
	}
	if len(m.Taints) != 1 || m.Taints[0].String() != "test-key1=test-value1:NoSchedule" {
		t.Errorf("taints = %v", m.Taints)
	}
	for name, want := range map[string]string{
		"kubernetes-fleet.io/node-count":                   "3",
		"resources.kubernetes-fleet.io/allocatable-cpu":    "5", // a reported property wins over resource usage
		"resources.kubernetes-fleet.io/allocatable-memory": "16Gi",
	} {
		p, ok := m.Property(name)
		if !ok || p.Quantity.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("%s = %v %v, want %s", name, p.Quantity.String(), ok, want)
		}
	}
}
