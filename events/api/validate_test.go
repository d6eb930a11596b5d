package api

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// validPlacement is a small valid PickAll placement that the cases change.
func validPlacement() *ClusterResourcePlacement {
	crp := &ClusterResourcePlacement{Spec: PlacementSpec{
		ResourceSelectors: []ClusterResourceSelector{{Group: "", Version: "v1", Kind: "Namespace", Name: "app"}},
	}}
	crp.Name = "crp"
	return crp
}

func pickN(n int32) *PlacementPolicy {
	return &PlacementPolicy{PlacementType: PickNPlacementType, NumberOfClusters: &n}
}

// assertErrors compares "path: detail" strings; a wanted entry ending in "*"
// matches by prefix (for messages apimachinery words).
func assertErrors(t *testing.T, got ErrorList, want []string) {
	t.Helper()
	fields := got.Fields()
	ok := len(fields) == len(want)
	for i := 0; ok && i < len(want); i++ {
		if p, isPrefix := strings.CutSuffix(want[i], "*"); isPrefix {
			ok = strings.HasPrefix(fields[i], p)
		} else {
			ok = fields[i] == want[i]
		}
	}
	if !ok {
		t.Errorf("errors:\n got %q\nwant %q", fields, want)
	}
}

func TestValidatePlacement(t *testing.T) {
	tests := []struct {
		name   string
		change func(*ClusterResourcePlacement)
		want   []string
	}{
		{"valid", func(*ClusterResourcePlacement) {}, nil},

		// metadata
		{"name required", func(c *ClusterResourcePlacement) { c.Name = "" }, []string{"metadata.name: is required"}},
		{"name too long", func(c *ClusterResourcePlacement) { c.Name = strings.Repeat("a", 64) },
			[]string{"metadata.name: must be at most 63 characters, not 64"}},
		{"name not a DNS subdomain", func(c *ClusterResourcePlacement) { c.Name = "Bad_Name" },
			[]string{`metadata.name: "Bad_Name" is not a valid name: a lowercase RFC 1123 subdomain*`}},
		{"cluster-scoped", func(c *ClusterResourcePlacement) { c.Namespace = "default" },
			[]string{"metadata.namespace: must be empty: ClusterResourcePlacement is cluster-scoped"}},

		// resource selectors
		{"no selectors", func(c *ClusterResourcePlacement) { c.Spec.ResourceSelectors = nil },
			[]string{"spec.resourceSelectors: at least one resource selector is required"}},
		{"100 selectors", func(c *ClusterResourcePlacement) {
			c.Spec.ResourceSelectors = make([]ClusterResourceSelector, 100)
			for i := range c.Spec.ResourceSelectors {
				c.Spec.ResourceSelectors[i] = ClusterResourceSelector{Version: "v1", Kind: "Namespace", Name: fmt.Sprint("n", i)}
			}
		}, nil},
		{"101 selectors", func(c *ClusterResourcePlacement) {
			c.Spec.ResourceSelectors = make([]ClusterResourceSelector, 101)
			for i := range c.Spec.ResourceSelectors {
				c.Spec.ResourceSelectors[i] = ClusterResourceSelector{Version: "v1", Kind: "Namespace"}
			}
		}, []string{"spec.resourceSelectors: at most 100 resource selectors are allowed, not 101"}},
		{"version and kind required", func(c *ClusterResourcePlacement) {
			c.Spec.ResourceSelectors[0] = ClusterResourceSelector{Group: "apps"}
		},
			[]string{"spec.resourceSelectors[0].version: is required", "spec.resourceSelectors[0].kind: is required"}},
		{"name and labelSelector", func(c *ClusterResourcePlacement) {
			c.Spec.ResourceSelectors[0].LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		}, []string{"spec.resourceSelectors[0]: set either name or labelSelector, not both"}},
		{"labelSelector alone", func(c *ClusterResourcePlacement) {
			c.Spec.ResourceSelectors[0].Name = ""
			c.Spec.ResourceSelectors[0].LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpExists}}}
		}, nil},
		{"invalid label selector", func(c *ClusterResourcePlacement) {
			c.Spec.ResourceSelectors[0].Name = ""
			c.Spec.ResourceSelectors[0].LabelSelector = &metav1.LabelSelector{
				MatchLabels:      map[string]string{"ok": "bad value!"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Foo"}, {Key: "b", Operator: metav1.LabelSelectorOpIn}},
			}
		}, []string{
			`spec.resourceSelectors[0].labelSelector.matchLabels: "bad value!" is not valid: a valid label must be*`,
			`spec.resourceSelectors[0].labelSelector.matchExpressions[0].operator: "Foo" is not valid: not a valid selector operator`,
			"spec.resourceSelectors[0].labelSelector.matchExpressions[1].values: is required: must be specified when `operator` is 'In' or 'NotIn'",
		}},

		// placement type
		{"unknown placementType", func(c *ClusterResourcePlacement) { c.Spec.Policy = &PlacementPolicy{PlacementType: "PickSome"} },
			[]string{`spec.policy.placementType: "PickSome" is not supported; use PickAll, PickN or PickFixed`}},
		{"empty placementType is PickAll", func(c *ClusterResourcePlacement) { c.Spec.Policy = &PlacementPolicy{} }, nil},

		// clusterNames
		{"PickFixed", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = &PlacementPolicy{PlacementType: PickFixedPlacementType, ClusterNames: []string{"a", "b.example"}}
		}, nil},
		{"PickFixed without names", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = &PlacementPolicy{PlacementType: PickFixedPlacementType}
		},
			[]string{"spec.policy.clusterNames: must name at least one cluster when placementType is PickFixed"}},
		{"PickFixed duplicate and invalid names", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = &PlacementPolicy{PlacementType: PickFixedPlacementType, ClusterNames: []string{"a", "B", "a", ""}}
		}, []string{
			`spec.policy.clusterNames[1]: "B" is not a valid name:*`,
			`spec.policy.clusterNames[2]: "a" is already listed at clusterNames[0]`,
			"spec.policy.clusterNames[3]: is required",
		}},
		{"PickFixed 101 names", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = &PlacementPolicy{PlacementType: PickFixedPlacementType}
			for i := range 101 {
				c.Spec.Policy.ClusterNames = append(c.Spec.Policy.ClusterNames, fmt.Sprint("c", i))
			}
		}, []string{"spec.policy.clusterNames: at most 100 cluster names are allowed, not 101"}},
		{"clusterNames with PickAll", func(c *ClusterResourcePlacement) { c.Spec.Policy = &PlacementPolicy{ClusterNames: []string{"a"}} },
			[]string{"spec.policy.clusterNames: is only allowed when placementType is PickFixed"}},
		{"clusterNames with PickN", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = pickN(1)
			c.Spec.Policy.ClusterNames = []string{"a"}
		},
			[]string{"spec.policy.clusterNames: is only allowed when placementType is PickFixed"}},

		// numberOfClusters
		{"PickN", func(c *ClusterResourcePlacement) { c.Spec.Policy = pickN(3) }, nil},
		{"PickN of 0", func(c *ClusterResourcePlacement) { c.Spec.Policy = pickN(0) }, nil},
		{"PickN without numberOfClusters", func(c *ClusterResourcePlacement) { c.Spec.Policy = &PlacementPolicy{PlacementType: PickNPlacementType} },
			[]string{"spec.policy.numberOfClusters: required when placementType is PickN"}},
		{"negative numberOfClusters", func(c *ClusterResourcePlacement) { c.Spec.Policy = pickN(-1) },
			[]string{"spec.policy.numberOfClusters: must be 0 or more, not -1"}},
		{"numberOfClusters with PickAll", func(c *ClusterResourcePlacement) { c.Spec.Policy = &PlacementPolicy{NumberOfClusters: new(int32(2))} },
			[]string{"spec.policy.numberOfClusters: is only allowed when placementType is PickN"}},
		{"numberOfClusters with PickFixed", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = &PlacementPolicy{PlacementType: PickFixedPlacementType, ClusterNames: []string{"a"}, NumberOfClusters: new(int32(1))}
		}, []string{"spec.policy.numberOfClusters: is only allowed when placementType is PickN"}},

		// affinity
		{"affinity with PickFixed", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = &PlacementPolicy{PlacementType: PickFixedPlacementType, ClusterNames: []string{"a"}, Affinity: &Affinity{}}
		}, []string{"spec.policy.affinity: is not allowed when placementType is PickFixed; the clusters are the ones in clusterNames"}},
		{"valid required and preferred affinity", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = pickN(2)
			c.Spec.Policy.Affinity = &Affinity{ClusterAffinity: &ClusterAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &ClusterSelector{ClusterSelectorTerms: []ClusterSelectorTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
					PropertySelector: &PropertySelector{MatchExpressions: []PropertySelectorRequirement{
						{Name: string(NodeCountProperty), Operator: PropertySelectorGreaterThanOrEqualTo, Values: []string{"3"}},
						{Name: string(AllocatableMemoryProperty), Operator: PropertySelectorLessThan, Values: []string{"64Gi"}},
						{Name: "example.com/cost", Operator: PropertySelectorNotEqualTo, Values: []string{"0.5"}},
					}},
				}}},
				PreferredDuringSchedulingIgnoredDuringExecution: []PreferredClusterSelector{
					{Weight: 100, Preference: ClusterSelectorTerm{LabelSelector: &metav1.LabelSelector{}}},
					{Weight: -100, Preference: ClusterSelectorTerm{PropertySorter: &PropertySorter{Name: string(AvailableCPUProperty), SortOrder: Ascending}}},
				},
			}}
		}, nil},
		{"too many required terms", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = &PlacementPolicy{Affinity: &Affinity{ClusterAffinity: &ClusterAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &ClusterSelector{ClusterSelectorTerms: make([]ClusterSelectorTerm, 11)},
			}}}
		}, []string{"spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms: at most 10 terms are allowed, not 11"}},
		{"property selector rules", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = &PlacementPolicy{Affinity: &Affinity{ClusterAffinity: &ClusterAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &ClusterSelector{ClusterSelectorTerms: []ClusterSelectorTerm{{
					PropertySelector: &PropertySelector{MatchExpressions: []PropertySelectorRequirement{
						{Name: string(NodeCountProperty), Operator: "In", Values: []string{"3"}},
						{Name: string(NodeCountProperty), Operator: PropertySelectorEqualTo},
						{Name: string(NodeCountProperty), Operator: PropertySelectorEqualTo, Values: []string{"1", "2"}},
						{Name: string(NodeCountProperty), Operator: PropertySelectorGreaterThan, Values: []string{"lots"}},
						{Name: "resources.kubernetes-fleet.io/used-cpu", Operator: PropertySelectorGreaterThan, Values: []string{"1"}},
						{Name: "bad name!", Operator: PropertySelectorGreaterThan, Values: []string{"1"}},
						{Operator: PropertySelectorGreaterThan, Values: []string{"1"}},
					}},
					PropertySorter: &PropertySorter{Name: string(NodeCountProperty), SortOrder: Ascending},
				}}},
			}}}
		}, []string{
			`spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySelector.matchExpressions[0].operator: "In" is not supported; use Gt, Ge, Eq, Ne, Lt or Le`,
			"spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySelector.matchExpressions[1].values: must hold exactly one value, not 0",
			"spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySelector.matchExpressions[2].values: must hold exactly one value, not 2",
			`spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySelector.matchExpressions[3].values[0]: "lots" is not a Kubernetes quantity (such as 3, 500m or 16Gi)`,
			`spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySelector.matchExpressions[4].name: "resources.kubernetes-fleet.io/used-cpu" is not a valid resource property; use resources.kubernetes-fleet.io/<total|allocatable|available>-<resource>, e.g. resources.kubernetes-fleet.io/allocatable-cpu`,
			`spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySelector.matchExpressions[5].name: "bad name!" is not a valid property name:*`,
			"spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySelector.matchExpressions[6].name: is required",
			"spec.policy.affinity.clusterAffinity.requiredDuringSchedulingIgnoredDuringExecution.clusterSelectorTerms[0].propertySorter: is only allowed in preferredDuringSchedulingIgnoredDuringExecution terms",
		}},
		{"preferred term rules", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = pickN(1)
			c.Spec.Policy.Affinity = &Affinity{ClusterAffinity: &ClusterAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []PreferredClusterSelector{
				{Weight: 101},
				{Weight: -101},
				{Weight: 1, Preference: ClusterSelectorTerm{PropertySelector: &PropertySelector{}}},
				{Weight: 1, Preference: ClusterSelectorTerm{PropertySorter: &PropertySorter{SortOrder: "Up"}}},
			}}}
		}, []string{
			"spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be between -100 and 100, not 101",
			"spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution[1].weight: must be between -100 and 100, not -101",
			"spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution[2].preference.propertySelector: is only allowed in requiredDuringSchedulingIgnoredDuringExecution terms; use propertySorter to prefer clusters by a property",
			"spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution[3].preference.propertySorter.name: is required",
			`spec.policy.affinity.clusterAffinity.preferredDuringSchedulingIgnoredDuringExecution[3].preference.propertySorter.sortOrder: "Up" is not supported; use Ascending or Descending`,
		}},
		{"preferred affinity with PickAll is accepted and ignored", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = &PlacementPolicy{Affinity: &Affinity{ClusterAffinity: &ClusterAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []PreferredClusterSelector{{Weight: 5}},
			}}}
		}, nil},

		// topology spread
		{"topology spread with PickAll", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = &PlacementPolicy{TopologySpreadConstraints: []TopologySpreadConstraint{{TopologyKey: "zone"}}}
		}, []string{"spec.policy.topologySpreadConstraints: are only allowed when placementType is PickN"}},
		{"topology spread rules", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = pickN(2)
			c.Spec.Policy.TopologySpreadConstraints = []TopologySpreadConstraint{
				{TopologyKey: "zone", MaxSkew: new(int32(1)), WhenUnsatisfiable: ScheduleAnyway},
				{MaxSkew: new(int32(0)), WhenUnsatisfiable: "Maybe"},
				{TopologyKey: "bad key!"},
			}
		}, []string{
			"spec.policy.topologySpreadConstraints[1].maxSkew: must be at least 1, not 0",
			"spec.policy.topologySpreadConstraints[1].topologyKey: is required",
			`spec.policy.topologySpreadConstraints[1].whenUnsatisfiable: "Maybe" is not supported; use DoNotSchedule or ScheduleAnyway`,
			`spec.policy.topologySpreadConstraints[2].topologyKey: "bad key!" is not a valid key:*`,
		}},

		// tolerations
		{"valid tolerations", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = &PlacementPolicy{Tolerations: []Toleration{
				{Key: "gpu", Value: "true", Effect: TaintEffectNoSchedule},
				{Key: "maintenance", Operator: TolerationOpExists},
				{Operator: TolerationOpExists},
			}}
		}, nil},
		{"toleration rules", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = pickN(1)
			c.Spec.Policy.Tolerations = []Toleration{
				{Key: "a", Operator: "Like"},
				{Key: "a", Operator: TolerationOpExists, Value: "x"},
				{Value: "x"},
				{Key: "a", Value: "bad value!"},
				{Key: "a", Effect: "NoExecute"},
				{Key: "bad key!", Operator: TolerationOpExists},
				{Key: "gpu", Operator: TolerationOpEqual},
				{Key: "gpu"},
			}
		}, []string{
			`spec.policy.tolerations[0].operator: "Like" is not supported; use Equal or Exists`,
			"spec.policy.tolerations[1].value: must be empty when operator is Exists",
			"spec.policy.tolerations[2].key: is required when operator is Equal",
			`spec.policy.tolerations[3].value: "bad value!" is not a valid value:*`,
			`spec.policy.tolerations[4].effect: "NoExecute" is not supported; the only effect is NoSchedule (or leave it empty to match any effect)`,
			`spec.policy.tolerations[5].key: "bad key!" is not a valid key:*`,
			"spec.policy.tolerations[7]: repeats tolerations[6]",
		}},
		{"tolerations with PickFixed", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = &PlacementPolicy{PlacementType: PickFixedPlacementType, ClusterNames: []string{"a"}, Tolerations: []Toleration{{Key: "a"}}}
		}, []string{"spec.policy.tolerations: are not allowed when placementType is PickFixed, which places on the named clusters whatever their taints"}},
		{"101 tolerations", func(c *ClusterResourcePlacement) {
			c.Spec.Policy = &PlacementPolicy{}
			for i := range 101 {
				c.Spec.Policy.Tolerations = append(c.Spec.Policy.Tolerations, Toleration{Key: fmt.Sprint("k", i)})
			}
		}, []string{"spec.policy.tolerations: at most 100 tolerations are allowed, not 101"}},

		// rollout strategy
		{"unknown strategy type", func(c *ClusterResourcePlacement) { c.Spec.Strategy.Type = "BlueGreen" },
			[]string{`spec.strategy.type: "BlueGreen" is not supported; use RollingUpdate or External`}},
		{"rollingUpdate with External", func(c *ClusterResourcePlacement) {
			c.Spec.Strategy = RolloutStrategy{Type: ExternalRolloutStrategyType, RollingUpdate: &RollingUpdateConfig{}}
		}, []string{"spec.strategy.rollingUpdate: is not allowed when the strategy type is External"}},
		{"valid rolling update values", func(c *ClusterResourcePlacement) {
			c.Spec.Strategy.RollingUpdate = &RollingUpdateConfig{MaxUnavailable: new(intstr.FromInt32(0)), MaxSurge: new(intstr.FromString("5")), UnavailablePeriodSeconds: new(0)}
		}, nil},
		{"percentages at the bounds", func(c *ClusterResourcePlacement) {
			c.Spec.Strategy.RollingUpdate = &RollingUpdateConfig{MaxUnavailable: new(intstr.FromString("0%")), MaxSurge: new(intstr.FromString("100%"))}
		}, nil},
		{"rolling update rules", func(c *ClusterResourcePlacement) {
			c.Spec.Strategy.RollingUpdate = &RollingUpdateConfig{MaxUnavailable: new(intstr.FromInt32(-1)), MaxSurge: new(intstr.FromString("150%")), UnavailablePeriodSeconds: new(-5)}
		}, []string{
			"spec.strategy.rollingUpdate.maxUnavailable: must be 0 or more, not -1",
			`spec.strategy.rollingUpdate.maxSurge: "150%" must be a whole number of clusters (0 or more) or a percentage from 0% to 100%`,
			"spec.strategy.rollingUpdate.unavailablePeriodSeconds: must be 0 or more, not -5",
		}},
		{"not a number", func(c *ClusterResourcePlacement) {
			c.Spec.Strategy.RollingUpdate = &RollingUpdateConfig{MaxUnavailable: new(intstr.FromString("half"))}
		}, []string{`spec.strategy.rollingUpdate.maxUnavailable: "half" must be a whole number of clusters (0 or more) or a percentage from 0% to 100%`}},
		{"both zero", func(c *ClusterResourcePlacement) {
			c.Spec.Strategy.RollingUpdate = &RollingUpdateConfig{MaxUnavailable: new(intstr.FromString("0%")), MaxSurge: new(intstr.FromInt32(0))}
		}, []string{"spec.strategy.rollingUpdate: maxUnavailable and maxSurge cannot both be 0, or the rollout could never make progress"}},
		{"apply strategy enums", func(c *ClusterResourcePlacement) {
			c.Spec.Strategy.ApplyStrategy = &ApplyStrategy{Type: "Kustomize", ComparisonOption: "Some", WhenToApply: "Sometimes", WhenToTakeOver: "Maybe"}
		}, []string{
			`spec.strategy.applyStrategy.type: "Kustomize" is not supported; use ClientSideApply, ServerSideApply or ReportDiff`,
			`spec.strategy.applyStrategy.comparisonOption: "Some" is not supported; use PartialComparison or FullComparison`,
			`spec.strategy.applyStrategy.whenToApply: "Sometimes" is not supported; use Always or IfNotDrifted`,
			`spec.strategy.applyStrategy.whenToTakeOver: "Maybe" is not supported; use Always, IfNoDiff or Never`,
		}},
		{"serverSideApplyConfig without ServerSideApply", func(c *ClusterResourcePlacement) {
			c.Spec.Strategy.ApplyStrategy = &ApplyStrategy{ServerSideApplyConfig: &ServerSideApplyConfig{ForceConflicts: true}}
		}, []string{"spec.strategy.applyStrategy.serverSideApplyConfig: is only allowed when type is ServerSideApply"}},
		{"serverSideApplyConfig with ServerSideApply", func(c *ClusterResourcePlacement) {
			c.Spec.Strategy.ApplyStrategy = &ApplyStrategy{Type: ApplyStrategyTypeServerSideApply, ServerSideApplyConfig: &ServerSideApplyConfig{ForceConflicts: true}}
		}, nil},
		{"delete strategy", func(c *ClusterResourcePlacement) {
			c.Spec.Strategy.DeleteStrategy = &DeleteStrategy{PropagationPolicy: "Orphan"}
		}, []string{`spec.strategy.deleteStrategy.propagationPolicy: "Orphan" is not supported; use Delete or Abandon`}},

		// revision history
		{"revisionHistoryLimit bounds", func(c *ClusterResourcePlacement) { c.Spec.RevisionHistoryLimit = new(int32(1000)) }, nil},
		{"revisionHistoryLimit 0", func(c *ClusterResourcePlacement) { c.Spec.RevisionHistoryLimit = new(int32(0)) },
			[]string{"spec.revisionHistoryLimit: must be between 1 and 1000, not 0"}},
		{"revisionHistoryLimit 1001", func(c *ClusterResourcePlacement) { c.Spec.RevisionHistoryLimit = new(int32(1001)) },
			[]string{"spec.revisionHistoryLimit: must be between 1 and 1000, not 1001"}},

		// every problem at once
		{"many problems", func(c *ClusterResourcePlacement) {
			c.Name = ""
			c.Spec.ResourceSelectors = nil
			c.Spec.Policy = &PlacementPolicy{PlacementType: PickNPlacementType, ClusterNames: []string{"a"}}
			c.Spec.RevisionHistoryLimit = new(int32(0))
		}, []string{
			"metadata.name: is required",
			"spec.resourceSelectors: at least one resource selector is required",
			"spec.policy.clusterNames: is only allowed when placementType is PickFixed",
			"spec.policy.numberOfClusters: required when placementType is PickN",
			"spec.revisionHistoryLimit: must be between 1 and 1000, not 0",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crp := validPlacement()
			tt.change(crp)
			assertErrors(t, ValidatePlacement(crp), tt.want)
			// The same after defaulting: defaults never make a placement invalid
			// or hide a problem.
			SetDefaults(crp)
			assertErrors(t, Validate(crp), tt.want)
		})
	}
}

