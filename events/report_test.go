package events_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/events/bus"
)

// largeReport is the report of a placement of n objects that all failed to
// apply with messages of size text, drifted and differ in fields fields of
// values of that size, and were all taken over with as many differences.
func largeReport(n, text, fields int) *events.WorkReported {
	huge := strings.Repeat("é", text/2)
	patches := make([]api.PatchDetail, fields)
	for i := range patches {
		patches[i] = api.PatchDetail{Path: "/data/" + strings.Repeat("k", text) + fmt.Sprint(i), ValueInMember: huge, ValueInHub: huge}
	}
	at := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	r := &events.WorkReported{Cluster: "member-1", Placement: "web", ResourceIndex: 3, Generation: 2, ObservedAt: at}
	for i := range n {
		res := api.ResourceIdentifier{Version: "v1", Kind: "ConfigMap", Namespace: "web", Name: fmt.Sprintf("cm-%05d", i)}
		m := events.ManifestResult{Resource: res,
			Applied:   events.Condition{Status: "False", Reason: api.ManifestApplyFailedReason, Message: huge},
			Available: events.Condition{Status: "Unknown", Reason: api.ManifestNotAvailableYetReason, Message: huge},
			Drifts:    patches, Diffs: patches}
		if i%2 == 1 { // half applied, not available, with a not-trackable reason
			m.Applied = events.Condition{Status: "True", Reason: "Applied"}
			m.Available = events.Condition{Status: "False", Reason: api.ManifestNotTrackableReason, Message: huge}
		}
		r.Manifests = append(r.Manifests, m)
		r.Takeovers = append(r.Takeovers, events.TakeoverDecision{Resource: res, Mode: api.WhenToTakeOverTypeIfNoDiff,
			Outcome: "NotTakenOver", Diffs: patches, DecidedAt: at})
	}
	return r
}

// wireSize is an event's size on the bus: its data and headers.
func wireSize(t *testing.T, typ string, payload any) int {
	t.Helper()
	ev, err := events.New(typ, "/flotilla/apply/member-1", "web", events.ID("bound", typ), payload)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := bus.Encode(ev, "flotilla.workstatus.member-1.web")
	if err != nil {
		t.Fatal(err)
	}
	size := len(msg.Data)
	for k, vs := range msg.Header {
		for _, v := range vs {
			size += len(k) + len(v) + 4
		}
	}
	return size
}

// TestReportStaysBounded bounds the report of 5,000 failing, drifted and
// differing manifests, all taken over, with the longest messages and values:
// the report is a valid event of under 300 KiB that keeps the first
// manifests and counts every manifest, and the takeover decisions that did
// not fit follow in bounded chunks, none lost.
func TestReportStaysBounded(t *testing.T) {
	const n = 5000
	r := largeReport(n, 8<<10, 50)
	events.BoundManifests(r)
	rest := events.SplitTakeovers(r)
	checkBounded(t, r, rest, n)
	if r.Manifests[0].Resource.Name != "cm-00000" || r.Counts.Unlisted == 0 {
		t.Errorf("the report lists %d manifests from %s, and %d unlisted", len(r.Manifests), r.Manifests[0].Resource.Name, r.Counts.Unlisted)
	}
}

// TestReportKeepsWhatStatusShows: with messages of ordinary size, the
// bounded report of 5,000 failing manifests still lists the first 100 of
// each kind the status shows.
func TestReportKeepsWhatStatusShows(t *testing.T) {
	const n = 5000
	r := largeReport(n, 200, 0)
	events.BoundManifests(r)
	rest := events.SplitTakeovers(r)
	checkBounded(t, r, rest, n)
	var failedApply, failedAvailable int
	for _, m := range r.Manifests {
		if m.Applied.Status != "True" {
			failedApply++
		} else {
			failedAvailable++
		}
	}
	if failedApply != api.MaxReportedPlacements || failedAvailable != api.MaxReportedPlacements || r.Manifests[0].Resource.Name != "cm-00000" {
		t.Errorf("the report lists %d failed to apply and %d not available from %s; want %d of each from cm-00000",
			failedApply, failedAvailable, r.Manifests[0].Resource.Name, api.MaxReportedPlacements)
	}
}

