package fold

import (
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
)

// Messages of the per-cluster conditions (upstream Fleet's wording). Where an
// event carries a message of its own (the rollout's blocking reason, an apply
// report's summary) that message is used instead.
const (
	RolloutStartedMessage        = "Detected the new changes on the resources and started the rollout process"
	RolloutNotStartedYetMessage  = "The rollout is being blocked by the rollout strategy"
	RolloutStartedUnknownMessage = "In the process of deciding whether to roll out the latest resources or not"

	NoOverrideSpecifiedMessage = "No override rules are configured for the selected resources"
	OverriddenSucceededMessage = "Successfully applied the override rules on the resources"
	// OverriddenFailedMessage begins the message of a cluster whose overrides failed; the
	// rollout's reason (the override, object, patch and path) follows.
	OverriddenFailedMessage = "Failed to apply the override rules on the resources: "

	WorkSynchronizedMessage        = "All of the works are synchronized to the latest"
	WorkNotSynchronizedYetMessage  = "There are works not synchronized to the latest"
	WorkSynchronizedUnknownMessage = "In the process of synchronizing or operation is blocked by the rollout strategy"
	// WorkQuarantinedMessage begins the message of a cluster whose work the bus could not
	// take; the outbox's reason (the event, its size, the limit) follows.
	WorkQuarantinedMessage = "The work for this cluster could not be sent and was set aside (see outbox_quarantine): "

	ApplySucceededMessage = "All corresponding work objects are applied"
	ApplyFailedMessage    = "Failed to apply the selected resources, please check the `failedPlacements` status"
	ApplyPendingMessage   = "In the process of applying the resources on the member cluster"

	AvailableMessage        = "All corresponding work objects are available"
	NotAvailableYetMessage  = "Some of the resources are not available yet, please check the `failedPlacements` status"
	AvailableUnknownMessage = "In the process of checking the availability of the resources"

	DiffReportedMessage         = "Diff reporting has been completed"
	DiffReportingFailedMessage  = "Diff reporting is incomplete or has failed"
	DiffReportingPendingMessage = "In the process of reporting diffs"

	// StuckNote is added to the message of the condition a cluster is held at
	// when the rollout reports it stuck past its deadline without saying why
	// (when it does, its message is added instead).
	StuckNote = "stuck: not applied and available within the rollout deadline"
)

// outcome is a per-cluster condition's reason and default message for each status.
type outcome struct {
	reason  map[metav1.ConditionStatus]string
	message map[metav1.ConditionStatus]string
}

func outcomes(yes, yesMsg, no, noMsg, unk, unkMsg string) outcome {
	return outcome{
		reason:  map[metav1.ConditionStatus]string{metav1.ConditionTrue: yes, metav1.ConditionFalse: no, metav1.ConditionUnknown: unk},
		message: map[metav1.ConditionStatus]string{metav1.ConditionTrue: yesMsg, metav1.ConditionFalse: noMsg, metav1.ConditionUnknown: unkMsg},
	}
}

var clusterOutcomes = map[api.PerClusterPlacementConditionType]outcome{
	api.PerClusterRolloutStartedConditionType: outcomes(
		api.RolloutStartedReason, RolloutStartedMessage,
		api.RolloutNotStartedYetReason, RolloutNotStartedYetMessage,
		api.RolloutStartedUnknownReason, RolloutStartedUnknownMessage),
	api.PerClusterOverriddenConditionType: outcomes(
		api.OverrideNotSpecifiedReason, NoOverrideSpecifiedMessage,
		api.OverriddenFailedReason, "Failed to override the selected resources",
		api.OverriddenPendingReason, "In the process of overriding the selected resources if there is any override defined"),
	api.PerClusterWorkSynchronizedConditionType: outcomes(
		api.WorkSynchronizedReason, WorkSynchronizedMessage,
		api.WorkNotSynchronizedYetReason, WorkNotSynchronizedYetMessage,
		api.WorkSynchronizedUnknownReason, WorkSynchronizedUnknownMessage),
	api.PerClusterAppliedConditionType: outcomes(
		api.ApplySucceededReason, ApplySucceededMessage,
		api.ApplyFailedReason, ApplyFailedMessage,
		api.ApplyPendingReason, ApplyPendingMessage),
	api.PerClusterAvailableConditionType: outcomes(
		api.AvailableReason, AvailableMessage,
		api.NotAvailableYetReason, NotAvailableYetMessage,
		api.AvailableUnknownReason, AvailableUnknownMessage),
	api.PerClusterDiffReportedConditionType: outcomes(
		api.DiffReportedStatusTrueReason, DiffReportedMessage,
		api.DiffReportedStatusFalseReason, DiffReportingFailedMessage,
		api.DiffReportedStatusUnknownReason, DiffReportingPendingMessage),
}