func TestValidatePlaceholders(t *testing.T) {
	crp := validPlacement()
	crp.Spec.ResourceSelectors = nil
	crp.Spec.Policy = &PlacementPolicy{PlacementType: PickNPlacementType}
	crp.Placeholders = []string{"spec.resourceSelectors[0]", "spec.policy"}
	// The empty list and the policy's missing numberOfClusters are the
	// placeholders' doing; only the placeholders are reported.
	assertErrors(t, Validate(crp), []string{
		`spec.resourceSelectors[0]: "..." is a placeholder copied from documentation, not a value; replace it with the real content`,
		`spec.policy: "..." is a placeholder copied from documentation, not a value; replace it with the real content`,
	})
	if errs := Validate(crp); errs[0].Type != ErrorTypePlaceholder {
		t.Errorf("type = %s, want Placeholder", errs[0].Type)
	}
}

func TestValidatePlacementUpdate(t *testing.T) {
	withPolicy := func(p *PlacementPolicy) *ClusterResourcePlacement {
		c := validPlacement()
		c.Spec.Policy = p
		return c
	}
	tests := []struct {
		name     string
		old, new *ClusterResourcePlacement
		want     []string
	}{
		{"no policy to explicit PickAll", withPolicy(nil), withPolicy(&PlacementPolicy{PlacementType: PickAllPlacementType}), nil},
		{"numberOfClusters changes", withPolicy(pickN(1)), withPolicy(pickN(5)), nil},
		{"PickAll to PickN", withPolicy(nil), withPolicy(pickN(2)),
			[]string{"spec.policy.placementType: cannot change from PickAll to PickN; delete the placement and create it again to change its type"}},
		{"PickN to no policy", withPolicy(pickN(2)), withPolicy(nil),
			[]string{"spec.policy.placementType: cannot change from PickN to PickAll; delete the placement and create it again to change its type"}},
		{"tolerations added", withPolicy(&PlacementPolicy{Tolerations: []Toleration{{Key: "a"}}}),
			withPolicy(&PlacementPolicy{Tolerations: []Toleration{{Key: "a", Operator: TolerationOpEqual}, {Key: "b"}}}), nil},
		{"toleration removed", withPolicy(&PlacementPolicy{Tolerations: []Toleration{{Key: "a"}, {Key: "b", Operator: TolerationOpExists}}}),
			withPolicy(&PlacementPolicy{Tolerations: []Toleration{{Key: "a"}}}),
			[]string{`spec.policy.tolerations: tolerations can be added but not changed or removed; the former tolerations[1] {key: "b", operator: Exists} is missing`}},
		{"toleration changed", withPolicy(&PlacementPolicy{Tolerations: []Toleration{{Key: "a", Value: "1", Effect: TaintEffectNoSchedule}}}),
			withPolicy(&PlacementPolicy{Tolerations: []Toleration{{Key: "a", Value: "2"}}}),
			[]string{`spec.policy.tolerations: tolerations can be added but not changed or removed; the former tolerations[0] {key: "a", operator: Equal, value: "1", effect: NoSchedule} is missing`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertErrors(t, ValidatePlacementUpdate(tt.old, tt.new), tt.want)
			assertErrors(t, ValidateUpdate(tt.old, tt.new), tt.want) // both objects are valid on their own
		})
	}
}