func checkBounded(t *testing.T, r *events.WorkReported, rest [][]events.TakeoverDecision, n int) {
	t.Helper()
	const wireBound = 300 << 10
	if size := wireSize(t, events.TypeWorkReported, r); size > wireBound {
		t.Errorf("the report is %d bytes on the bus, over %d", size, wireBound)
	}
	want := events.ManifestCounts{Total: n, Applied: n / 2, NotTrackable: n / 2, NotTrackablePending: n / 2,
		Unlisted: n - len(r.Manifests)}
	if len(r.Manifests[0].Drifts) > 0 {
		want.Drifted, want.Diffed = n, n
	}
	if *r.Counts != want {
		t.Errorf("counts %+v, want %+v", *r.Counts, want)
	}
	for _, m := range r.Manifests {
		if len(m.Drifts) > events.MaxPatchDetails || len(m.Applied.Message) > events.MaxMessageBytes ||
			(len(m.Drifts) > 0 && (len(m.Drifts[0].ValueInMember) > events.MaxPatchValueBytes || len(m.Drifts[0].Path) > events.MaxPatchPathBytes)) {
			t.Fatalf("manifest %s is not cut to the bounds", m.Resource.Name)
		}
	}

	decisions := len(r.Takeovers)
	for i, chunk := range rest {
		p := events.TakeoversDecided{Cluster: r.Cluster, Placement: r.Placement, ResourceIndex: r.ResourceIndex, Generation: r.Generation, Takeovers: chunk}
		if size := wireSize(t, events.TypeTakeoversDecided, p); size > events.MaxReportTakeoverBytes+8<<10 {
			t.Errorf("takeovers chunk %d is %d bytes on the bus", i, size)
		}
		if chunk[0].Resource.Name != fmt.Sprintf("cm-%05d", decisions) {
			t.Errorf("chunk %d starts at %s, want cm-%05d", i, chunk[0].Resource.Name, decisions)
		}
		decisions += len(chunk)
	}
	if decisions != n {
		t.Errorf("%d takeover decisions in the report and its chunks, want %d", decisions, n)
	}
}

// TestReportOfHealthyPlacement: a small placement's report lists every
// manifest; a large one whose objects are all applied and available is
// reported by its counts alone.
func TestReportOfHealthyPlacement(t *testing.T) {
	r := &events.WorkReported{Cluster: "member-1", Placement: "web"}
	for i := range 3 {
		r.Manifests = append(r.Manifests, events.ManifestResult{
			Resource:  api.ResourceIdentifier{Version: "v1", Kind: "ConfigMap", Name: fmt.Sprint("cm-", i)},
			Applied:   events.Condition{Status: "True", Reason: "Applied"},
			Available: events.Condition{Status: "True", Reason: api.ManifestNotTrackableReason}})
	}
	events.BoundManifests(r)
	if len(r.Manifests) != 3 || r.Counts.Total != 3 {
		t.Errorf("a placement of 3 objects lists %d manifests and counts %d, want 3", len(r.Manifests), r.Counts.Total)
	}

	r = &events.WorkReported{Cluster: "member-1", Placement: "web"}
	for i := range 5000 {
		r.Manifests = append(r.Manifests, events.ManifestResult{
			Resource:  api.ResourceIdentifier{Version: "v1", Kind: "ConfigMap", Name: fmt.Sprint("cm-", i)},
			Applied:   events.Condition{Status: "True", Reason: "Applied"},
			Available: events.Condition{Status: "True", Reason: api.ManifestNotTrackableReason}})
	}
	events.BoundManifests(r)
	if rest := events.SplitTakeovers(r); rest != nil || len(r.Manifests) != 0 {
		t.Fatalf("listed %d manifests and %d takeover chunks, want none", len(r.Manifests), len(rest))
	}
	if want := (events.ManifestCounts{Total: 5000, Applied: 5000, Available: 5000, NotTrackable: 5000}); *r.Counts != want {
		t.Errorf("counts %+v, want %+v", *r.Counts, want)
	}
}