// clusterFold builds one cluster's entry of placementStatuses[].
type clusterFold struct {
	*folder
	rps     api.ResourcePlacementStatus
	prev    *api.ResourcePlacementStatus
	reached []metav1.ConditionStatus
	stuck   *events.ClusterRollout
	// overrides: overrides apply on the cluster.
	overrides bool
}

// cluster folds the state of the placement on one chosen cluster. It returns
// the cluster's entry and the status of each condition after Scheduled that
// the cluster reached, in chain order.
func (f *folder) cluster(c events.ClusterDecision, prev *api.ResourcePlacementStatus) (api.ResourcePlacementStatus, []metav1.ConditionStatus) {
	cf := &clusterFold{folder: f, prev: prev, rps: api.ResourcePlacementStatus{ClusterName: c.Cluster}}
	cf.add(api.PerClusterScheduledConditionType, metav1.ConditionTrue, api.ScheduleSucceededReason,
		api.ScheduledMessage(c.Cluster, c.AffinityScore, c.TopologySpreadScore))
	cf.rest(c.Cluster)
	cf.failover(c)
	f.overridden = f.overridden || cf.overrides
	return cf.rps, cf.reached
}

func (cf *clusterFold) rest(cluster string) {
	in := cf.in
	if e := rolloutEntry(in.Rollout, cluster); e != nil {
		cf.rps.ObservedResourceIndex = strconv.FormatInt(e.ResourceIndex, 10)
	}
	rollout := in.currentRollout()
	entry := rolloutEntry(rollout, cluster)
	report := in.currentReport(cluster)
	if report != nil {
		cf.rps.DriftedPlacements = drifted(report)
		cf.rps.DiffedPlacements = diffed(report)
	}
	if entry != nil && entry.Stuck {
		cf.stuck = entry
	}

	switch {
	case entry == nil || (entry.Started && entry.ResourceIndex < rollout.ResourceIndex):
		cf.step(api.PerClusterRolloutStartedConditionType, metav1.ConditionUnknown, "")
		return
	case !entry.Started:
		cf.step(api.PerClusterRolloutStartedConditionType, metav1.ConditionFalse, entry.Message)
		return
	}
	cf.step(api.PerClusterRolloutStartedConditionType, metav1.ConditionTrue, "")
	if !cf.overridden(entry.Overrides) {
		return
	}

	// The rollout publishes a cluster's work when it starts it, so a started
	// cluster's work is synchronized unless the rollout says otherwise.
	ws, msg := metav1.ConditionTrue, entry.Message
	switch entry.Reason {
	case api.WorkNotSynchronizedYetReason:
		ws = metav1.ConditionFalse
	case api.WorkSynchronizedUnknownReason:
		ws = metav1.ConditionUnknown
	}
	if q := in.Quarantined[cluster]; q != nil {
		ws, msg = metav1.ConditionFalse, WorkQuarantinedMessage+q.Notice.Reason
	}
	if !cf.step(api.PerClusterWorkSynchronizedConditionType, ws, msg) {
		return
	}

	if cf.reportDiff() {
		status, msg := metav1.ConditionUnknown, ""
		if report != nil && report.DiffReported != nil {
			status, msg = conditionStatus(report.DiffReported.Status), report.DiffReported.Message
		}
		cf.step(api.PerClusterDiffReportedConditionType, status, msg)
		return
	}

	if report == nil {
		cf.step(api.PerClusterAppliedConditionType, metav1.ConditionUnknown, "")
		return
	}
	status := conditionStatus(report.Applied.Status)
	if !cf.step(api.PerClusterAppliedConditionType, status, report.Applied.Message) {
		if status == metav1.ConditionFalse {
			cf.rps.FailedPlacements = cf.failed(report, api.PerClusterAppliedConditionType)
		}
		return
	}
	status = conditionStatus(report.Available.Status)
	if !cf.step(api.PerClusterAvailableConditionType, status, report.Available.Message) && status == metav1.ConditionFalse {
		cf.rps.FailedPlacements = cf.failed(report, api.PerClusterAvailableConditionType)
	}
}