func TestValidateUpdateKindChange(t *testing.T) {
	old := validPlacement()
	old.Kind = ClusterResourcePlacementKind
	m := validMember()
	m.Kind = MemberClusterKind
	assertErrors(t, ValidateUpdate(old, m), []string{"kind: cannot change from ClusterResourcePlacement to MemberCluster"})
}

func validMember() *MemberCluster {
	m := &MemberCluster{}
	m.Name = "member-1"
	return m
}

func TestValidateMemberCluster(t *testing.T) {
	tests := []struct {
		name   string
		change func(*MemberCluster)
		want   []string
	}{
		{"valid", func(*MemberCluster) {}, nil},
		{"valid heartbeat and taints", func(m *MemberCluster) {
			m.Spec.HeartbeatPeriodSeconds = 600
			m.Spec.Taints = []Taint{{Key: "maintenance", Effect: TaintEffectNoSchedule}, {Key: "gpu", Value: "a100", Effect: TaintEffectNoSchedule}}
		}, nil},
		{"name and scope", func(m *MemberCluster) { m.Name = ""; m.Namespace = "x" },
			[]string{"metadata.name: is required", "metadata.namespace: must be empty: MemberCluster is cluster-scoped"}},
		{"heartbeat too long", func(m *MemberCluster) { m.Spec.HeartbeatPeriodSeconds = 601 },
			[]string{"spec.heartbeatPeriodSeconds: must be between 1 and 600 seconds, not 601"}},
		{"negative heartbeat", func(m *MemberCluster) { m.Spec.HeartbeatPeriodSeconds = -1 },
			[]string{"spec.heartbeatPeriodSeconds: must be between 1 and 600 seconds, not -1"}},
		{"taint rules", func(m *MemberCluster) {
			m.Spec.Taints = []Taint{
				{Effect: TaintEffectNoSchedule},
				{Key: "a"},
				{Key: "a", Effect: "NoExecute"},
				{Key: "bad key!", Value: "bad value!", Effect: TaintEffectNoSchedule},
				{Key: "d", Effect: TaintEffectNoSchedule},
				{Key: "d", Effect: TaintEffectNoSchedule},
			}
		}, []string{
			"spec.taints[0].key: is required",
			"spec.taints[1].effect: is required; the only effect is NoSchedule",
			`spec.taints[2].effect: "NoExecute" is not supported; the only effect is NoSchedule`,
			`spec.taints[3].key: "bad key!" is not a valid key:*`,
			`spec.taints[3].value: "bad value!" is not a valid value:*`,
			"spec.taints[5]: repeats taints[4]",
		}},
		{"101 taints", func(m *MemberCluster) {
			for i := range 101 {
				m.Spec.Taints = append(m.Spec.Taints, Taint{Key: fmt.Sprint("k", i), Effect: TaintEffectNoSchedule})
			}
		}, []string{"spec.taints: at most 100 taints are allowed, not 101"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validMember()
			tt.change(m)
			assertErrors(t, Validate(m), tt.want)
		})
	}
}

