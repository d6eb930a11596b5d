package api

import (
	"reflect"
	"strings"
)

// enumValues lists the allowed values of every enum type, in canonical spelling.
// Decode reads them case-insensitively (users copy "partialComparison" from
// documentation) and writes the canonical form; Validate rejects anything else.
var enumValues = map[reflect.Type][]string{
	reflect.TypeFor[PlacementType](): {string(PickAllPlacementType), string(PickNPlacementType), string(PickFixedPlacementType)},
	reflect.TypeFor[PropertySelectorOperator](): {
		string(PropertySelectorGreaterThan), string(PropertySelectorGreaterThanOrEqualTo), string(PropertySelectorEqualTo),
		string(PropertySelectorNotEqualTo), string(PropertySelectorLessThan), string(PropertySelectorLessThanOrEqualTo),
	},
	reflect.TypeFor[PropertySortOrder]():             {string(Ascending), string(Descending)},
	reflect.TypeFor[UnsatisfiableConstraintAction](): {string(DoNotSchedule), string(ScheduleAnyway)},
	reflect.TypeFor[TolerationOperator]():            {string(TolerationOpEqual), string(TolerationOpExists)},
	reflect.TypeFor[TaintEffect]():                   {string(TaintEffectNoSchedule)},
	reflect.TypeFor[RolloutStrategyType]():           {string(RollingUpdateRolloutStrategyType), string(ExternalRolloutStrategyType)},
	reflect.TypeFor[ComparisonOptionType]():          {string(ComparisonOptionTypePartialComparison), string(ComparisonOptionTypeFullComparison)},
	reflect.TypeFor[WhenToApplyType]():               {string(WhenToApplyTypeAlways), string(WhenToApplyTypeIfNotDrifted)},
	reflect.TypeFor[ApplyStrategyType](): {
		string(ApplyStrategyTypeClientSideApply), string(ApplyStrategyTypeServerSideApply), string(ApplyStrategyTypeReportDiff),
	},
	reflect.TypeFor[WhenToTakeOverType](): {
		string(WhenToTakeOverTypeAlways), string(WhenToTakeOverTypeIfNoDiff), string(WhenToTakeOverTypeNever),
	},
	reflect.TypeFor[DeletePropagationPolicy](): {string(DeletePropagationPolicyDelete), string(DeletePropagationPolicyAbandon)},
	reflect.TypeFor[EnvelopeType](): {
		string(ConfigMapEnvelopeType), string(ClusterResourceEnvelopeType), string(ResourceEnvelopeType),
	},
	reflect.TypeFor[SchedulingMode](): {string(SchedulingModeDuplicate), string(SchedulingModeDivide)},
	reflect.TypeFor[OverrideType]():   {string(JSONPatchOverrideType), string(DeleteOverrideType)},
	reflect.TypeFor[ResourceScope]():  {string(ClusterScoped), string(NamespaceScoped)},
	reflect.TypeFor[StageTaskType]():  {string(StageTaskTypeTimedWait), string(StageTaskTypeApproval)},
	reflect.TypeFor[UpdateRunState](): {string(UpdateRunStateInitialize), string(UpdateRunStateRun), string(UpdateRunStateStop)},
	reflect.TypeFor[SelectionScope](): {string(NamespaceOnly), string(NamespaceWithResources), string(NamespaceWithResourceSelectors)},
	reflect.TypeFor[JSONPatchOverrideOperator](): {
		string(JSONPatchOverrideOpAdd), string(JSONPatchOverrideOpRemove), string(JSONPatchOverrideOpReplace),
	},
	reflect.TypeFor[PropagationClusterSelectorOperator](): {
		string(PropagationClusterSelectorOpIn), string(PropagationClusterSelectorOpNotIn), string(PropagationClusterSelectorOpExists),
		string(PropagationClusterSelectorOpDoesNotExist), string(PropagationClusterSelectorOpGt), string(PropagationClusterSelectorOpLt),
	},
}

// canonicalEnum returns the canonical spelling of v for enum type t.
func canonicalEnum(t reflect.Type, v string) (string, bool) {
	for _, c := range enumValues[t] {
		if strings.EqualFold(c, v) {
			return c, true
		}
	}
	return "", false
}

// isEnumValue reports whether v is a canonical value of the enum type of v.
func isEnumValue[T ~string](v T) bool {
	for _, c := range enumValues[reflect.TypeFor[T]()] {
		if c == string(v) {
			return true
		}
	}
	return false
}

// enumList renders the allowed values of T for messages: "PickAll, PickN or PickFixed".
func enumList[T ~string]() string {
	vals := enumValues[reflect.TypeFor[T]()]
	switch len(vals) {
	case 0:
		return ""
	case 1:
		return vals[0]
	}
	return strings.Join(vals[:len(vals)-1], ", ") + " or " + vals[len(vals)-1]
}
