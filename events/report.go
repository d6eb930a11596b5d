package events

import (
	"encoding/json"

	"github.com/flotilla-dev/flotilla/events/api"
)

// Bounds of an apply report (WorkReported) and of TakeoversDecided. A
// placement may hold thousands of objects, each failing with a long message
// and large differing values; the report keeps what the status shows
// (api.MaxReportedPlacements of each kind) within a fixed number of bytes.
const (
	// MaxReportManifests bounds WorkReported.Manifests: every manifest of
	// a small placement, else the failed (to apply, or to become available),
	// drifted and differing manifests the status shows,
	// api.MaxReportedPlacements of each.
	MaxReportManifests = 4 * api.MaxReportedPlacements
	// MaxReportManifestBytes bounds the JSON of WorkReported.Manifests.
	MaxReportManifestBytes = 192 << 10
	// MaxReportTakeovers bounds the takeover decisions in one event.
	MaxReportTakeovers = 100
	// MaxReportTakeoverBytes bounds the JSON of the takeover decisions in
	// one event.
	MaxReportTakeoverBytes = 64 << 10
	// MaxPatchDetails bounds the drifts or diffs listed for one manifest or
	// takeover; MaxPatchPathBytes and MaxPatchValueBytes bound each one's
	// path and values (cut with Truncate).
	MaxPatchDetails    = 20
	MaxPatchPathBytes  = 512
	MaxPatchValueBytes = 256
)

// BoundManifests fits the manifests of a report built from every manifest of
// its work within the bounds: it counts them in Counts, cuts their messages
// and patch details, and keeps them all when they fit (the audit trail then
// has every result), else only those worth showing. A report already bounded
// (Counts set) is left as it is.
func BoundManifests(r *WorkReported) {
	if r.Counts != nil {
		return
	}
	r.Counts = countManifests(r.Manifests)
	if all, ok := allFit(r.Manifests); ok {
		r.Manifests = all
		return
	}
	r.Manifests = worthShowing(r.Manifests, r.Counts)
}

// allFit returns every manifest cut to its bounds, and whether they fit in a
// report.
func allFit(ms []ManifestResult) ([]ManifestResult, bool) {
	if len(ms) > MaxReportManifests {
		return nil, false
	}
	out := make([]ManifestResult, len(ms))
	used := 0
	for i, m := range ms {
		out[i] = boundManifest(m)
		if used += jsonLen(out[i]) + 1; used > MaxReportManifestBytes {
			return nil, false
		}
	}
	return out, true
}

// SplitTakeovers keeps in a report the takeover decisions that fit, cut to
// their bounds, and returns the others, in chunks for TakeoversDecided
// events, in order.
func SplitTakeovers(r *WorkReported) [][]TakeoverDecision {
	var rest [][]TakeoverDecision
	r.Takeovers, rest = chunkTakeovers(r.Takeovers)
	return rest
}

// countManifests counts every manifest by its results.
func countManifests(ms []ManifestResult) *ManifestCounts {
	c := &ManifestCounts{Total: len(ms)}
	for _, m := range ms {
		available := m.Available.Status == "True"
		if m.Applied.Status == "True" {
			c.Applied++
		}
		if available {
			c.Available++
		}
		if m.Available.Reason == api.ManifestNotTrackableReason {
			c.NotTrackable++
			if !available {
				c.NotTrackablePending++
			}
		}
		if len(m.Drifts) > 0 {
			c.Drifted++
		}
		if len(m.Diffs) > 0 {
			c.Diffed++
		}
	}
	return c
}

