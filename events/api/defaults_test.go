package api

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestSetDefaultsFillsEveryDefault(t *testing.T) {
	crp := &ClusterResourcePlacement{Spec: PlacementSpec{
		ResourceSelectors: []ClusterResourceSelector{{Version: "v1", Kind: "Namespace", Name: "a"}},
	}}
	crp.Name = "crp"
	SetDefaults(crp)
	s := crp.Spec
	checks := []struct {
		name      string
		got, want any
	}{
		{"policy.placementType", s.Policy.PlacementType, PickAllPlacementType},
		{"strategy.type", s.Strategy.Type, RollingUpdateRolloutStrategyType},
		{"rollingUpdate.maxUnavailable", *s.Strategy.RollingUpdate.MaxUnavailable, intstr.FromString("25%")},
		{"rollingUpdate.maxSurge", *s.Strategy.RollingUpdate.MaxSurge, intstr.FromString("25%")},
		{"rollingUpdate.unavailablePeriodSeconds", *s.Strategy.RollingUpdate.UnavailablePeriodSeconds, 60},
		{"applyStrategy.type", s.Strategy.ApplyStrategy.Type, ApplyStrategyTypeClientSideApply},
		{"applyStrategy.comparisonOption", s.Strategy.ApplyStrategy.ComparisonOption, ComparisonOptionTypePartialComparison},
		{"applyStrategy.whenToApply", s.Strategy.ApplyStrategy.WhenToApply, WhenToApplyTypeAlways},
		{"applyStrategy.whenToTakeOver", s.Strategy.ApplyStrategy.WhenToTakeOver, WhenToTakeOverTypeAlways},
		{"applyStrategy.allowCoOwnership", s.Strategy.ApplyStrategy.AllowCoOwnership, false},
		{"applyStrategy.serverSideApplyConfig", s.Strategy.ApplyStrategy.ServerSideApplyConfig == nil, true},
		{"deleteStrategy.propagationPolicy", s.Strategy.DeleteStrategy.PropagationPolicy, DeletePropagationPolicyDelete},
		{"revisionHistoryLimit", *s.RevisionHistoryLimit, int32(10)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if errs := Validate(crp); len(errs) > 0 {
		t.Errorf("a defaulted placement is invalid: %v", errs)
	}
}

func TestSetDefaultsPerEntry(t *testing.T) {
	crp := &ClusterResourcePlacement{Spec: PlacementSpec{
		Policy: &PlacementPolicy{
			PlacementType:             PickNPlacementType,
			Tolerations:               []Toleration{{Key: "a", Value: "b"}, {Key: "c", Operator: TolerationOpExists}},
			TopologySpreadConstraints: []TopologySpreadConstraint{{TopologyKey: "zone"}, {TopologyKey: "ring", MaxSkew: new(int32(3)), WhenUnsatisfiable: ScheduleAnyway}},
		},
		Strategy: RolloutStrategy{ApplyStrategy: &ApplyStrategy{Type: ApplyStrategyTypeServerSideApply}},
	}}
	SetDefaults(crp)
	p := crp.Spec.Policy
	if p.PlacementType != PickNPlacementType {
		t.Errorf("placementType changed to %s", p.PlacementType)
	}
	if p.Tolerations[0].Operator != TolerationOpEqual || p.Tolerations[1].Operator != TolerationOpExists {
		t.Errorf("toleration operators = %s, %s; want Equal (default) and Exists (kept)", p.Tolerations[0].Operator, p.Tolerations[1].Operator)
	}
	c0, c1 := p.TopologySpreadConstraints[0], p.TopologySpreadConstraints[1]
	if *c0.MaxSkew != 1 || c0.WhenUnsatisfiable != DoNotSchedule {
		t.Errorf("defaulted constraint = maxSkew %d, %s; want 1, DoNotSchedule", *c0.MaxSkew, c0.WhenUnsatisfiable)
	}
	if *c1.MaxSkew != 3 || c1.WhenUnsatisfiable != ScheduleAnyway {
		t.Errorf("given constraint changed to maxSkew %d, %s", *c1.MaxSkew, c1.WhenUnsatisfiable)
	}
	if ssa := crp.Spec.Strategy.ApplyStrategy.ServerSideApplyConfig; ssa == nil || ssa.ForceConflicts {
		t.Errorf("serverSideApplyConfig = %+v, want force false for ServerSideApply", ssa)
	}
}

func TestSetDefaultsKeepsGivenValues(t *testing.T) {
	crp := &ClusterResourcePlacement{Spec: PlacementSpec{
		Policy: &PlacementPolicy{PlacementType: PickFixedPlacementType, ClusterNames: []string{"a"}},
		Strategy: RolloutStrategy{
			Type:          RollingUpdateRolloutStrategyType,
			RollingUpdate: &RollingUpdateConfig{MaxUnavailable: new(intstr.FromInt32(0)), MaxSurge: new(intstr.FromString("100%")), UnavailablePeriodSeconds: new(1)},
			ApplyStrategy: &ApplyStrategy{Type: ApplyStrategyTypeReportDiff, ComparisonOption: ComparisonOptionTypeFullComparison,
				WhenToApply: WhenToApplyTypeIfNotDrifted, WhenToTakeOver: WhenToTakeOverTypeNever, AllowCoOwnership: true},
			DeleteStrategy: &DeleteStrategy{PropagationPolicy: DeletePropagationPolicyAbandon},
		},
		RevisionHistoryLimit: new(int32(3)),
	}}
	SetDefaults(crp)
	s := crp.Spec
	ru, as := s.Strategy.RollingUpdate, s.Strategy.ApplyStrategy
	if ru.MaxUnavailable.IntValue() != 0 || ru.MaxSurge.StrVal != "100%" || *ru.UnavailablePeriodSeconds != 1 {
		t.Errorf("rollingUpdate changed: %v %v %v", ru.MaxUnavailable, ru.MaxSurge, *ru.UnavailablePeriodSeconds)
	}
	if as.Type != ApplyStrategyTypeReportDiff || as.ComparisonOption != ComparisonOptionTypeFullComparison ||
		as.WhenToApply != WhenToApplyTypeIfNotDrifted || as.WhenToTakeOver != WhenToTakeOverTypeNever || !as.AllowCoOwnership {
		t.Errorf("applyStrategy changed: %+v", as)
	}
	if s.Strategy.DeleteStrategy.PropagationPolicy != DeletePropagationPolicyAbandon || *s.RevisionHistoryLimit != 3 {
		t.Errorf("deleteStrategy or revisionHistoryLimit changed")
	}
}

func TestSetDefaultsExternalRolloutHasNoRollingUpdate(t *testing.T) {
	crp := &ClusterResourcePlacement{Spec: PlacementSpec{Strategy: RolloutStrategy{Type: ExternalRolloutStrategyType}}}
	SetDefaults(crp)
	if crp.Spec.Strategy.RollingUpdate != nil {
		t.Errorf("rollingUpdate = %+v, want none for External", crp.Spec.Strategy.RollingUpdate)
	}
}

func TestMemberClusterDefaults(t *testing.T) {
	m := &MemberCluster{}
	Default(m)
	if m.Spec.HeartbeatPeriodSeconds != 60 {
		t.Errorf("heartbeatPeriodSeconds = %d, want 60", m.Spec.HeartbeatPeriodSeconds)
	}
	m.Spec.HeartbeatPeriodSeconds = 15
	SetMemberClusterDefaults(m)
	if m.Spec.HeartbeatPeriodSeconds != 15 {
		t.Errorf("heartbeatPeriodSeconds = %d, want the given 15", m.Spec.HeartbeatPeriodSeconds)
	}
}

func TestEffectivePlacementType(t *testing.T) {
	var s PlacementSpec
	if s.EffectivePlacementType() != PickAllPlacementType || s.Tolerations() != nil {
		t.Error("no policy should mean PickAll without tolerations")
	}
	s.Policy = &PlacementPolicy{PlacementType: PickNPlacementType, Tolerations: []Toleration{{Key: "a"}}}
	if s.EffectivePlacementType() != PickNPlacementType || len(s.Tolerations()) != 1 {
		t.Error("policy values not returned")
	}
}
