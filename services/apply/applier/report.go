package applier

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/availability"
)

// Reasons and outcomes the apply worker adds to the contract's.
const (
	// AppliedReason: a per-manifest Applied=True condition.
	AppliedReason = "Applied"
	// FailedToReportDiffReason: ReportDiff could not compare a manifest.
	FailedToReportDiffReason = "FailedToReportDiff"
	// TakenOver is the outcome of a takeover that happened.
	TakenOver = "TakenOver"
	// DeletedReason, AbandonedReason: the Applied condition of a report
	// answering a tombstone.
	DeletedReason   = "Deleted"
	AbandonedReason = "Abandoned"
	// RetainedReason: an object a tombstone would have deleted was kept
	// because it holds objects the placement does not own.
	RetainedReason = "Retained"
	// UnreachableReason: the per-manifest reason when the member cannot
	// be reached (the message says so).
	UnreachableReason = api.ManifestApplyFailedReason
)

// Condition statuses.
const (
	statusTrue    = "True"
	statusFalse   = "False"
	statusUnknown = "Unknown"
)

func appliedOK(takenOver bool) events.Condition {
	msg := "Manifest has been applied"
	if takenOver {
		msg = "Manifest has been applied; the existing object was taken over"
	}
	return events.Condition{Status: statusTrue, Reason: AppliedReason, Message: msg}
}

// failure is a per-manifest Applied=False condition with the contract's
// message around text.
func failure(reason, text string) events.Condition {
	return events.Condition{Status: statusFalse, Reason: reason, Message: api.ManifestApplyFailedMessage(text)}
}

var notApplied = events.Condition{
	Status: statusUnknown, Reason: api.ManifestNotAvailableYetReason,
	Message: "The manifest has not been applied, so its availability is unknown",
}

// fail records a per-manifest failure on t.
func (t *tracked) fail(reason string, err error) {
	t.result.Applied = failure(reason, err.Error())
	t.result.Available = notApplied
}

// refreshAvailability sets t's Available condition from its live object.
func (t *tracked) refreshAvailability(period time.Duration, now time.Time) {
	t.recheckAt = time.Time{}
	if t.result.Applied.Status != statusTrue || t.live == nil {
		if t.result.Applied.Status != "" {
			t.result.Available = notApplied
		}
		return
	}
	r := availability.Of(t.live, availability.Tracking{AppliedAt: t.appliedAt, UnavailablePeriod: period, Now: now})
	t.result.Available = events.Condition{Status: r.Status, Reason: r.Reason, Message: r.Message}
	t.recheckAt = r.RecheckAt
}

// appliedTime is when Flotilla last changed obj: the time of its apply entry
// in managedFields, which survives restarts.
//
// Managed-field times are truncated to whole seconds, so the change happened
// somewhere in the second after the recorded time. Taking the end of that
// second (or now, if sooner) never counts a not-trackable object available
// early; taking the start did, by up to a second, when the apply landed just
// before a second boundary.
func appliedTime(obj *unstructured.Unstructured, now time.Time) time.Time {
	var latest time.Time
	for _, mf := range obj.GetManagedFields() {
		if mf.Manager == FieldManager && mf.Time != nil && mf.Time.After(latest) {
			latest = mf.Time.Time
		}
	}
	if latest.IsZero() {
		return latest
	}
	if end := latest.Add(time.Second); end.Before(now) {
		return end
	}
	return now
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// buildReport summarises p's objects into a WorkReported.
func (a *Applier) buildReport(p *placement, takeovers []events.TakeoverDecision) *events.WorkReported {
	w := p.work
	now := a.now()
	period := time.Duration(w.UnavailablePeriodSeconds) * time.Second
	r := &events.WorkReported{
		Cluster:       a.cluster,
		Placement:     w.Placement,
		ResourceIndex: w.ResourceIndex,
		Generation:    w.Generation,
		Takeovers:     takeovers,
		ObservedAt:    now.UTC(),
		Manifests:     make([]events.ManifestResult, 0, len(p.objects)),
	}
	for _, t := range p.objects {
		if p.strategy.Type != api.ApplyStrategyTypeReportDiff {
			t.refreshAvailability(period, now)
		}
		res := t.result
		res.Resource = t.obj.Resource
		res.FirstDriftedAt = nil
		if len(res.Drifts) > 0 {
			res.FirstDriftedAt = timePtr(t.firstDrifted)
		}
		res.FirstDiffedAt = nil
		if len(res.Diffs) > 0 {
			res.FirstDiffedAt = timePtr(t.firstDiffed)
		}
		r.Manifests = append(r.Manifests, res)
	}
	Summarize(r, p.strategy)
	return r
}

// Summarize sets a report's overall conditions from its manifests' results:
// DiffReported under a ReportDiff strategy, else Applied and Available; then
// it bounds the report's manifests (events.BoundManifests): it counts them
// all and lists only those worth showing. The fleet benchmark's simulated
// members summarise their reports with it too.
func Summarize(r *events.WorkReported, strategy api.ApplyStrategy) {
	defer events.BoundManifests(r)
	var failed, unavailable, diffFailed int
	for _, res := range r.Manifests {
		switch {
		case res.Applied.Status == statusFalse && res.Applied.Reason == FailedToReportDiffReason:
			diffFailed++
		case res.Applied.Status == statusFalse:
			failed++
		case res.Available.Status != statusTrue:
			unavailable++
		}
	}
	n := len(r.Manifests)
	if strategy.Type == api.ApplyStrategyTypeReportDiff {
		c := events.Condition{Status: statusTrue, Reason: api.DiffReportedStatusTrueReason,
			Message: fmt.Sprintf("Diff reporting of %d manifest(s) has been completed", n)}
		if diffFailed+failed > 0 {
			c = events.Condition{Status: statusFalse, Reason: api.DiffReportedStatusFalseReason,
				Message: fmt.Sprintf("Diff reporting failed for %d of %d manifest(s)", diffFailed+failed, n)}
		}
		r.DiffReported = &c
		return
	}
	switch {
	case failed > 0:
		r.Applied = events.Condition{Status: statusFalse, Reason: api.ApplyFailedReason,
			Message: fmt.Sprintf("Failed to apply %d of %d manifest(s), please check the `failedPlacements` status", failed, n)}
		r.Available = events.Condition{Status: statusUnknown, Reason: api.AvailableUnknownReason,
			Message: "Availability is unknown until every manifest is applied"}
	default:
		r.Applied = events.Condition{Status: statusTrue, Reason: api.ApplySucceededReason,
			Message: fmt.Sprintf("Successfully applied %d manifest(s)", n)}
		if unavailable > 0 {
			r.Available = events.Condition{Status: statusFalse, Reason: api.NotAvailableYetReason,
				Message: fmt.Sprintf("%d of %d manifest(s) are not available yet", unavailable, n)}
		} else {
			r.Available = events.Condition{Status: statusTrue, Reason: api.AvailableReason,
				Message: fmt.Sprintf("All %d manifest(s) are available", n)}
		}
	}
}

// NextRecheck is when a not-trackable object of the placement will count as
// available and its report should be refreshed; zero when none is waiting.
func (a *Applier) NextRecheck(placementName string) time.Time {
	p := a.existing(placementName)
	if p == nil {
		return time.Time{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var next time.Time
	for _, t := range p.objects {
		if !t.recheckAt.IsZero() && (next.IsZero() || t.recheckAt.Before(next)) {
			next = t.recheckAt
		}
	}
	return next
}