// overridden adds the Overridden condition from what the rollout says the
// placement's overrides did on the cluster, with the override snapshots that
// apply there; it reports whether the condition is True. As upstream: True
// with OverriddenSucceeded when overrides apply, NoOverrideSpecified when none
// does, False with OverriddenFailed and the reason when they could not apply.
func (cf *clusterFold) overridden(o *events.ClusterOverrides) bool {
	if o != nil {
		cf.rps.ApplicableClusterResourceOverrides = o.ClusterResourceOverrides
		cf.rps.ApplicableResourceOverrides = o.ResourceOverrides
	}
	switch {
	case o != nil && o.Failed != "":
		cf.step(api.PerClusterOverriddenConditionType, metav1.ConditionFalse, OverriddenFailedMessage+o.Failed)
		return false
	case o != nil && len(o.ClusterResourceOverrides)+len(o.ResourceOverrides) > 0:
		cf.add(api.PerClusterOverriddenConditionType, metav1.ConditionTrue, api.OverriddenSucceededReason, OverriddenSucceededMessage)
		cf.reached = append(cf.reached, metav1.ConditionTrue)
		cf.overrides = true
		return true
	}
	return cf.step(api.PerClusterOverriddenConditionType, metav1.ConditionTrue, "")
}

// add appends a condition to the cluster's entry.
func (cf *clusterFold) add(t api.PerClusterPlacementConditionType, s metav1.ConditionStatus, reason, msg string) {
	var prev []metav1.Condition
	if cf.prev != nil {
		prev = cf.prev.Conditions
	}
	cf.rps.Conditions = append(cf.rps.Conditions, cf.carry(prev, metav1.Condition{
		Type: string(t), Status: s, Reason: reason, Message: msg,
	}))
}

// step appends a chain condition with the contract's reason for its status
// and msg, or the default message; it reports whether the condition is True.
func (cf *clusterFold) step(t api.PerClusterPlacementConditionType, s metav1.ConditionStatus, msg string) bool {
	o := clusterOutcomes[t]
	if msg == "" || s == metav1.ConditionTrue {
		msg = o.message[s]
	}
	if s != metav1.ConditionTrue && cf.stuck != nil {
		// The rollout's message of a stuck cluster says so and why; without
		// one, the note does.
		note := cf.stuck.Message
		if note == "" {
			note = StuckNote
		}
		if !strings.Contains(msg, note) {
			msg += "; " + note
		}
	}
	cf.add(t, s, o.reason[s], msg)
	cf.reached = append(cf.reached, s)
	return s == metav1.ConditionTrue
}

// conditionStatus reads an event condition's status; anything but True or
// False is Unknown.
func conditionStatus(s string) metav1.ConditionStatus {
	switch metav1.ConditionStatus(s) {
	case metav1.ConditionTrue, metav1.ConditionFalse:
		return metav1.ConditionStatus(s)
	}
	return metav1.ConditionUnknown
}

// manifestErrors are the error texts of the per-manifest reasons whose
// message the contract fixes, for reports that leave the message out.
var manifestErrors = map[string]string{
	api.ManifestNotTakenOverReason:     api.NotTakenOverError,
	api.ManifestFailedToTakeOverReason: api.FailedToTakeOverError,
	api.ManifestFoundDriftsReason:      api.FoundDriftsError,
}

