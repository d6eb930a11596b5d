package applier

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/flotilla-dev/flotilla/events"
	"github.com/flotilla-dev/flotilla/events/api"
	"github.com/flotilla-dev/flotilla/services/apply/diff"
	"github.com/flotilla-dev/flotilla/services/apply/manifest"
)

// Preview says what applying req's manifests would do to each object on the
// member, with the rules Apply follows (takeover, co-ownership, drift,
// ReportDiff), and changing nothing: every request to the member is a read or
// a dry run (DryRun=All), and the placement's state here is only read. The
// objects the placement holds here that the manifests no longer name would
// be deleted.
func (a *Applier) Preview(ctx context.Context, req *events.MemberPreviewRequest) (*events.MemberPreview, error) {
	if req.Cluster != a.cluster {
		return nil, fmt.Errorf("preview placement %s: the request is for cluster %q, this is %q", req.Placement, req.Cluster, a.cluster)
	}
	if err := a.probe(ctx); err != nil {
		return nil, fmt.Errorf("preview placement %s: %w", req.Placement, err)
	}
	// A run of its own: what it records stays in it and is thrown away.
	r := &run{a: a, p: &placement{}, strategy: StrategyWithDefaults(req.ApplyStrategy), now: a.now(), began: time.Now(),
		w: &events.WorkDesired{Cluster: req.Cluster, Placement: req.Placement, ApplyStrategy: req.ApplyStrategy}}
	objs := manifest.Parse(req.Manifests)
	for _, o := range objs {
		if o.Err == nil && o.Object != nil && o.Resource.Group == "" && o.Resource.Kind == "Namespace" {
			r.createdNamespace(o.Object.GetName()) // placed by the same apply, if missing
		}
	}
	out := &events.MemberPreview{Cluster: a.cluster, Objects: make([]events.ObjectPreview, len(objs))}
	index := make([]int, len(objs))
	for i := range index {
		index[i] = i
	}
	forEach(ctx, a.workers, index, func(i int) {
		t := &tracked{obj: objs[i]}
		out.Objects[i] = r.preview(ctx, t)
	})
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("preview placement %s: %w", req.Placement, err)
	}
	out.Objects = append(out.Objects, a.deletions(req.Placement, objs)...)
	return out, nil
}

// deletions are the objects the placement owns here that objs do not name.
func (a *Applier) deletions(placementName string, objs []manifest.Object) []events.ObjectPreview {
	p := a.existing(placementName)
	if p == nil {
		return nil
	}
	wanted := map[manifest.Key]bool{}
	for _, o := range objs {
		if o.Object != nil && o.Err == nil {
			wanted[o.Key()] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []events.ObjectPreview
	for k, t := range p.byKey {
		if !wanted[k] && t.owned {
			out = append(out, events.ObjectPreview{ResourceIdentifier: t.obj.Resource, Outcome: events.PreviewDelete,
				Message: "the placement no longer selects it: it would be deleted from the member"})
		}
	}
	slices.SortFunc(out, func(x, y events.ObjectPreview) int {
		return strings.Compare(manifest.KeyOf(x.ResourceIdentifier).String(), manifest.KeyOf(y.ResourceIdentifier).String())
	})
	return out
}

// preview is what process would do with t, found with reads and dry runs.
func (r *run) preview(ctx context.Context, t *tracked) events.ObjectPreview {
	a := r.a
	out := events.ObjectPreview{ResourceIdentifier: t.obj.Resource}
	fail := func(err error) events.ObjectPreview {
		out.Outcome, out.Message = events.PreviewError, err.Error()
		return out
	}
	if t.obj.Err != nil {
		return fail(t.obj.Err)
	}
	if err := a.resolve(t); err != nil {
		return fail(err)
	}
	live, err := a.get(ctx, t)
	if err != nil {
		return fail(err)
	}
	if r.strategy.Type == api.ApplyStrategyTypeReportDiff {
		r.reportDiff(ctx, t, live)
		if t.result.Applied.Status == statusFalse {
			return fail(fmt.Errorf("%s", t.result.Applied.Message))
		}
		out.Outcome, out.Diffs = events.PreviewNoChange, t.result.Diffs
		if len(out.Diffs) > 0 {
			out.Outcome, out.Message = events.PreviewDiff, "ReportDiff applies nothing: the member object differs"
		}
		return out
	}
	owners := []string(nil)
	if live != nil {
		owners = manifest.OwnerTokens(live.GetLabels())
	}
	ours := live != nil && manifest.OwnedBy(live.GetLabels(), r.w.Placement)
	desired := marked(t, owners, r.w.Placement)
	switch {
	case live == nil:
		_, err := a.ssa(ctx, t, desired, force(r.strategy), true)
		if apierrors.IsNotFound(err) && r.inCreatedNamespace(t) {
			// The apply creates the namespace first; a dry run cannot see it.
			out.Outcome = events.PreviewCreate
			out.Message = fmt.Sprintf("in namespace %s, which the placement creates first (not dry-run: the namespace does not exist yet)", t.obj.Object.GetNamespace())
			return out
		}
		if err != nil {
			return fail(fmt.Errorf("the member refuses it (dry run): %w", err))
		}
		out.Outcome = events.PreviewCreate
		return out
	case !ours:
		if !r.mayTakeOver(ctx, t, desired, live, owners) {
			out.Outcome, out.Message, out.Diffs = events.PreviewRefusedTakeOver, t.result.Applied.Message, t.result.Diffs
			if t.result.Applied.Reason == api.ManifestApplyFailedReason {
				out.Outcome = events.PreviewError
				return out
			}
			if out.Diffs == nil {
				// Never (or another owner) refuses without comparing: the
				// preview still shows what differs.
				if d, err := a.compare(ctx, t, desired, live, r.strategy.ComparisonOption); err == nil {
					out.Diffs = d
				}
			}
			return out
		}
		out.Outcome = events.PreviewTakeOver
	case r.strategy.WhenToApply == api.WhenToApplyTypeIfNotDrifted && live.GetLabels()[manifest.ManifestHashLabel] == t.obj.Hash:
		if r.drifted(ctx, t, desired, live) {
			out.Outcome, out.Message, out.Diffs = events.PreviewDrift, t.result.Applied.Message, t.result.Drifts
			if t.result.Applied.Reason != api.ManifestFoundDriftsReason {
				out.Outcome = events.PreviewError
			}
			return out
		}
	}
	diffs, err := r.predict(ctx, t, desired, live)
	if err != nil {
		return fail(err)
	}
	out.Diffs = diffs
	if out.Outcome == "" {
		out.Outcome = events.PreviewUpdate
		if len(diffs) == 0 {
			out.Outcome = events.PreviewNoChange
		}
	}
	return out
}

// predict dry-runs the apply of desired and returns how the outcome differs
// from live: what the apply would change.
func (r *run) predict(ctx context.Context, t *tracked, desired, live *unstructured.Unstructured) ([]api.PatchDetail, error) {
	predicted, err := r.a.ssa(ctx, t, desired, force(r.strategy), true)
	if err != nil {
		return nil, fmt.Errorf("the member refuses the apply (dry run): %w", err)
	}
	d, err := diff.Compare(predicted, live)
	if err != nil {
		return nil, err
	}
	return diff.Redact(t.obj.Object, d), nil
}
