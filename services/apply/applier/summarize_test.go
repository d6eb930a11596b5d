package applier_test

import (
	"testing"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/applier"
)

// TestSummarize sets a report's overall conditions from its manifests' results alone.
func TestSummarize(t *testing.T) {
	applied := events.Condition{Status: "True"}
	failed := events.Condition{Status: "False", Reason: api.ApplyFailedReason}
	diffFailed := events.Condition{Status: "False", Reason: applier.FailedToReportDiffReason}
	available := events.Condition{Status: "True"}
	notYet := events.Condition{Status: "False"}
	apply := api.ApplyStrategy{Type: api.ApplyStrategyTypeClientSideApply}
	reportDiff := api.ApplyStrategy{Type: api.ApplyStrategyTypeReportDiff}
	tests := []struct {
		name               string
		strategy           api.ApplyStrategy
		manifests          []events.ManifestResult
		applied, available string // reasons
		diffReported       string
	}{
		{"all available", apply, []events.ManifestResult{{Applied: applied, Available: available}, {Applied: applied, Available: available}},
			api.ApplySucceededReason, api.AvailableReason, ""},
		{"one not available", apply, []events.ManifestResult{{Applied: applied, Available: available}, {Applied: applied, Available: notYet}},
			api.ApplySucceededReason, api.NotAvailableYetReason, ""},
		{"one failed", apply, []events.ManifestResult{{Applied: failed}, {Applied: applied, Available: notYet}},
			api.ApplyFailedReason, api.AvailableUnknownReason, ""},
		{"diff reported", reportDiff, []events.ManifestResult{{Applied: applied}},
			"", "", api.DiffReportedStatusTrueReason},
		{"diff failed", reportDiff, []events.ManifestResult{{Applied: applied}, {Applied: diffFailed}},
			"", "", api.DiffReportedStatusFalseReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &events.WorkReported{Manifests: tt.manifests}
			applier.Summarize(r, tt.strategy)
			if r.Applied.Reason != tt.applied || r.Available.Reason != tt.available {
				t.Errorf("Applied %+v, Available %+v; want reasons %q and %q", r.Applied, r.Available, tt.applied, tt.available)
			}
			got := ""
			if r.DiffReported != nil {
				got = r.DiffReported.Reason
			}
			if got != tt.diffReported {
				t.Errorf("DiffReported %+v, want reason %q", r.DiffReported, tt.diffReported)
			}
		})
	}
}
