package plan

import (
	"fmt"
	"time"
)

// Condition is a summary condition of an apply report.
type Condition struct {
	Status  string `json:"status,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Report summarises an apply worker's latest report for the work a cluster
// holds.
type Report struct {
	Applied      Condition  `json:"applied"`
	Available    Condition  `json:"available"`
	DiffReported *Condition `json:"diffReported,omitempty"`
	// NotTrackable: some manifest's availability cannot be tracked.
	NotTrackable bool `json:"notTrackable,omitempty"`
	// OnlyNotTrackablePending: every manifest that is not available yet is
	// one whose availability cannot be tracked.
	OnlyNotTrackablePending bool `json:"onlyNotTrackablePending,omitempty"`
}

// State is a cluster's readiness for the rollout.
type State struct {
	Ready  bool
	Failed bool
	// ReadyAt is when a cluster waiting out the unavailable period of
	// not-trackable objects becomes ready; zero otherwise.
	ReadyAt time.Time
	// Why says what the cluster waits for when it is not ready.
	Why string
}

// Readiness judges a report. reportDiff is true for the ReportDiff apply
// strategy (nothing is applied; the diff report is the result). appliedAt is
// when the work was first reported applied; objects whose availability
// cannot be tracked count as available period after it.
func Readiness(r *Report, reportDiff bool, appliedAt time.Time, period time.Duration, now time.Time) State {
	switch {
	case r == nil:
		return State{Why: "no apply result has been reported yet"}
	case reportDiff:
		if r.DiffReported == nil {
			return State{Why: "the diff report is pending"}
		}
		switch r.DiffReported.Status {
		case "True":
			return State{Ready: true}
		case "False":
			return State{Failed: true, Why: "diff reporting failed: " + r.DiffReported.Message}
		}
		return State{Why: "the diff report is pending: " + r.DiffReported.Message}
	case r.Applied.Status == "False":
		return State{Failed: true, Why: "apply failed: " + r.Applied.Message}
	case r.Applied.Status != "True":
		return State{Why: "the apply is pending"}
	}
	waitPeriod := r.NotTrackable && (r.Available.Status == "True" || r.OnlyNotTrackablePending)
	switch {
	case r.Available.Status == "True" && !r.NotTrackable:
		return State{Ready: true}
	case waitPeriod:
		if appliedAt.IsZero() {
			appliedAt = now
		}
		at := appliedAt.Add(period)
		if !now.Before(at) {
			return State{Ready: true}
		}
		return State{ReadyAt: at, Why: fmt.Sprintf("objects whose availability cannot be tracked count as available %s after they are applied (at %s)",
			period, at.UTC().Format(time.RFC3339))}
	}
	msg := r.Available.Message
	if msg == "" {
		msg = r.Available.Reason
	}
	return State{Why: "not available yet: " + msg}
}