// failed lists the manifests that make the cluster's Applied (or Available)
// condition False, each with its per-manifest condition, at most
// api.MaxReportedPlacements. A manifest's condition keeps its
// lastTransitionTime while it stays failed. The condition carries no
// observedGeneration, as in upstream's failedPlacements.
func (cf *clusterFold) failed(r *events.WorkReported, t api.PerClusterPlacementConditionType) []api.FailedResourcePlacement {
	prev := map[string]metav1.Condition{}
	if cf.prev != nil {
		for _, p := range cf.prev.FailedPlacements {
			prev[identity(p.ResourceIdentifier)] = p.Condition
		}
	}
	var out []api.FailedResourcePlacement
	for _, m := range r.Manifests {
		var mc events.Condition
		switch t {
		case api.PerClusterAppliedConditionType:
			if conditionStatus(m.Applied.Status) != metav1.ConditionFalse {
				continue
			}
			mc = m.Applied
		default:
			if conditionStatus(m.Applied.Status) != metav1.ConditionTrue || conditionStatus(m.Available.Status) != metav1.ConditionFalse {
				continue
			}
			mc = m.Available
		}
		msg := mc.Message
		if text, ok := manifestErrors[mc.Reason]; ok && msg == "" {
			msg = api.ManifestApplyFailedMessage(text)
		}
		c := metav1.Condition{Type: string(t), Status: metav1.ConditionFalse, Reason: mc.Reason, Message: msg, LastTransitionTime: cf.at}
		if p, ok := prev[identity(m.Resource)]; ok && p.Type == c.Type && p.Status == c.Status {
			c.LastTransitionTime = p.LastTransitionTime
		}
		out = append(out, api.FailedResourcePlacement{ResourceIdentifier: m.Resource, Condition: c})
		if len(out) == api.MaxReportedPlacements {
			break
		}
	}
	return out
}

// drifted lists the manifests whose member copy drifted, at most api.MaxReportedPlacements.
func drifted(r *events.WorkReported) []api.DriftedResourcePlacement {
	var out []api.DriftedResourcePlacement
	for _, m := range r.Manifests {
		if len(m.Drifts) == 0 {
			continue
		}
		out = append(out, api.DriftedResourcePlacement{
			ResourceIdentifier:              m.Resource,
			ObservationTime:                 metav1.NewTime(r.ObservedAt),
			TargetClusterObservedGeneration: m.ObservedGeneration,
			FirstDriftedObservedTime:        metav1.NewTime(firstTime(m.FirstDriftedAt, r.ObservedAt)),
			ObservedDrifts:                  m.Drifts,
		})
		if len(out) == api.MaxReportedPlacements {
			break
		}
	}
	return out
}

// diffed lists the manifests that differ from the member's copy, at most
// api.MaxReportedPlacements. An object missing on the member (one diff at
// path "/") has no observed generation.
func diffed(r *events.WorkReported) []api.DiffedResourcePlacement {
	var out []api.DiffedResourcePlacement
	for _, m := range r.Manifests {
		if len(m.Diffs) == 0 {
			continue
		}
		var gen *int64
		if m.ObservedGeneration != 0 && !(len(m.Diffs) == 1 && m.Diffs[0].Path == "/") {
			gen = new(m.ObservedGeneration)
		}
		out = append(out, api.DiffedResourcePlacement{
			ResourceIdentifier:              m.Resource,
			ObservationTime:                 metav1.NewTime(r.ObservedAt),
			TargetClusterObservedGeneration: gen,
			FirstDiffedObservedTime:         metav1.NewTime(firstTime(m.FirstDiffedAt, r.ObservedAt)),
			ObservedDiffs:                   m.Diffs,
		})
		if len(out) == api.MaxReportedPlacements {
			break
		}
	}
	return out
}

func firstTime(first *time.Time, observed time.Time) time.Time {
	if first != nil && !first.IsZero() {
		return *first
	}
	return observed
}

// identity keys a resource identifier, envelope included.
func identity(r api.ResourceIdentifier) string {
	k := r.Group + "/" + r.Version + "/" + r.Kind + "/" + r.Namespace + "/" + r.Name
	if e := r.Envelope; e != nil {
		k += "@" + string(e.Type) + "/" + e.Namespace + "/" + e.Name
	}
	return k
}