func TestValidatePropagationPolicy(t *testing.T) {
	valid := func() PropagationPolicySpec {
		return PropagationPolicySpec{SchedulingMode: SchedulingModeDuplicate, Placements: []DesiredPlacement{{Cluster: "member-1"}}}
	}
	tests := []struct {
		name   string
		change func(*PropagationPolicySpec)
		want   []string
	}{
		{"valid", func(*PropagationPolicySpec) {}, nil},
		{"valid divide with preferences and selectors", func(s *PropagationPolicySpec) {
			s.SchedulingMode = SchedulingModeDivide
			s.Placements = []DesiredPlacement{{Cluster: "a", Preferences: Preferences{MinReplicas: 1, MaxReplicas: new(int64(3)), Weight: new(int64(2))}}}
			s.ClusterSelector = map[string]string{"region": "east"}
			s.ClusterAffinity = []PropagationClusterSelectorTerm{{MatchExpressions: []PropagationClusterSelectorRequirement{
				{Key: "zone", Operator: PropagationClusterSelectorOpIn, Values: []string{"a"}},
				{Key: "gpu", Operator: PropagationClusterSelectorOpExists},
				{Key: "cpus", Operator: PropagationClusterSelectorOpGt, Values: []string{"8"}},
			}}}
			s.MaxClusters = new(int64(0))
		}, nil},
		{"schedulingMode required", func(s *PropagationPolicySpec) { s.SchedulingMode = "" },
			[]string{"spec.schedulingMode: is required: use Duplicate or Divide"}},
		{"schedulingMode unknown", func(s *PropagationPolicySpec) { s.SchedulingMode = "Spread" },
			[]string{`spec.schedulingMode: "Spread" is not supported; use Duplicate or Divide`}},
		{"placement rules", func(s *PropagationPolicySpec) {
			s.Placements = []DesiredPlacement{
				{Cluster: "a", Preferences: Preferences{MinReplicas: -1}},
				{Cluster: "a"},
				{Cluster: "b", Preferences: Preferences{MinReplicas: 3, MaxReplicas: new(int64(2)), Weight: new(int64(-1))}},
				{},
			}
			s.MaxClusters = new(int64(-1))
		}, []string{
			"spec.maxClusters: must be 0 or more, not -1",
			"spec.placement[0].preferences.minReplicas: must be 0 or more, not -1",
			`spec.placement[1].cluster: "a" is already listed at placement[0]`,
			"spec.placement[2].preferences.maxReplicas: must be at least minReplicas (3), not 2",
			"spec.placement[2].preferences.weight: must be 0 or more, not -1",
			"spec.placement[3].cluster: is required",
		}},
		{"affinity and toleration rules", func(s *PropagationPolicySpec) {
			s.ClusterSelector = map[string]string{"bad key!": "v"}
			s.ClusterAffinity = []PropagationClusterSelectorTerm{{MatchFields: []PropagationClusterSelectorRequirement{
				{Key: "a", Operator: PropagationClusterSelectorOpIn},
				{Key: "b", Operator: PropagationClusterSelectorOpDoesNotExist, Values: []string{"x"}},
				{Key: "c", Operator: PropagationClusterSelectorOpLt, Values: []string{"many"}},
				{Operator: "Near", Values: []string{"x"}},
			}}}
			s.Tolerations = []PropagationToleration{{Operator: TolerationOpEqual}, {Key: "k", Operator: TolerationOpExists, Value: "v"}}
		}, []string{
			`spec.clusterSelector[bad key!]: "bad key!" is not a valid key:*`,
			"spec.clusterAffinity[0].matchFields[0].values: must hold at least one value when operator is In",
			"spec.clusterAffinity[0].matchFields[1].values: must be empty when operator is DoesNotExist",
			`spec.clusterAffinity[0].matchFields[2].values[0]: "many" is not an integer`,
			"spec.clusterAffinity[0].matchFields[3].key: is required",
			`spec.clusterAffinity[0].matchFields[3].operator: "Near" is not supported; use In, NotIn, Exists, DoesNotExist, Gt or Lt`,
			"spec.tolerations[0].key: is required when operator is Equal",
			"spec.tolerations[1].value: must be empty when operator is Exists",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pp := &PropagationPolicy{Spec: valid()}
			pp.Name, pp.Namespace = "pp", "default"
			tt.change(&pp.Spec)
			assertErrors(t, Validate(pp), tt.want)
		})
	}
	cpp := &ClusterPropagationPolicy{Spec: valid()}
	cpp.Name, cpp.Namespace = "cpp", "default"
	assertErrors(t, Validate(cpp), []string{"metadata.namespace: must be empty: ClusterPropagationPolicy is cluster-scoped"})
}

func TestValidateUnknownObjects(t *testing.T) {
	assertErrors(t, Validate(nil), []string{": no object to validate"})
	assertErrors(t, Validate(&metav1.PartialObjectMetadata{}), []string{": cannot validate an object of type *v1.PartialObjectMetadata"})
}

func TestValidateSpecUpdateIsValidatePlacementUpdate(t *testing.T) {
	old, new := validPlacement(), validPlacement()
	old.Spec.Policy = &PlacementPolicy{Tolerations: []Toleration{{Key: "a"}}}
	new.Spec.Policy = pickN(2)
	want := []string{
		"spec.policy.placementType: cannot change from PickAll to PickN; delete the placement and create it again to change its type",
		`spec.policy.tolerations: tolerations can be added but not changed or removed; the former tolerations[0] {key: "a", operator: Equal} is missing`,
	}
	assertErrors(t, ValidateSpecUpdate(&old.Spec, &new.Spec), want)
	assertErrors(t, ValidateSpecUpdate(&old.Spec, &old.Spec), nil)
}