// worthShowing keeps, in order, the manifests of each kind the status shows
// (api.MaxReportedPlacements of each) within MaxReportManifestBytes, each cut
// to its bounds, and counts those left out in c.Unlisted.
func worthShowing(ms []ManifestResult, c *ManifestCounts) []ManifestResult {
	var failedApply, failedAvailable, drifted, diffed int
	out := make([]ManifestResult, 0, min(len(ms), MaxReportManifests))
	used, full := 0, false
	for _, m := range ms {
		notApplied := m.Applied.Status != "True"
		notAvailable := !notApplied && m.Available.Status != "True"
		wanted := (notApplied && failedApply < api.MaxReportedPlacements) ||
			(notAvailable && failedAvailable < api.MaxReportedPlacements) ||
			(len(m.Drifts) > 0 && drifted < api.MaxReportedPlacements) ||
			(len(m.Diffs) > 0 && diffed < api.MaxReportedPlacements)
		if !notApplied && !notAvailable && len(m.Drifts) == 0 && len(m.Diffs) == 0 {
			continue
		}
		if !wanted || full {
			c.Unlisted++
			continue
		}
		m = boundManifest(m)
		n := jsonLen(m) + 1
		if used+n > MaxReportManifestBytes {
			// The list is full: it keeps the first ones, in order.
			full = true
			c.Unlisted++
			continue
		}
		used += n
		out = append(out, m)
		if notApplied {
			failedApply++
		}
		if notAvailable {
			failedAvailable++
		}
		if len(m.Drifts) > 0 {
			drifted++
		}
		if len(m.Diffs) > 0 {
			diffed++
		}
	}
	return out
}

// boundManifest cuts a manifest's messages and patch details to their bounds.
func boundManifest(m ManifestResult) ManifestResult {
	m.Resource = boundResource(m.Resource)
	m.Applied.Message = Truncate(m.Applied.Message, MaxMessageBytes)
	m.Available.Message = Truncate(m.Available.Message, MaxMessageBytes)
	m.Drifts = boundPatches(m.Drifts)
	m.Diffs = boundPatches(m.Diffs)
	return m
}

// boundResource cuts the names of a resource identifier to Kubernetes' bounds
// (an object's own are within them; the check is against a hostile producer).
func boundResource(r api.ResourceIdentifier) api.ResourceIdentifier {
	r.Group = Truncate(r.Group, MaxNameBytes)
	r.Version = Truncate(r.Version, MaxNameBytes)
	r.Kind = Truncate(r.Kind, MaxNameBytes)
	r.Namespace = Truncate(r.Namespace, MaxNameBytes)
	r.Name = Truncate(r.Name, MaxNameBytes)
	if r.Envelope != nil {
		e := *r.Envelope
		e.Name = Truncate(e.Name, MaxNameBytes)
		e.Namespace = Truncate(e.Namespace, MaxNameBytes)
		e.Type = api.EnvelopeType(Truncate(string(e.Type), MaxNameBytes))
		r.Envelope = &e
	}
	return r
}

// boundPatches keeps the first MaxPatchDetails patch details, their paths and
// values cut to their bounds.
func boundPatches(ps []api.PatchDetail) []api.PatchDetail {
	if len(ps) == 0 {
		return ps
	}
	out := make([]api.PatchDetail, 0, min(len(ps), MaxPatchDetails))
	for _, p := range ps[:min(len(ps), MaxPatchDetails)] {
		out = append(out, api.PatchDetail{
			Path:          Truncate(p.Path, MaxPatchPathBytes),
			ValueInMember: Truncate(p.ValueInMember, MaxPatchValueBytes),
			ValueInHub:    Truncate(p.ValueInHub, MaxPatchValueBytes),
		})
	}
	return out
}

// chunkTakeovers cuts takeover decisions to their bounds and splits them into
// chunks of at most MaxReportTakeovers decisions and MaxReportTakeoverBytes:
// the first chunk and the rest.
func chunkTakeovers(ts []TakeoverDecision) ([]TakeoverDecision, [][]TakeoverDecision) {
	if len(ts) == 0 {
		return ts, nil
	}
	var chunks [][]TakeoverDecision
	var cur []TakeoverDecision
	used := 0
	for _, t := range ts {
		t.Resource = boundResource(t.Resource)
		t.Outcome = Truncate(t.Outcome, MaxNameBytes)
		t.Diffs = boundPatches(t.Diffs)
		n := jsonLen(t) + 1
		if len(cur) == MaxReportTakeovers || (len(cur) > 0 && used+n > MaxReportTakeoverBytes) {
			chunks = append(chunks, cur)
			cur, used = nil, 0
		}
		cur = append(cur, t)
		used += n
	}
	chunks = append(chunks, cur)
	return chunks[0], chunks[1:]
}

func jsonLen(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0 // cannot happen: strings, numbers and times
	}
	return len(b)
}

// ManifestCounts returns the report's counts, from its manifests for a report
// from before counts (which lists every manifest).
func (r *WorkReported) ManifestCounts() ManifestCounts {
	if r.Counts != nil {
		return *r.Counts
	}
	return *countManifests(r.Manifests)
}
