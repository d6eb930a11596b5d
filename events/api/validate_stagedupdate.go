package api

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds of a staged update strategy (upstream's CRD).
const (
	MaxStages           = 31
	maxAfterStageTasks  = 2
	maxBeforeStageTasks = 1
	maxStageNameLength  = 63
	maxRunNameLength    = 63
	maxPlacementNameRef = 255
)

var (
	stageNamePattern = regexp.MustCompile(`^[a-z0-9]+$`)
	// waitTimePattern is upstream's: hours, minutes and seconds only.
	waitTimePattern   = regexp.MustCompile(`^(?:[0-9]+(\.[0-9]+)?(?:s|m|h))+$`)
	concurrencyPctPat = regexp.MustCompile(`^(100|[1-9][0-9]?)%$`)
)

// ValidateStagedUpdateStrategy checks a ClusterStagedUpdateStrategy by
// upstream's rules: 1-31 stages with unique names of lower-case letters and
// digits, valid selectors, maxConcurrency at least 1 or 1%-100%, at most one
// after-stage task of each type (a TimedWait needs waitTime, an Approval
// takes none), at most one before-stage task and that an Approval; and
// Flotilla's stuck-threshold annotation, a positive duration.
func ValidateStagedUpdateStrategy(s *ClusterStagedUpdateStrategy) ErrorList {
	var p problems
	validateStagedScope(&p, ClusterStagedUpdateStrategyKind, s.Kind, &s.ObjectMeta)
	if v, ok := s.Annotations[StuckThresholdAnnotation]; ok {
		if _, err := StuckThreshold(s); err != nil {
			p.add(ErrorTypeInvalid, field.NewPath("metadata", "annotations").Key(StuckThresholdAnnotation), "%q %s", v, err)
		}
	}
	stages := field.NewPath("spec", "stages")
	switch n := len(s.Spec.Stages); {
	case n == 0:
		p.add(ErrorTypeRequired, stages, "at least one stage is required")
	case n > MaxStages:
		p.add(ErrorTypeTooMany, stages, "must have at most %d stages, not %d", MaxStages, n)
	}
	seen := map[string]int{}
	for i, st := range s.Spec.Stages {
		sp := stages.Index(i)
		switch {
		case st.Name == "":
			p.add(ErrorTypeRequired, sp.Child("name"), "is required")
		case len(st.Name) > maxStageNameLength:
			p.add(ErrorTypeInvalid, sp.Child("name"), "must be at most %d characters, not %d", maxStageNameLength, len(st.Name))
		case !stageNamePattern.MatchString(st.Name):
			p.add(ErrorTypeInvalid, sp.Child("name"), "%q must be lower-case letters and digits only", st.Name)
		default:
			if j, dup := seen[st.Name]; dup {
				p.add(ErrorTypeDuplicate, sp.Child("name"), "%q is the name of stages[%d] too; stage names must be unique", st.Name, j)
			}
			seen[st.Name] = i
		}
		if st.LabelSelector != nil {
			validateLabelSelector(&p, st.LabelSelector, sp.Child("labelSelector"))
		}
		if st.SortingLabelKey != nil {
			validateLabelKey(&p, *st.SortingLabelKey, sp.Child("sortingLabelKey"))
		}
		if mc := st.MaxConcurrency; mc != nil {
			validateMaxConcurrency(&p, *mc, sp.Child("maxConcurrency"))
		}
		validateStageTasks(&p, st.AfterStageTasks, maxAfterStageTasks, false, sp.Child("afterStageTasks"))
		validateStageTasks(&p, st.BeforeStageTasks, maxBeforeStageTasks, true, sp.Child("beforeStageTasks"))
	}
	return withPlaceholders(p.list, s.Placeholders)
}

func validateMaxConcurrency(p *problems, mc intstr.IntOrString, path *field.Path) {
	if mc.Type == intstr.Int {
		if mc.IntVal < 1 {
			p.add(ErrorTypeInvalid, path, "maxConcurrency must be at least 1, not %d", mc.IntVal)
		}
		return
	}
	if !concurrencyPctPat.MatchString(mc.StrVal) {
		p.add(ErrorTypeInvalid, path, "%q must be a number of at least 1 or a percentage from 1%% to 100%%", mc.StrVal)
	}
}

func validateStageTasks(p *problems, tasks []StageTask, limit int, before bool, path *field.Path) {
	if len(tasks) > limit {
		p.add(ErrorTypeTooMany, path, "must have at most %d task(s), not %d", limit, len(tasks))
	}
	seen := map[StageTaskType]int{}
	for i, t := range tasks {
		tp := path.Index(i)
		if j, dup := seen[t.Type]; dup {
			p.add(ErrorTypeDuplicate, tp.Child("type"), "%s is the type of %s too; at most one task of each type", t.Type, path.Index(j))
		}
		seen[t.Type] = i
		switch t.Type {
		case StageTaskTypeApproval:
			if t.WaitTime != nil {
				p.add(ErrorTypeForbidden, tp.Child("waitTime"), "is not allowed for an Approval")
			}
		case StageTaskTypeTimedWait:
			switch {
			case before:
				p.add(ErrorTypeForbidden, tp.Child("type"), "a before-stage task cannot be TimedWait; only Approval")
			case t.WaitTime == nil:
				p.add(ErrorTypeRequired, tp.Child("waitTime"), "is required for a TimedWait")
			case t.WaitTime.Duration < 0:
				p.add(ErrorTypeInvalid, tp.Child("waitTime"), "must not be negative, not %s", t.WaitTime.Duration)
			case !waitTimePattern.MatchString(t.WaitTime.Duration.String()):
				p.add(ErrorTypeInvalid, tp.Child("waitTime"), "%s: only hours (h), minutes (m) and seconds (s) are accepted", t.WaitTime.Duration)
			}
		case "":
			p.add(ErrorTypeRequired, tp.Child("type"), "is required (TimedWait or Approval)")
		default:
			p.add(ErrorTypeNotSupported, tp.Child("type"), "%q is not supported: TimedWait or Approval", t.Type)
		}
	}
}

// StuckThreshold is how long a cluster of a run of the strategy may take
// before the run is stuck: its annotation, 0 when absent (the service's
// default applies).
func StuckThreshold(s *ClusterStagedUpdateStrategy) (time.Duration, error) {
	v, ok := s.Annotations[StuckThresholdAnnotation]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d <= 0 {
		return 0, errStuckThreshold
	}
	return d, nil
}

var errStuckThreshold = errors.New("is not a positive duration such as 10m or 1h30m")

// ValidateStagedUpdateRun checks a ClusterStagedUpdateRun: a name under 64
// characters, the placement and strategy named, a snapshot index that is a
// non-negative integer when set, and a known state.
func ValidateStagedUpdateRun(r *ClusterStagedUpdateRun) ErrorList {
	var p problems
	namespaced := validateStagedScope(&p, ClusterStagedUpdateRunKind, r.Kind, &r.ObjectMeta)
	spec := field.NewPath("spec")
	switch {
	case r.Spec.PlacementName == "":
		p.add(ErrorTypeRequired, spec.Child("placementName"), "is required")
	case len(r.Spec.PlacementName) > maxPlacementNameRef:
		p.add(ErrorTypeInvalid, spec.Child("placementName"), "must be at most %d characters", maxPlacementNameRef)
	case !namespaced && r.Spec.PlacementName != "" && isKey(r.Spec.PlacementName):
		// Only a StagedUpdateRun names a ResourcePlacement (of its namespace).
		p.add(ErrorTypeInvalid, spec.Child("placementName"), "%q is not a ClusterResourcePlacement name", r.Spec.PlacementName)
	}
	if r.Spec.StagedUpdateStrategyName == "" {
		p.add(ErrorTypeRequired, spec.Child("stagedRolloutStrategyName"), "is required")
	}
	if idx := r.Spec.ResourceSnapshotIndex; idx != "" {
		if n, err := strconv.ParseInt(idx, 10, 64); err != nil || n < 0 {
			p.add(ErrorTypeInvalid, spec.Child("resourceSnapshotIndex"), "%q must be a non-negative integer (a snapshot index of fleetctl history)", idx)
		}
	}
	switch r.Spec.State {
	case "", UpdateRunStateInitialize, UpdateRunStateRun, UpdateRunStateStop:
	default:
		p.add(ErrorTypeNotSupported, spec.Child("state"), "%q is not supported: Initialize, Run or Stop", r.Spec.State)
	}
	return withPlaceholders(p.list, r.Placeholders)
}

// ValidateStagedUpdateRunUpdate checks a change of a run: everything but the
// state is immutable, and the state cannot go back to Initialize nor from
// Initialize to Stop.
func ValidateStagedUpdateRunUpdate(old, new *ClusterStagedUpdateRun) ErrorList {
	var p problems
	spec := field.NewPath("spec")
	if old.Spec.PlacementName != new.Spec.PlacementName {
		p.add(ErrorTypeImmutable, spec.Child("placementName"), "placementName is immutable")
	}
	if old.Spec.ResourceSnapshotIndex != new.Spec.ResourceSnapshotIndex {
		p.add(ErrorTypeImmutable, spec.Child("resourceSnapshotIndex"), "resourceSnapshotIndex is immutable")
	}
	if old.Spec.StagedUpdateStrategyName != new.Spec.StagedUpdateStrategyName {
		p.add(ErrorTypeImmutable, spec.Child("stagedRolloutStrategyName"), "stagedRolloutStrategyName is immutable")
	}
	from, to := old.Spec.State, new.Spec.State
	if from == "" {
		from = UpdateRunStateInitialize
	}
	if to == "" {
		to = UpdateRunStateInitialize
	}
	switch {
	case from == UpdateRunStateInitialize && to == UpdateRunStateStop,
		from != UpdateRunStateInitialize && to == UpdateRunStateInitialize:
		p.add(ErrorTypeForbidden, spec.Child("state"), "invalid state transition: cannot transition from %s to %s", from, to)
	}
	return p.list
}

// ValidateApprovalRequest checks a ClusterApprovalRequest: it names its run
// and stage.
func ValidateApprovalRequest(a *ClusterApprovalRequest) ErrorList {
	var p problems
	validateStagedScope(&p, ClusterApprovalRequestKind, a.Kind, &a.ObjectMeta)
	if a.Spec.TargetUpdateRun == "" {
		p.add(ErrorTypeRequired, field.NewPath("spec", "parentStageRollout"), "is required")
	}
	if a.Spec.TargetStage == "" {
		p.add(ErrorTypeRequired, field.NewPath("spec", "targetStage"), "is required")
	}
	return withPlaceholders(p.list, a.Placeholders)
}
