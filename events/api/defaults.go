package api

import (
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Default fills in the defaults of any typed object; other objects are left alone.
func Default(obj Object) {
	switch o := obj.(type) {
	case *ClusterResourcePlacement:
		SetDefaults(o)
	case *MemberCluster:
		SetMemberClusterDefaults(o)
	case *ClusterResourceOverride:
		SetOverrideDefaults(o.Spec.Placement, o.Spec.Policy)
	case *ResourceOverride:
		SetOverrideDefaults(o.Spec.Placement, o.Spec.Policy)
	case *ClusterStagedUpdateStrategy:
		SetStrategyDefaults(&o.Spec)
	case *ClusterStagedUpdateRun:
		if o.Spec.State == "" {
			o.Spec.State = UpdateRunStateInitialize
		}
	}
}

// SetStrategyDefaults fills in a staged update strategy's defaults:
// maxConcurrency 1.
func SetStrategyDefaults(s *UpdateStrategySpec) {
	for i := range s.Stages {
		if s.Stages[i].MaxConcurrency == nil {
			one := intstr.FromInt32(1)
			s.Stages[i].MaxConcurrency = &one
		}
	}
}

// SetOverrideDefaults fills in the defaults of an override's placement
// reference (scope Cluster) and rules (overrideType JSONPatch).
func SetOverrideDefaults(ref *PlacementRef, policy *OverridePolicy) {
	if ref != nil && ref.Scope == "" {
		ref.Scope = ClusterScoped
	}
	if policy == nil {
		return
	}
	for i := range policy.OverrideRules {
		if policy.OverrideRules[i].OverrideType == "" {
			policy.OverrideRules[i].OverrideType = JSONPatchOverrideType
		}
	}
}

// SetDefaults fills in the documented defaults of a ClusterResourcePlacement:
// placementType PickAll, toleration operator Equal, topology spread maxSkew 1
// and DoNotSchedule, strategy RollingUpdate with maxUnavailable and maxSurge 25%
// and unavailablePeriodSeconds 60, apply strategy ClientSideApply,
// PartialComparison, whenToApply Always and whenToTakeOver Always, delete
// strategy Delete, and revisionHistoryLimit 10. Values already set are kept.
func SetDefaults(p *ClusterResourcePlacement) {
	spec := &p.Spec
	if spec.Policy == nil {
		spec.Policy = &PlacementPolicy{}
	}
	policy := spec.Policy
	if policy.PlacementType == "" {
		policy.PlacementType = PickAllPlacementType
	}
	for i := range policy.Tolerations {
		if policy.Tolerations[i].Operator == "" {
			policy.Tolerations[i].Operator = TolerationOpEqual
		}
	}
	for i := range policy.TopologySpreadConstraints {
		c := &policy.TopologySpreadConstraints[i]
		if c.MaxSkew == nil {
			c.MaxSkew = new(int32(1))
		}
		if c.WhenUnsatisfiable == "" {
			c.WhenUnsatisfiable = DoNotSchedule
		}
	}

	strategy := &spec.Strategy
	if strategy.Type == "" {
		strategy.Type = RollingUpdateRolloutStrategyType
	}
	if strategy.Type == RollingUpdateRolloutStrategyType {
		if strategy.RollingUpdate == nil {
			strategy.RollingUpdate = &RollingUpdateConfig{}
		}
		ru := strategy.RollingUpdate
		if ru.MaxUnavailable == nil {
			ru.MaxUnavailable = new(intstr.FromString(DefaultMaxUnavailable))
		}
		if ru.MaxSurge == nil {
			ru.MaxSurge = new(intstr.FromString(DefaultMaxSurge))
		}
		if ru.UnavailablePeriodSeconds == nil {
			ru.UnavailablePeriodSeconds = new(DefaultUnavailablePeriodSeconds)
		}
	}
	if strategy.ApplyStrategy == nil {
		strategy.ApplyStrategy = &ApplyStrategy{}
	}
	as := strategy.ApplyStrategy
	if as.Type == "" {
		as.Type = ApplyStrategyTypeClientSideApply
	}
	if as.ComparisonOption == "" {
		as.ComparisonOption = ComparisonOptionTypePartialComparison
	}
	if as.WhenToApply == "" {
		as.WhenToApply = WhenToApplyTypeAlways
	}
	if as.WhenToTakeOver == "" {
		as.WhenToTakeOver = WhenToTakeOverTypeAlways
	}
	if as.Type == ApplyStrategyTypeServerSideApply && as.ServerSideApplyConfig == nil {
		as.ServerSideApplyConfig = &ServerSideApplyConfig{}
	}
	if strategy.DeleteStrategy == nil {
		strategy.DeleteStrategy = &DeleteStrategy{}
	}
	if strategy.DeleteStrategy.PropagationPolicy == "" {
		strategy.DeleteStrategy.PropagationPolicy = DeletePropagationPolicyDelete
	}

	if spec.RevisionHistoryLimit == nil {
		spec.RevisionHistoryLimit = new(DefaultRevisionHistoryLimit)
	}
}

// SetMemberClusterDefaults sets heartbeatPeriodSeconds to 60 when unset.
func SetMemberClusterDefaults(m *MemberCluster) {
	if m.Spec.HeartbeatPeriodSeconds == 0 {
		m.Spec.HeartbeatPeriodSeconds = DefaultHeartbeatPeriodSeconds
	}
}
