package applier

import (
	"context"
	"errors"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/diff"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// Recheck re-examines one object of a placement after the member reported a
// change to it. live is the object as the watch saw it (read only: Recheck
// copies what it keeps), or nil when it was deleted or lost Flotilla's label. It returns the reports to publish, in
// order; none when nothing a user would see changed.
//
// A change to status or server-set metadata only refreshes availability. A
// change to what comparisons look at is drift: with whenToApply Always the
// drift is reported, the hub's values are re-applied, and the corrected state
// is reported; with IfNotDrifted the object is left alone and reported with
// FoundDrifts. An object deleted on the member is re-created.
func (a *Applier) Recheck(ctx context.Context, placementName string, key manifest.Key, live *unstructured.Unstructured) ([]*events.WorkReported, error) {
	p := a.existing(placementName)
	if p == nil {
		return nil, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.byKey[key]
	if p.work == nil || t == nil || !t.owned || p.strategy.Type == api.ApplyStrategyTypeReportDiff {
		return nil, nil
	}
	defer a.objLocks.lock(key)()

	if live != nil && t.live != nil && live.GetResourceVersion() == t.live.GetResourceVersion() && live.GetUID() == t.live.GetUID() {
		// The watch echoing what this worker last saw (its own apply, most often: a new
		// placement's objects all come back so): nothing to examine.
		return nil, nil
	}
	if live != nil {
		live = live.DeepCopy() // kept as t.live; the informer's copy is shared
	}
	if live == nil || !manifest.OwnedBy(live.GetLabels(), placementName) {
		got, err := a.get(ctx, t)
		if err != nil {
			return nil, err
		}
		live = got
	}
	before := t.result
	r := &run{a: a, p: p, w: p.work, strategy: p.strategy, now: a.now(), objects: p.objects}

	owners := []string(nil)
	if live != nil {
		owners = manifest.OwnerTokens(live.GetLabels())
	}
	ours := live != nil && manifest.OwnedBy(live.GetLabels(), placementName)
	desired := marked(t, owners, placementName)

	if ours && t.live != nil && live.GetUID() == t.live.GetUID() && diff.Digest(live) == t.syncedDigest() {
		// Only status or server-set fields changed.
		t.live = live
		return a.reportIfChanged(p, t, before), nil
	}

	if !ours {
		// Deleted on the member, or its marks were removed: put it back.
		if err := r.applyTracked(ctx, t, desired); err != nil {
			r.fail(t, api.ManifestApplyFailedReason, err)
		} else {
			t.result.Applied = appliedOK(false)
		}
		return a.reportIfChanged(p, t, before), nil
	}

	drifts, err := a.compare(ctx, t, desired, live, p.strategy.ComparisonOption)
	if err != nil {
		r.fail(t, api.ManifestFailedToRunDriftDetectionReason, err)
		return a.reportIfChanged(p, t, before), nil
	}
	t.live = live
	t.result.ObservedGeneration = live.GetGeneration()
	if len(drifts) == 0 {
		t.setSynced(live)
		t.result.Drifts = nil
		t.firstDrifted = time.Time{}
		if t.result.Applied.Reason == api.ManifestFoundDriftsReason {
			t.result.Applied = appliedOK(false)
		}
		return a.reportIfChanged(p, t, before), nil
	}
	if t.firstDrifted.IsZero() {
		t.firstDrifted = r.now
	}
	t.result.Drifts = drifts

	if p.strategy.WhenToApply == api.WhenToApplyTypeIfNotDrifted {
		r.fail(t, api.ManifestFoundDriftsReason, errors.New(api.FoundDriftsError))
		return a.reportIfChanged(p, t, before), nil
	}

	// Always: report what drifted, then put the hub's values back.
	var out []*events.WorkReported
	if first := a.reportIfChanged(p, t, before); first != nil {
		out = append(out, first...)
	}
	before = t.result
	if err := r.applyTracked(ctx, t, desired); err != nil {
		r.fail(t, api.ManifestApplyFailedReason, err)
	} else {
		t.result.Applied = appliedOK(false)
	}
	return append(out, a.reportIfChanged(p, t, before)...), nil
}

// Refresh recomputes the availability of a placement's objects from what was
// last seen (for not-trackable objects whose waiting period ended) and
// returns the report if it changed.
func (a *Applier) Refresh(placementName string) *events.WorkReported {
	p := a.existing(placementName)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.work == nil || p.report == nil {
		return nil
	}
	old := p.report
	next := a.buildReport(p, nil)
	if sameResults(old, next) {
		return nil
	}
	p.report = next
	return next
}

// reportIfChanged rebuilds the placement's report when t's result differs
// from before (availability included).
func (a *Applier) reportIfChanged(p *placement, t *tracked, before events.ManifestResult) []*events.WorkReported {
	old := p.report
	next := a.buildReport(p, nil)
	if old != nil && reflect.DeepEqual(before, t.result) && sameResults(old, next) {
		return nil
	}
	p.report = next
	return []*events.WorkReported{next}
}

// sameResults compares two reports ignoring when they were observed and the
// takeover decisions (which belong to the run that made them).
func sameResults(x, y *events.WorkReported) bool {
	if x == nil || y == nil {
		return x == y
	}
	return reflect.DeepEqual(x.Manifests, y.Manifests) && reflect.DeepEqual(x.Counts, y.Counts) && x.Applied == y.Applied && x.Available == y.Available &&
		reflect.DeepEqual(x.DiffReported, y.DiffReported)
}
